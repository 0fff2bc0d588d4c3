"""InfoNCE over MaxSim (late-interaction, ColBERT) scores in plain PyTorch: the reference of the fused kernel.

Queries and passages are sets of token embeddings: ``q [B, Lq, d]`` with a mask ``q_mask [B, Lq]`` and
``p [N, Lp, d]`` with a mask ``p_mask [N, Lp]`` (``True`` / nonzero = a real token). The MaxSim score of
query ``i`` and passage ``j`` is

    ``s_ij = sum_{t real} max_{u real} q[i, t] . p[j, u]``

and the loss is the single-vector InfoNCE contract of :mod:`hopscotch.kernels.reference` applied to
that ``[B, N]`` score matrix: ``labels[i]`` is the index of query ``i``'s positive in ``p``, the
logits are ``s / temperature``, ``exclude`` (``None``, a ``[B, N]`` bool mask or ``(q_pos_ids,
p_ids)``, see :mod:`hopscotch.kernels.exclusion`) drops passages from a query's denominator and never
drops its positive, and the result is the mean over queries.

Batch layout (that of sentence-transformers' multi-vector losses): with ``group_size`` passages per
query (the positive, then its hard negatives), ``p[i * group_size + n]`` is query ``i``'s ``n``-th
passage, so ``labels = arange(B) * group_size`` (:func:`group_labels`); every other query's passages
are in-batch negatives; passages gathered from other processes are further rows of ``p`` (rank
``r``'s own passages start at row ``r * B * group_size``: ``group_labels(B, group_size, rank=r)``).

Equality with sentence-transformers 6.2 (``sentence_transformers.util.maxsim`` /
``multi_vector_encoder.scoring.colbert_scores`` and ``MultiVectorMultipleNegativesRankingLoss``,
whose ``scale`` is ``1 / temperature``): :func:`maxsim_scores` performs the same operations in the
same order (``einsum("ash,bth->abst")``, padded passage tokens filled with the dtype minimum, max
over passage tokens, times the query mask, sum over query tokens, passages without a real token set
to ``EMPTY_PASSAGE_SCORE = -1e9``), so for float32 inputs with explicit masks its scores are
bit-identical, and ``maxsim_infonce_loss(..., formulation="cross_entropy")`` is
``F.cross_entropy(s * (1 / t), labels)``, bit-identical to ST's loss and to its gradient with
respect to the passages (the query gradient differs in the last bits only: ST scores the passages
group by group, so autograd sums the query gradient in another order). Differences by definition:

* ``q_mask`` / ``p_mask`` ``None`` means "every token is real"; ST instead treats all-zero token rows
  as padding when it gets no mask (pass masks to compare);
* masks are boolean (nonzero = real token); ST multiplies by a float query mask's values;
* bf16 / fp16 token similarities are computed in float32 here (as in the single-vector reference
  and the kernel); ST computes them in the input dtype and rounds them before the max;
* the default ``formulation="stable"`` computes the loss as the single-vector reference does,
  ``log1p(sum_{j != pos, kept} exp((s_ij - s_i,pos) / t))``, which keeps its digits when the loss is
  near zero; it equals the cross-entropy up to float rounding of the logits (a few ulps of
  ``max |s| / t``).

The reference builds the ``[B, N, Lq, Lp]`` token-similarity tensor (and autograd keeps its
gradient), so its memory grows as ``B N Lq Lp``; :func:`hopscotch.kernels.maxsim_infonce_loss` is
the fused kernel that never does.

>>> import torch
>>> from hopscotch.kernels.maxsim_reference import group_labels, maxsim_infonce_loss
>>> q = torch.nn.functional.normalize(torch.randn(4, 32, 128), dim=-1).requires_grad_()
>>> p = torch.nn.functional.normalize(torch.randn(8, 180, 128), dim=-1).requires_grad_()
>>> q_mask = torch.ones(4, 32, dtype=torch.bool)
>>> p_mask = torch.arange(180) < torch.randint(20, 181, (8, 1))   # ragged passages
>>> loss = maxsim_infonce_loss(q, p, group_labels(4, 2), 1.0, q_mask=q_mask, p_mask=p_mask)
>>> loss.backward()
>>> q.grad.shape, p.grad.shape
(torch.Size([4, 32, 128]), torch.Size([8, 180, 128]))
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

from .exclusion import ExcludeArg, ExcludeSpec, check_inputs, normalize_exclude
from .reference import stable_log1p_sum_exp

#: Score of a passage without a real token (sentence-transformers' ``_EMPTY_DOCUMENT_SCORE``): below
#: every real passage, finite so that no NaN appears; it gets no gradient.
EMPTY_PASSAGE_SCORE = -1e9

FORMULATIONS = ("stable", "cross_entropy")


def group_labels(num_queries: int, group_size: int, rank: int = 0, device=None) -> torch.Tensor:
    """Positives of the grouped layout: ``(rank * B + i) * group_size`` for query ``i`` (int64 ``[B]``)."""
    if num_queries < 1 or group_size < 1 or rank < 0:
        raise ValueError(f"group_labels: expected B >= 1, group_size >= 1, rank >= 0, got {num_queries}, "
                         f"{group_size}, {rank}")
    return (torch.arange(num_queries, device=device) + rank * num_queries) * group_size


def check_maxsim_inputs(q: torch.Tensor, p: torch.Tensor, labels: torch.Tensor, temperature,
                        q_mask: Optional[torch.Tensor], p_mask: Optional[torch.Tensor]):
    """Check the arguments of a MaxSim InfoNCE loss; return ``(t, q_mask, p_mask)``, masks as bool or None.

    Shapes and token masks are checked here; dtypes, devices, labels and temperature by
    :func:`hopscotch.kernels.exclusion.check_inputs` (on the first token of each side, a view).

    Raises:
        TypeError / ValueError: naming the argument and what was expected.
    """
    if not isinstance(q, torch.Tensor) or q.dim() != 3:
        raise ValueError(f"q: expected a 3-D tensor [B, Lq, d] of query token embeddings, got {_describe(q)}")
    if not isinstance(p, torch.Tensor) or p.dim() != 3:
        raise ValueError(f"p: expected a 3-D tensor [N, Lp, d] of passage token embeddings, got {_describe(p)}")
    if q.shape[1] == 0 or p.shape[1] == 0:
        raise ValueError(f"q, p: expected at least one token per side (pad and mask instead), got q "
                         f"{tuple(q.shape)} and p {tuple(p.shape)}")
    if q.shape[0] == 0 or p.shape[0] == 0:
        raise ValueError(f"q, p: expected B >= 1 and N >= 1, got q {tuple(q.shape)} and p {tuple(p.shape)}")
    t = check_inputs(q[:, 0], p[:, 0], labels, temperature)
    masks = []
    for name, mask, shape in (("q_mask", q_mask, q.shape[:2]), ("p_mask", p_mask, p.shape[:2])):
        if mask is None:
            masks.append(None)
            continue
        if not isinstance(mask, torch.Tensor) or tuple(mask.shape) != tuple(shape):
            raise ValueError(f"{name}: expected a tensor of shape {list(shape)}, got {_describe(mask)}")
        if mask.is_complex():
            raise TypeError(f"{name}: expected a bool (or 0 / 1) tensor, got {mask.dtype}")
        if mask.device != q.device:
            raise ValueError(f"{name}: expected device {q.device}, got {mask.device}")
        masks.append(mask if mask.dtype == torch.bool else mask != 0)
    return t, masks[0], masks[1]


def maxsim_scores(q: torch.Tensor, p: torch.Tensor, q_mask: Optional[torch.Tensor] = None,
                  p_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
    """The ``[B, N]`` MaxSim scores ``s_ij = sum_{t real} max_{u real} q[i, t] . p[j, u]``.

    The operations and their order are those of ``sentence_transformers.util.similarity.maxsim``, so
    float32 results are bit-identical to it (see the module docstring). Computed in float32 (float64
    for float64 inputs); masks are bool ``[B, Lq]`` / ``[N, Lp]`` or None (every token real).
    """
    compute_dtype = torch.promote_types(q.dtype, torch.float32)
    tokens = torch.einsum("ash,bth->abst", q.to(compute_dtype), p.to(compute_dtype))  # [B, N, Lq, Lp]
    if p_mask is not None:
        tokens.masked_fill_(~p_mask.unsqueeze(0).unsqueeze(2), torch.finfo(tokens.dtype).min)
    best = tokens.max(dim=-1).values  # [B, N, Lq]; the gradient flows to the arg max only
    if q_mask is not None:
        best = best * q_mask.unsqueeze(1)
    scores = best.sum(dim=-1)
    if p_mask is not None:
        scores = scores.masked_fill(~p_mask.any(dim=-1), EMPTY_PASSAGE_SCORE)
    return scores


def infonce_from_scores(scores: torch.Tensor, labels: torch.Tensor, temperature, spec: ExcludeSpec,
                        formulation: str = "stable") -> torch.Tensor:
    """Mean InfoNCE loss of a ``[B, N]`` score matrix, as :func:`hopscotch.kernels.reference.infonce_loss`
    computes it from ``q p^T`` (``formulation="stable"``), or ``F.cross_entropy(scores * (1 / t), labels)``
    with excluded entries at ``-inf`` (``"cross_entropy"``, sentence-transformers' operations)."""
    labels = labels.long()
    dropped = spec.dense_mask(labels, scores.shape[1])
    if formulation == "cross_entropy":
        logits = scores * (1 / temperature)
        if dropped is not None:
            logits = logits.masked_fill(dropped, float("-inf"))
        return F.cross_entropy(logits, labels)
    if isinstance(temperature, torch.Tensor):
        scores = scores / temperature.to(scores.dtype).reshape(())
    else:
        scores = scores / temperature
    positive = scores.gather(1, labels.unsqueeze(1))
    if dropped is None:
        dropped = torch.zeros_like(scores, dtype=torch.bool)
    dropped[torch.arange(labels.shape[0], device=labels.device), labels] = True  # leave the positive out
    margins = (scores - positive).masked_fill(dropped, float("-inf"))
    return stable_log1p_sum_exp(margins).mean()


def maxsim_infonce_loss(q: torch.Tensor, p: torch.Tensor, labels: torch.Tensor, temperature,
                        exclude: ExcludeArg = None, *, q_mask: Optional[torch.Tensor] = None,
                        p_mask: Optional[torch.Tensor] = None, formulation: str = "stable") -> torch.Tensor:
    """Mean InfoNCE loss over MaxSim scores (see the module docstring for the contract).

    Args:
        q: ``[B, Lq, d]`` query token embeddings (float16, bfloat16, float32 or float64).
        p: ``[N, Lp, d]`` passage token embeddings, same dtype and device.
        labels: ``[B]`` integer index of each query's positive in ``p`` (:func:`group_labels`).
        temperature: ``t > 0``; a float, or a scalar tensor (which then receives a gradient).
        exclude: ``None``, a ``[B, N]`` bool mask, or ``(q_pos_ids [B], p_ids [N])``: drop passage ``j``
            from query ``i`` when ``p_ids[j] == q_pos_ids[i]`` (a copy of ``i``'s positive that is another
            query's positive or hard negative); the positive itself is never dropped.
        q_mask: ``[B, Lq]`` bool (or 0 / 1) mask of real query tokens; None: all real.
        p_mask: ``[N, Lp]`` mask of real passage tokens; None: all real.
        formulation: ``"stable"`` (default: the single-vector reference's ``log1p`` form) or
            ``"cross_entropy"`` (sentence-transformers' ``F.cross_entropy(s * (1 / t), labels)``).

    Returns:
        A scalar tensor, float32 (float64 for float64 inputs); gradients flow back in the input dtype.
    """
    if formulation not in FORMULATIONS:
        raise ValueError(f"formulation: expected one of {FORMULATIONS}, got {formulation!r}")
    _, q_mask, p_mask = check_maxsim_inputs(q, p, labels, temperature, q_mask, p_mask)
    spec = normalize_exclude(exclude, labels, q.shape[0], p.shape[0])
    scores = maxsim_scores(q, p, q_mask, p_mask)
    if isinstance(temperature, torch.Tensor) and formulation == "cross_entropy":
        temperature = temperature.to(scores.dtype).reshape(())
    elif not isinstance(temperature, torch.Tensor):
        temperature = float(temperature)
    return infonce_from_scores(scores, labels, temperature, spec, formulation)


def _describe(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"a {value.dtype} tensor of shape {tuple(value.shape)}"
    return type(value).__name__
