"""Capturing and restoring random-number-generator state, so a forward pass can be replayed exactly.

GradCache encodes every mini-batch twice (once without gradients, once with); dropout must draw the
same masks both times, so the state before the first pass is captured and restored before the second.
"""

from __future__ import annotations

import torch


def capture_rng(device: torch.device | None = None):
    """The CPU generator state, plus the CUDA one of ``device`` when it is a GPU."""
    cuda = None
    if device is not None and device.type == "cuda":
        cuda = (device, torch.cuda.get_rng_state(device))
    return torch.get_rng_state(), cuda


def restore_rng(state) -> None:
    """Undo :func:`capture_rng`; ``None`` leaves the generators alone."""
    if state is None:
        return
    cpu, cuda = state
    torch.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state(cuda[1], cuda[0])


def encode_sides(encode, queries=None, passages=None, chunk_size=None, query_rng=None, passage_rng=None):
    """``(q, p)``: ``encode(features, side, chunk_size)`` of either or both sides, each after restoring its
    captured RNG state (GradCache replay); a side not given is None. The trainable models' ``forward``."""
    q = p = None
    if queries is not None:
        restore_rng(query_rng)
        q = encode(queries, "query", chunk_size)
    if passages is not None:
        restore_rng(passage_rng)
        p = encode(passages, "passage", chunk_size)
    return q, p
