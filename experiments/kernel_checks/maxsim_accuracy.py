"""Accuracy of a MaxSim InfoNCE implementation against the float64 reference: the InfoNCE tool's bounds on MaxSim cases.

The bounds are those of :data:`hopscotch_experiments.kernel_checks.accuracy.TOLERANCES` (fp32: loss and each gradient
within ``1e-5`` relative, Frobenius norm for gradients, or ``1e-7`` absolute where the float64 loss
is below ``1e-3``; bf16 / fp16: ``1e-2``), the truth the float64 reference
(:func:`hopscotch.kernels.maxsim_reference.maxsim_infonce_loss`, stable form) on the same rounded inputs.

Cases (:func:`draw_case`) are drawn from a seed: ``B`` 1-4 queries, ``group_size`` 1-4 passages per
query (positive first), in a third of the draws the passages of a second "process" gathered in
front (cross-device negatives: the positives are then ``group_labels(B, G, rank=1)``), ragged
token masks (queries 1-``Lq`` real tokens, passages 1-``Lp``, and now and then a negative with no
real token), ``d`` 16-64, exclusion none / ids (docids with duplicates, so hard negatives that are
copies of another query's positive are dropped) / dense, a per-token temperature from
{0.02, 0.05, 0.1, 1} (the temperature is that times ``Lq``: MaxSim scores are sums over query tokens),
and in half the draws positives built from near copies of their query's tokens: near-zero losses.

Usage::

    python -m hopscotch_experiments.kernel_checks.maxsim_accuracy --draws 100      # fused (Triton interpreter on CPU)
"""

from __future__ import annotations

import math
import random
import sys
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import torch

from hopscotch.kernels.maxsim_reference import group_labels
from hopscotch.kernels.maxsim_reference import maxsim_infonce_loss as reference_maxsim_infonce_loss
from hopscotch_experiments.kernel_checks.accuracy import Case, SweepReport, compare, draw_exclude, fresh_seeds
from hopscotch_experiments.kernel_checks.accuracy import main as accuracy_main
from hopscotch_experiments.kernel_checks.accuracy import sweep as _sweep

__all__ = ["FIXED_SEEDS", "MaxSimCase", "compare", "draw_case", "fresh_seeds", "main", "sweep"]

#: Seeds checked on every test run: each exclusion kind with and without a dominant positive,
#: gathered passages, empty negatives, one-token queries (``--describe`` lists them).
FIXED_SEEDS = tuple(range(12))

_SHAPES = ((1, 1, 1, 1, 16), (1, 3, 4, 6, 16), (2, 2, 5, 9, 16), (3, 3, 7, 11, 32), (4, 2, 16, 20, 16),
           (2, 4, 33, 17, 64), (3, 1, 9, 70, 16))
_TOKEN_TEMPERATURES = (0.02, 0.05, 0.1, 1.0)


@dataclass
class MaxSimCase(Case):
    """One draw: the loss's inputs (a :class:`~hopscotch_experiments.kernel_checks.accuracy.Case` with token masks)
    and how they were made."""

    q_mask: torch.Tensor = None
    p_mask: torch.Tensor = None

    reference = staticmethod(reference_maxsim_infonce_loss)

    def describe(self) -> str:
        return (f"seed={self.seed} B={self.q.shape[0]} Lq={self.q.shape[1]} N={self.p.shape[0]} "
                f"Lp={self.p.shape[1]} d={self.q.shape[2]} t={self.temperature:g} {self.kind}")

    def loss_options(self, device) -> dict:
        return {"q_mask": self.q_mask.to(device), "p_mask": self.p_mask.to(device)}


def draw_case(seed: int) -> MaxSimCase:
    """The case drawn from ``seed`` (float32 CPU tensors; the same seed always gives the same case)."""
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    num_q, group, len_q, len_p, dim = _SHAPES[seed % len(_SHAPES)] if seed < len(_SHAPES) else rng.choice(_SHAPES)
    exclusion = ("none", "ids", "dense")[seed % 3] if seed < 12 else rng.choice(("none", "ids", "dense"))
    dominant = (seed // 3) % 2 == 1 if seed < 12 else rng.random() < 0.5
    world = 2 if rng.random() < 1 / 3 else 1
    rank = world - 1
    temperature = rng.choice(_TOKEN_TEMPERATURES) * len_q
    num_p = world * num_q * group
    q = torch.nn.functional.normalize(torch.randn(num_q, len_q, dim, generator=gen), dim=-1)
    p = torch.nn.functional.normalize(torch.randn(num_p, len_p, dim, generator=gen), dim=-1)
    q_len = torch.randint(1, len_q + 1, (num_q, 1), generator=gen)
    p_len = torch.randint(1, len_p + 1, (num_p, 1), generator=gen)
    labels = group_labels(num_q, group, rank)
    if num_p > num_q and rng.random() < 0.3:  # a negative without a real token
        empty = int(torch.randint(0, num_p, (1,), generator=gen))
        if empty not in labels.tolist():
            p_len[empty] = 0
    q_mask = torch.arange(len_q) < q_len
    p_mask = torch.arange(len_p) < p_len
    if dominant:  # each real query token has a near copy in its positive: the loss is near zero
        for i, j in enumerate(labels.tolist()):
            count = min(int(q_len[i]), len_p)
            noise = 0.05 * torch.randn(count, dim, generator=gen) / math.sqrt(dim) * 4
            p[j, :count] = torch.nn.functional.normalize(q[i, :count] + noise, dim=-1)
            p_mask[j, :count] = True
            if count < int(q_len[i]):
                q_mask[i, count:] = False
    exclude = draw_exclude(exclusion, labels, num_q, num_p, dominant, gen)
    kind = f"exclude={exclusion}" + (" dominant-positive" if dominant else "") + (" gathered" if world > 1 else "")
    if not bool(p_mask.any(dim=1).all()):
        kind += " empty-negative"
    return MaxSimCase(seed, q, p, labels, temperature, exclude, kind, q_mask=q_mask, p_mask=p_mask)


def sweep(fn: Callable, seeds: Sequence[int], dtype=torch.float32, device="cpu", **options) -> SweepReport:
    """Compare ``fn`` with float64 on the MaxSim case of every seed
    (:func:`hopscotch_experiments.kernel_checks.accuracy.sweep`'s bookkeeping): the worst errors and the
    failures."""
    return _sweep(fn, seeds, dtype, device, draw=draw_case, **options)


def _implementation(name: str) -> Callable:
    if name == "reference":
        return reference_maxsim_infonce_loss
    from hopscotch.kernels.maxsim import maxsim_infonce_loss

    return maxsim_infonce_loss


def main(argv: Optional[Sequence[str]] = None) -> int:
    return accuracy_main(argv, prog="python -m hopscotch_experiments.kernel_checks.maxsim_accuracy", doc=__doc__,
                         draws=100, draw=draw_case, fixed_seeds=FIXED_SEEDS, implementation=_implementation,
                         label="maxsim ", swept_seeds=FIXED_SEEDS)

if __name__ == "__main__":
    sys.exit(main())
