"""The InfoNCE loss in plain PyTorch: the reference the fused kernel is tested against.

It builds the whole ``[B, N]`` score matrix, so its memory grows as ``B x N``; use it on CPU, for
small batches, and as ground truth. :func:`kernels.infonce_loss` computes the same value and
gradients tile by tile on a GPU.

Example::

    import torch
    from kernels.reference import infonce_loss

    q = torch.nn.functional.normalize(torch.randn(4, 64), dim=-1).requires_grad_()
    p = torch.nn.functional.normalize(torch.randn(32, 64), dim=-1).requires_grad_()
    labels = torch.arange(4) * 8                      # query i's positive is passage 8 i
    loss = infonce_loss(q, p, labels, temperature=0.05)
    loss.backward()
"""

from __future__ import annotations

import torch

from .exclusion import ExcludeArg, check_inputs, normalize_exclude


def infonce_loss(
    q: torch.Tensor,
    p: torch.Tensor,
    labels: torch.Tensor,
    temperature,
    exclude: ExcludeArg = None,
) -> torch.Tensor:
    """Mean InfoNCE loss ``mean_i( logsumexp_j(s_ij / t) - s_i,labels[i] / t )`` with ``s = q p^T``.

    The log-sum-exp of row ``i`` runs over the passages not excluded for query ``i``; the positive
    ``labels[i]`` is never excluded, so a row whose every other passage is excluded has loss 0.
    Excluded scores are set to ``-inf`` before the log-sum-exp, whose gradient there is
    ``exp(-inf) = 0``: no NaN.

    Args:
        q: ``[B, d]`` query embeddings (float16, bfloat16, float32 or float64).
        p: ``[N, d]`` passage embeddings, same dtype and device as ``q``.
        labels: ``[B]`` integer index of each query's positive in ``p``.
        temperature: ``t > 0``; a float, or a scalar tensor (which then receives a gradient).
        exclude: ``None``, a ``[B, N]`` bool mask, or ``(q_pos_ids [B], p_ids [N])`` meaning
            "drop passage j from query i when ``p_ids[j] == q_pos_ids[i]``" (see
            :mod:`kernels.exclusion`).

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
    mask = spec.dense_mask(labels, p.shape[0])
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    lse = torch.logsumexp(scores, dim=1)
    positive = scores.gather(1, labels.long().unsqueeze(1)).squeeze(1)
    return (lse - positive).mean()
