"""The InfoNCE loss in plain PyTorch: the reference the fused kernel is tested against.

It builds the whole ``[B, N]`` score matrix, so its memory grows as ``B x N``; use it on CPU, for
small batches, and as ground truth. :func:`hopscotch.kernels.infonce_loss` computes the same value and
gradients tile by tile on a GPU.

>>> import torch
>>> from hopscotch.kernels.reference import infonce_loss
>>> q = torch.nn.functional.normalize(torch.randn(4, 64), dim=-1).requires_grad_()
>>> p = torch.nn.functional.normalize(torch.randn(32, 64), dim=-1).requires_grad_()
>>> labels = torch.arange(4) * 8                      # query i's positive is passage 8 i
>>> loss = infonce_loss(q, p, labels, temperature=0.05)
>>> loss.backward()
>>> q.grad.shape, p.grad.shape
(torch.Size([4, 64]), torch.Size([32, 64]))
"""

from __future__ import annotations

import torch

from .exclusion import ExcludeArg, check_inputs, normalize_exclude


def infonce_loss(q: torch.Tensor, p: torch.Tensor, labels: torch.Tensor, temperature,
                 exclude: ExcludeArg = None) -> torch.Tensor:
    """Mean InfoNCE loss ``mean_i log1p(S_i)``, ``S_i = sum_{j != pos, kept} exp((s_ij - s_i,pos) / t)``.

    This is ``logsumexp_j(s_ij / t) - s_i,pos / t`` written without cancellation: both terms of that
    difference are near ``1 / t`` (20 for ``t = 0.05``) when the positive dominates, so the difference
    loses most of its digits; ``log1p`` of a sum that leaves the positive out keeps them all (the
    loss is exact to float rounding of the score differences, relative, however small it is).

    The sum of row ``i`` runs over the passages not excluded for query ``i``, minus the positive
    ``labels[i]`` (which is never excluded), so a row whose every other passage is excluded has
    ``S_i = 0``, loss 0 and gradient 0. Gradients with respect to the scores (divided by ``t``):
    ``-S_i / (1 + S_i)`` for the positive, ``exp((s_ij - s_i,pos) / t) / (1 + S_i)`` for the others.

    Args:
        q: ``[B, d]`` query embeddings (float16, bfloat16, float32 or float64).
        p: ``[N, d]`` passage embeddings, same dtype and device as ``q``.
        labels: ``[B]`` integer index of each query's positive in ``p``.
        temperature: ``t > 0``; a float, or a scalar tensor (which then receives a gradient).
        exclude: ``None``, a ``[B, N]`` bool mask, or ``(q_pos_ids [B], p_ids [N])`` meaning
            "drop passage j from query i when ``p_ids[j] == q_pos_ids[i]``" (see
            :mod:`hopscotch.kernels.exclusion`).

    Returns:
        A scalar tensor. Scores are computed in float32 (float64 for float64 inputs) whatever the
        input dtype, so the loss is float32 (float64); gradients flow back in the input dtype.
    """
    t = check_inputs(q, p, labels, temperature)
    spec = normalize_exclude(exclude, labels, q.shape[0], p.shape[0])
    compute_dtype = torch.promote_types(q.dtype, torch.float32)
    scores = q.to(compute_dtype) @ p.to(compute_dtype).T
    if isinstance(temperature, torch.Tensor):
        scores = scores / temperature.to(compute_dtype).reshape(())
    else:
        scores = scores / t
    labels = labels.long()
    positive = scores.gather(1, labels.unsqueeze(1))
    dropped = spec.dense_mask(labels, p.shape[0])
    if dropped is None:
        dropped = torch.zeros_like(scores, dtype=torch.bool)
    dropped[torch.arange(labels.shape[0], device=labels.device), labels] = True  # leave the positive out
    margins = (scores - positive).masked_fill(dropped, float("-inf"))
    return stable_log1p_sum_exp(margins).mean()


def stable_log1p_sum_exp(margins: torch.Tensor) -> torch.Tensor:
    """Row-wise ``log(1 + sum_j exp(margins_ij))`` without overflow or cancellation.

    ``-inf`` entries count as absent. With ``m_i = max(0, max_j margins_ij)`` (held constant):
    ``m_i + log1p(expm1(-m_i) + sum_j exp(margins_ij - m_i))``; for ``m_i = 0`` that is
    ``log1p(S_i)`` exactly, for ``m_i > 0`` the result is at least ``m_i`` and no digit cancels.
    """
    shift = margins.detach().amax(dim=1, keepdim=True).clamp(min=0.0)
    total = torch.exp(margins - shift).sum(dim=1, keepdim=True)
    return (shift + torch.log1p(torch.expm1(-shift) + total)).squeeze(1)
