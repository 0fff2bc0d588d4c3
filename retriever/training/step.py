"""One forward/backward over a batch: plain, or GradCache-style in mini-batches with the same gradients.

:func:`full_step` encodes the whole batch with gradients (optionally in length-sorted sub-batches,
see :meth:`hopscotch.retriever.model.dual_encoder.DualEncoder.encode`) and back-propagates the loss.

:func:`cached_step` is GradCache (Gao et al., 2021): (1) embed every mini-batch without gradients,
recording the RNG state before each; (2) compute the loss over all embeddings and its gradient with
respect to them (and to a learnable temperature); (3) re-embed each mini-batch with gradients, the RNG
state restored so dropout draws the same masks, and back-propagate ``sum(embedding * cached_grad)``.
Memory is that of one mini-batch; the parameter gradients equal those of the full batch. Under DDP
every mini-batch but the last runs under ``no_sync``; the last query and passage mini-batches share
one forward so that a single synchronising backward touches every parameter. A multi-vector model's
representations (:class:`~hopscotch.retriever.model.multi_vector_trainable.TokenEmbeddings`) are cached as
one padded ``(n, L, dim)`` tensor and its mask, each mini-batch in its first columns. The batch's teacher scores
(distillation) reach the loss in both steps, so the cached step's gradients are the full batch's with them too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import torch

from hopscotch.retriever.model.dual_encoder import length_chunks, trim_padding
from hopscotch.retriever.model.multi_vector_trainable import TokenEmbeddings, scored_lengths
from hopscotch.retriever.model.rng import capture_rng
from hopscotch.retriever.training.batches import Batch


def full_step(model, batch: Batch, loss_fn, backward: Callable, loss_scale: float = 1.0,
              encode_chunk_size: int | None = None) -> float:
    """Encode, score, back-propagate; returns the global mean loss."""
    q, p, temperature = model(queries=batch.queries, passages=batch.passages, chunk_size=encode_chunk_size)
    out = loss_fn(q, p, batch.labels, temperature, batch.q_pos_ids, batch.p_ids, **_teacher(batch))
    backward(out.loss * loss_scale)
    return out.value


def _teacher(batch: Batch) -> dict:
    """The batch's teacher scores as the loss's keyword (none when the tuples carry none: any loss function works)."""
    return {} if batch.teacher_scores is None else {"teacher_scores": batch.teacher_scores}


def _chunks(features: dict, chunk_size: int, padding_side: str) -> list[tuple[torch.Tensor, dict]]:
    """Length-sorted mini-batches ``(rows, features)``, each trimmed to its longest row."""
    lengths = scored_lengths(features)  # attention_mask.sum(1), query augmentation positions counted
    return [(rows, trim_padding(features, rows, int(lengths[rows].max()), padding_side))
            for rows in length_chunks(lengths, chunk_size)]


def _cache(model, chunks, side: str, device, total: int):
    """Embeddings of every chunk, in input order, without gradients; plus each chunk's RNG state."""
    states, reps = [], None
    with torch.no_grad():
        for rows, features in chunks:
            states.append(capture_rng(device))
            q, p, _ = model(**{side: features})
            emb = q if side == "queries" else p
            if isinstance(emb, TokenEmbeddings):  # the first chunk is the longest (length-sorted)
                if reps is None:
                    reps = TokenEmbeddings(emb.embeddings.new_zeros((total, *emb.embeddings.shape[1:])),
                                           emb.mask.new_zeros((total, emb.mask.shape[1])))
                width = emb.mask.shape[1]
                reps.embeddings[rows, :width] = emb.embeddings
                reps.mask[rows, :width] = emb.mask
                continue
            if reps is None:
                reps = emb.new_empty((total, emb.shape[1]))
            reps[rows] = emb
    return reps, states


def _dot(emb, grad: torch.Tensor) -> torch.Tensor:
    """``sum(emb * grad)``: the surrogate whose gradient is the cached one (token embeddings: against the
    gradient's first columns, as many as the mini-batch has)."""
    if isinstance(emb, TokenEmbeddings):
        emb = emb.embeddings
        grad = grad[:, :emb.shape[1]]
    return torch.sum(emb * grad.to(emb.dtype))


def _leaf(reps):
    """The tensor of cached representations that the gradient is taken against."""
    return reps.embeddings if isinstance(reps, TokenEmbeddings) else reps


@dataclass(frozen=True)
class GradCache:
    """How :func:`cached_step` runs: the mini-batch size, the model's padding side and whether its
    temperature is learnt, the wrapped model's ``no_sync()`` context (skips the gradient all-reduce)
    and the loss scale."""

    chunk_size: int
    padding_side: str = "right"
    learn_temperature: bool = False
    no_sync: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext
    loss_scale: float = 1.0


def cached_step(model, batch: Batch, loss_fn, backward: Callable, temperature: torch.Tensor, cache: GradCache,
                sync: bool = True) -> float:
    """GradCache step; returns the global mean loss.

    ``temperature`` is the current value (only its gradient is computed here); ``sync=False`` keeps
    the final backward local too (a non-final gradient-accumulation micro-step).
    """
    device = batch.labels.device
    q_chunks = _chunks(batch.queries, cache.chunk_size, cache.padding_side)
    p_chunks = _chunks(batch.passages, cache.chunk_size, cache.padding_side)
    q_reps, q_states = _cache(model, q_chunks, "queries", device, batch.num_queries)
    p_reps, p_states = _cache(model, p_chunks, "passages", device, batch.p_ids.shape[0])
    value, q_grad, p_grad, t_grad = _embedding_grads(loss_fn, batch, q_reps, p_reps, temperature, cache)
    _replay(model, backward, cache.no_sync, "queries", q_chunks[:-1], q_states[:-1], q_grad)
    _replay(model, backward, cache.no_sync, "passages", p_chunks[:-1], p_states[:-1], p_grad)

    (q_rows, q_feat), (p_rows, p_feat) = q_chunks[-1], p_chunks[-1]
    with (contextlib.nullcontext() if sync else cache.no_sync()):
        q, p, temp = model(queries=q_feat, passages=p_feat, query_rng=q_states[-1], passage_rng=p_states[-1])
        surrogate = _dot(q, q_grad[q_rows]) + _dot(p, p_grad[p_rows])
        if t_grad is not None:
            surrogate = surrogate + temp * t_grad
        backward(surrogate)
    return value


def _embedding_grads(loss_fn, batch: Batch, q_reps, p_reps, temperature: torch.Tensor, cache: GradCache):
    """The loss over the cached embeddings and its gradient w.r.t. them (and to a learnt temperature)."""
    _leaf(q_reps).requires_grad_(True)
    _leaf(p_reps).requires_grad_(True)
    t = temperature.detach().clone().requires_grad_(cache.learn_temperature)
    out = loss_fn(q_reps, p_reps, batch.labels, t if cache.learn_temperature else float(t), batch.q_pos_ids,
                  batch.p_ids, **_teacher(batch))
    (out.loss * cache.loss_scale).backward()
    return out.value, _leaf(q_reps).grad, _leaf(p_reps).grad, t.grad if cache.learn_temperature else None


def _replay(model, backward: Callable, no_sync: Callable, side: str, chunks, states, grad) -> None:
    """Re-embed each chunk with gradients (its RNG state restored) and back-propagate its cached gradient,
    without synchronising."""
    rng_key = "query_rng" if side == "queries" else "passage_rng"
    for (rows, features), state in zip(chunks, states):
        with no_sync():
            q, p, _ = model(**{side: features, rng_key: state})
            backward(_dot(q if side == "queries" else p, grad[rows]))
