"""Gathering embeddings from every process, keeping the gradient of the local shard.

``gather_with_grad`` is an ``all_gather`` whose backward sums the gradient that every process computed
for each shard and hands each process the part for its own rows, so that passages embedded on rank 1
receive the gradient of rank 0's queries that used them as negatives. Shards may differ in length.
Without an initialised process group every function is the identity.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def world() -> tuple[int, int]:
    """``(rank, world_size)``; ``(0, 1)`` outside distributed training."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def gather_sizes(n: int, device) -> list[int]:
    """The first-dimension size of every process's shard."""
    _, size = world()
    if size == 1:
        return [n]
    t = torch.tensor([n], dtype=torch.int64, device=device)
    out = [torch.zeros_like(t) for _ in range(size)]
    dist.all_gather(out, t)
    return [int(x) for x in out]


def _all_gather_padded(t: torch.Tensor, sizes: list[int]) -> torch.Tensor:
    longest = max(sizes)
    padded = t
    if t.shape[0] < longest:
        padded = torch.cat([t, t.new_zeros((longest - t.shape[0], *t.shape[1:]))])
    out = [torch.empty_like(padded) for _ in sizes]
    dist.all_gather(out, padded.contiguous())
    return torch.cat([o[:n] for o, n in zip(out, sizes)])


class _GatherWithGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t: torch.Tensor, sizes: list[int]):
        ctx.sizes = sizes
        return _all_gather_padded(t, sizes)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        grad = grad.contiguous()
        dist.all_reduce(grad)  # every process's gradient w.r.t. every shard, summed
        rank, _ = world()
        start = sum(ctx.sizes[:rank])
        return grad[start:start + ctx.sizes[rank]], None


def gather_with_grad(t: torch.Tensor, sizes: list[int] | None = None) -> tuple[torch.Tensor, int]:
    """Concatenate every process's ``t`` along dim 0; returns it and the offset of the local rows."""
    rank, size = world()
    if size == 1:
        return t, 0
    sizes = sizes or gather_sizes(t.shape[0], t.device)
    return _GatherWithGrad.apply(t, sizes), sum(sizes[:rank])


def gather_tokens_with_grad(embeddings: torch.Tensor, mask: torch.Tensor, sizes: list[int] | None = None
                            ) -> tuple[tuple[torch.Tensor, torch.Tensor], int]:
    """Every process's token embeddings ``(n, L, d)`` and masks ``(n, L)``, the token axis padded to the longest
    ``L`` of all processes (zero vectors, masked out) first; returns ``((embeddings, mask), offset)`` with the
    gradient of the local rows' vectors kept, as :func:`gather_with_grad`."""
    _, size = world()
    if size == 1:
        return (embeddings, mask), 0
    longest = max(gather_sizes(embeddings.shape[1], embeddings.device))
    pad = longest - embeddings.shape[1]
    embeddings = torch.nn.functional.pad(embeddings, (0, 0, 0, pad))
    mask = torch.nn.functional.pad(mask.to(torch.uint8), (0, pad))
    sizes = sizes or gather_sizes(embeddings.shape[0], embeddings.device)
    gathered, offset = gather_with_grad(embeddings, sizes)
    return (gathered, gather_no_grad(mask, sizes).bool()), offset


def gather_no_grad(t: torch.Tensor, sizes: list[int] | None = None) -> torch.Tensor:
    """Concatenate every process's ``t`` (ids, labels) along dim 0."""
    _, size = world()
    if size == 1:
        return t
    sizes = sizes or gather_sizes(t.shape[0], t.device)
    return _all_gather_padded(t, sizes)


def all_reduce_sum(value: float, device) -> float:
    """Sum a number over processes."""
    _, size = world()
    if size == 1:
        return float(value)
    t = torch.tensor([float(value)], dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return float(t)
