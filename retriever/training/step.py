"""One forward/backward over a batch: plain, or GradCache-style in mini-batches with the same gradients.

:func:`full_step` encodes the whole batch with gradients (optionally in length-sorted sub-batches,
see :meth:`hopscotch.retriever.model.dual_encoder.DualEncoder.encode`) and back-propagates the loss.

:func:`cached_step` is GradCache (Gao et al., 2021): (1) embed every mini-batch without gradients,
recording the RNG state before each; (2) compute the loss over all embeddings and its gradient with
respect to them (and to a learnable temperature); (3) re-embed each mini-batch with gradients, the RNG
state restored so dropout draws the same masks, and back-propagate ``sum(embedding * cached_grad)``.
Memory is that of one mini-batch; the parameter gradients equal those of the full batch. Under DDP
every mini-batch but the last runs under ``no_sync``; the last query and passage mini-batches share
one forward so that a single synchronising backward touches every parameter.
"""

from __future__ import annotations

import contextlib
from typing import Callable

import torch

from hopscotch.retriever.model.dual_encoder import trim_padding
from hopscotch.retriever.model.rng import capture_rng
from hopscotch.retriever.training.batches import Batch


def full_step(model, batch: Batch, loss_fn, backward: Callable, loss_scale: float = 1.0,
              encode_chunk_size: int | None = None) -> float:
    """Encode, score, back-propagate; returns the global mean loss."""
    q, p, temperature = model(queries=batch.queries, passages=batch.passages, chunk_size=encode_chunk_size)
    out = loss_fn(q, p, batch.labels, temperature, batch.q_pos_ids, batch.p_ids)
    backward(out.loss * loss_scale)
    return out.value


def _chunks(features: dict, chunk_size: int, padding_side: str) -> list[tuple[torch.Tensor, dict]]:
    """Length-sorted mini-batches ``(rows, features)``, each trimmed to its longest row."""
    lengths = features["attention_mask"].sum(1)
    order = torch.argsort(lengths, descending=True, stable=True)
    out = []
    for start in range(0, len(order), chunk_size):
        rows = order[start:start + chunk_size]
        out.append((rows, trim_padding(features, rows, int(lengths[rows].max()), padding_side)))
    return out


def _cache(model, chunks, side: str, device, total: int):
    """Embeddings of every chunk, in input order, without gradients; plus each chunk's RNG state."""
    states, reps = [], None
    with torch.no_grad():
        for rows, features in chunks:
            states.append(capture_rng(device))
            q, p, _ = model(**{side: features})
            emb = q if side == "queries" else p
            if reps is None:
                reps = emb.new_empty((total, emb.shape[1]))
            reps[rows] = emb
    return reps, states


def cached_step(model, batch: Batch, loss_fn, backward: Callable, chunk_size: int, padding_side: str,
                learn_temperature: bool, temperature: torch.Tensor, sync: bool = True,
                no_sync: Callable = contextlib.nullcontext, loss_scale: float = 1.0) -> float:
    """GradCache step; ``no_sync()`` is the wrapped model's context that skips gradient all-reduce.

    ``temperature`` is the current value (only its gradient is computed here); ``sync=False`` keeps
    the final backward local too (a non-final gradient-accumulation micro-step).
    """
    device = batch.labels.device
    q_chunks = _chunks(batch.queries, chunk_size, padding_side)
    p_chunks = _chunks(batch.passages, chunk_size, padding_side)
    q_reps, q_states = _cache(model, q_chunks, "queries", device, batch.num_queries)
    p_reps, p_states = _cache(model, p_chunks, "passages", device, batch.p_ids.shape[0])

    q_reps.requires_grad_(True)
    p_reps.requires_grad_(True)
    t = temperature.detach().clone().requires_grad_(learn_temperature)
    out = loss_fn(q_reps, p_reps, batch.labels, t if learn_temperature else float(t), batch.q_pos_ids, batch.p_ids)
    (out.loss * loss_scale).backward()
    q_grad, p_grad = q_reps.grad, p_reps.grad
    t_grad = t.grad if learn_temperature else None

    for side, chunks, states, grad in (("queries", q_chunks, q_states, q_grad), ("passages", p_chunks, p_states, p_grad)):
        rng_key = "query_rng" if side == "queries" else "passage_rng"
        for (rows, features), state in zip(chunks[:-1], states[:-1]):
            with no_sync():
                q, p, _ = model(**{side: features, rng_key: state})
                emb = q if side == "queries" else p
                backward(torch.sum(emb * grad[rows].to(emb.dtype)))

    (q_rows, q_feat), (p_rows, p_feat) = q_chunks[-1], p_chunks[-1]
    with (contextlib.nullcontext() if sync else no_sync()):
        q, p, temp = model(queries=q_feat, passages=p_feat, query_rng=q_states[-1], passage_rng=p_states[-1])
        surrogate = torch.sum(q * q_grad[q_rows].to(q.dtype)) + torch.sum(p * p_grad[p_rows].to(p.dtype))
        if t_grad is not None:
            surrogate = surrogate + temp * t_grad
        backward(surrogate)
    return out.value
