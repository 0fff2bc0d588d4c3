"""InfoNCE over in-batch and hard negatives, shared across processes, duplicates of positives masked.

B queries each come with a group of G passages (its positive first, then G-1 hard negatives); every
query is scored against all ``B x G`` passages of the batch and, in distributed training, against the
passages of every process (gathered with their gradient, labels offset by the rank's position). A
passage whose docid equals a query's positive -- the same document sampled as another query's
negative, or as another process's positive -- leaves that query's denominator: it is not a negative.

The arithmetic runs in :mod:`kernels`, in the loss :func:`hopscotch.kernels.select_infonce_loss` picks: the
fused Triton kernel on CUDA, the PyTorch reference elsewhere (``backend="fused"`` or ``"reference"`` forces
one; ``fused`` where Triton cannot run falls back to the reference with a warning). A multi-vector model's
queries and passages (:class:`~hopscotch.retriever.model.multi_vector_trainable.TokenEmbeddings`: padded
token vectors and their masks) are scored by MaxSim (:func:`hopscotch.kernels.select_maxsim_infonce_loss`) with
the same labels, exclusions and gathering, the token axis padded to the longest across processes.

With ``matryoshka=((384, 1.0), (128, 0.5), ...)`` (recipe keys ``loss.matryoshka_dims`` / ``loss.matryoshka_weights``)
the loss is ``sum_d weight_d * InfoNCE(first d dimensions of q and p)``, each prefix L2-normalised again when the
model normalises (:func:`hopscotch.retriever.model.matryoshka.truncate`). The prefixes are cut from the gathered
embeddings, so in-batch, hard and cross-process negatives, the duplicate masks, the backend and GradCache (which
calls this loss on its cached embeddings) apply to every prefix alike; without it the loss is the plain one.

Precision: the kernels compute scores, log-sum-exp and their gradients in float32 whatever the embeddings'
dtype, and the loss turns autocast off around them, so ``train.mixed_precision: bf16`` (autocast around the
model's forward only) never scores in bfloat16; the dual encoder hands out float32 embeddings under autocast.

Example::

    loss_fn = InfoNCELoss(backend="auto")
    out = loss_fn(q, p, labels, temperature, q_pos_ids, p_ids)
    out.loss.backward()          # scaled so that averaged gradients equal the global-batch gradient
    out.value                    # the global mean loss, for logging
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from hopscotch import kernels
from hopscotch.kernels.select import IMPLS
from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.model.matryoshka import truncate
from hopscotch.retriever.model.multi_vector_trainable import TokenEmbeddings
from hopscotch.retriever.training.distributed import (
    all_reduce_sum,
    gather_no_grad,
    gather_sizes,
    gather_tokens_with_grad,
    gather_with_grad,
    world,
)

#: the values of ``loss.backend``: the ``impl`` of :func:`hopscotch.kernels.select_infonce_loss`
BACKENDS = IMPLS


def _checked(backend: str) -> str:
    if backend not in BACKENDS:
        raise UsageError(f"loss.backend: expected one of {BACKENDS}, got {backend!r}")
    return backend


def infonce(q: torch.Tensor, p: torch.Tensor, labels: torch.Tensor, temperature, exclude=None,
            backend: str = "auto") -> torch.Tensor:
    """``mean_i(logsumexp_j(q_i p_j / t) - q_i p_labels[i] / t)`` through the loss
    :func:`hopscotch.kernels.select_infonce_loss` picks for ``q``'s device and ``backend`` (fused on CUDA,
    the reference elsewhere, unless ``backend`` says which).

    A ``temperature`` tensor that requires a gradient is folded into ``q`` (``q / t`` at ``t = 1``), so
    it is learnt with either backend.
    """
    fn = kernels.select_infonce_loss(q.device, _checked(backend))
    return _with_temperature(fn, q, p, labels, temperature, exclude)


def maxsim_infonce(q: TokenEmbeddings, p: TokenEmbeddings, labels: torch.Tensor, temperature, exclude=None,
                   backend: str = "auto") -> torch.Tensor:
    """:func:`infonce` over MaxSim scores of token embeddings (their masks: the tokens that score), through
    :func:`hopscotch.kernels.select_maxsim_infonce_loss` (the same rule)."""
    fn = kernels.select_maxsim_infonce_loss(q.device, _checked(backend))
    return _with_temperature(fn, q.embeddings, p.embeddings, labels, temperature, exclude, q_mask=q.mask,
                             p_mask=p.mask)


def _with_temperature(fn, q, p, labels, temperature, exclude, **masks) -> torch.Tensor:
    """``fn(q, p, labels, t, exclude)``; a ``temperature`` tensor that requires a gradient is folded into ``q``
    (``q / t`` at ``t = 1``: scores are linear in ``q``, MaxSim's too), so it is learnt with either backend."""
    if torch.is_tensor(temperature) and temperature.requires_grad:
        return fn((q / temperature.to(q.dtype)), p, labels, 1.0, exclude, **masks)
    return fn(q, p, labels, float(temperature), exclude, **masks)


@dataclass
class LossOutput:
    loss: torch.Tensor   # what to call backward on (see InfoNCELoss)
    value: float         # the mean loss over the global batch


class InfoNCELoss(torch.nn.Module):
    """Contrastive loss over the batch's passages and, under ``torch.distributed``, every process's.

    Each process scores its own queries against all gathered passages. Its ``loss`` is its queries'
    share of the global mean times the number of processes, so that after DDP averages the gradients
    they equal those of one process computing the mean over the concatenated batch.

    Args:
        backend: ``auto`` (fused on CUDA, reference otherwise), ``fused`` or ``reference``.
        exclude_positive_duplicates: mask passages whose docid equals the query's positive.
        cross_process_negatives: gather passages from every process (off: local negatives only).
        matryoshka: ``((dim, weight), ...)``: sum InfoNCE over these prefixes of the embeddings (empty: off).
        normalize: re-normalise each prefix (the model L2-normalises its embeddings).

    ``q`` and ``p`` are embeddings ``(n, d)``, or a multi-vector model's
    :class:`~hopscotch.retriever.model.multi_vector_trainable.TokenEmbeddings` (scored by MaxSim).
    """

    def __init__(self, backend: str = "auto", exclude_positive_duplicates: bool = True,
                 cross_process_negatives: bool = True, matryoshka=(), normalize: bool = True):
        super().__init__()
        self.backend = _checked(backend)
        self.exclude_positive_duplicates = exclude_positive_duplicates
        self.cross_process_negatives = cross_process_negatives
        self.matryoshka = tuple((int(d), float(w)) for d, w in matryoshka)
        self.normalize = normalize

    def forward(self, q: torch.Tensor, p: torch.Tensor, labels: torch.Tensor, temperature,
                q_pos_ids: torch.Tensor | None = None, p_ids: torch.Tensor | None = None) -> LossOutput:
        _, size = world()
        offset = 0
        if size > 1 and self.cross_process_negatives:
            sizes = gather_sizes(p.shape[0], p.device)
            if isinstance(p, TokenEmbeddings):
                p, offset = gather_tokens_with_grad(p.embeddings, p.mask, sizes)
                p = TokenEmbeddings(*p)
            else:
                p, offset = gather_with_grad(p, sizes)
            if p_ids is not None:
                p_ids = gather_no_grad(p_ids, sizes)
        exclude = None
        if self.exclude_positive_duplicates and q_pos_ids is not None and p_ids is not None:
            exclude = (q_pos_ids, p_ids)
        with torch.autocast(q.device.type, enabled=False):  # scores and log-sum-exp in float32, always
            local_mean = self._score(q, p, labels + offset, temperature, exclude)
        local_sum = local_mean.detach().double() * q.shape[0]
        global_b = all_reduce_sum(q.shape[0], q.device)
        value = all_reduce_sum(float(local_sum), q.device) / global_b
        scale = q.shape[0] * size / global_b if self.cross_process_negatives else 1.0
        return LossOutput(local_mean * scale, value)

    def _score(self, q, p, labels, temperature, exclude) -> torch.Tensor:
        """The local mean loss: MaxSim for token embeddings, else InfoNCE or its weighted sum over the prefixes."""
        if isinstance(q, TokenEmbeddings):
            if self.matryoshka:
                raise UsageError("loss.matryoshka_dims: a multi-vector model's token vectors have no prefixes")
            return maxsim_infonce(q, p, labels, temperature, exclude, self.backend)
        if not self.matryoshka:
            return infonce(q, p, labels, temperature, exclude, self.backend)
        return sum(weight * infonce(truncate(q, dim, self.normalize), truncate(p, dim, self.normalize), labels,
                                    temperature, exclude, self.backend) for dim, weight in self.matryoshka)
