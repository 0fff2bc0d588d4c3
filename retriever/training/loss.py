"""InfoNCE over in-batch and hard negatives, shared across processes, duplicates of positives masked; and the
distillation terms (KL, MarginMSE) that match a teacher's scores of each query's own candidates beside it.

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

Distillation (``distill="kl"`` or ``"margin_mse"``; recipe keys ``loss.distill``, ``loss.distill_weight``,
``loss.infonce_weight``, ``loss.teacher_temperature``, ``loss.student_temperature``) adds a term that matches a
teacher's scores of each query's own candidates -- its group: the positive and its hard negatives, passages
``labels[i]`` up to the next query's ``labels[i + 1]`` (the collator's layout); in-batch and cross-process
negatives have no teacher score and stay InfoNCE's. With ``s_ik`` the student's score of query ``i``'s ``k``-th
candidate (the InfoNCE path's own: ``q . p``, or MaxSim by :func:`hopscotch.kernels.maxsim_reference.maxsim_scores`),
``t_ik`` the teacher's (``Passage.score``), ``z = s / T_student`` and ``y = t / T_teacher``::

    kl:          mean_i sum_k softmax(y_i)_k (log softmax(y_i)_k - log softmax(z_i)_k)       (torch's "batchmean")
    margin_mse:  mean_i mean_{k >= 1} ((z_i0 - z_ik) - (y_i0 - y_ik))^2                      (k = 0: the positive)
    total:       infonce_weight * InfoNCE + distill_weight * distill

``T_student`` None is the model's temperature (InfoNCE's, learnt with ``learn_temperature``); with both temperatures
1, ``margin_mse`` is sentence-transformers' ``MarginMSELoss`` (one positive, the mean over its negatives) and
``kl`` is its ``DistillKLDivLoss`` without the ``T_student ** 2`` factor (Tevatron's ``train_distil`` has none).
Duplicates (with ``exclude_positive_duplicates``, as InfoNCE's ``exclude``): a candidate whose docid is the
query's positive's, or an earlier candidate's of the same query, leaves both softmaxes (renormalised over the
rest) and every MarginMSE pair; a query left with one candidate adds 0 (and still counts in the mean). The term is
plain PyTorch over the ``B x G`` own-candidate scores, beside the InfoNCE kernel ``backend`` picks (both
backends, GradCache and Matryoshka alike: the term scores the full embeddings); it needs ``teacher_scores``, one per
local passage (:class:`~hopscotch.retriever.training.batches.Batch`).

Precision: the kernels compute scores, log-sum-exp and their gradients in float32 whatever the embeddings'
dtype, and the loss turns autocast off around them, so ``train.mixed_precision: bf16`` (autocast around the
model's forward only) never scores in bfloat16; the dual encoder hands out float32 embeddings under autocast.

Example::

    loss_fn = InfoNCELoss(backend="auto")
    out = loss_fn(q, p, labels, temperature, q_pos_ids, p_ids)
    out.loss.backward()          # scaled so that averaged gradients equal the global-batch gradient
    out.value                    # the global mean loss, for logging

    loss_fn = InfoNCELoss(distill="kl", teacher_temperature=1.0)   # + KL to the teacher (batch.teacher_scores)
    out = loss_fn(q, p, labels, temperature, q_pos_ids, p_ids, teacher_scores)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from hopscotch import kernels
from hopscotch.kernels.maxsim_reference import maxsim_scores
from hopscotch.kernels.select import IMPLS, checked_impl
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
#: the values of ``loss.distill``: no distillation, KL divergence, MarginMSE
DISTILL_LOSSES = ("none", "kl", "margin_mse")


def checked_backend(backend: str, key: str = "loss.backend") -> str:
    """``backend`` when it is one of :data:`BACKENDS`, else UsageError naming ``key``: the kernels' one check
    (:func:`hopscotch.kernels.select.checked_impl`) for the trainer's loss and the recipe key alike."""
    try:
        return checked_impl(backend, key)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def infonce(q: torch.Tensor, p: torch.Tensor, labels: torch.Tensor, temperature, exclude=None,
            backend: str = "auto") -> torch.Tensor:
    """``mean_i(logsumexp_j(q_i p_j / t) - q_i p_labels[i] / t)`` through the loss
    :func:`hopscotch.kernels.select_infonce_loss` picks for ``q``'s device and ``backend`` (fused on CUDA,
    the reference elsewhere, unless ``backend`` says which).

    A ``temperature`` tensor that requires a gradient is folded into ``q`` (``q / t`` at ``t = 1``), so
    it is learnt with either backend.
    """
    fn = kernels.select_infonce_loss(q.device, checked_backend(backend))
    return _with_temperature(fn, q, p, labels, temperature, exclude)


def maxsim_infonce(q: TokenEmbeddings, p: TokenEmbeddings, labels: torch.Tensor, temperature, exclude=None,
                   backend: str = "auto") -> torch.Tensor:
    """:func:`infonce` over MaxSim scores of token embeddings (their masks: the tokens that score), through
    :func:`hopscotch.kernels.select_maxsim_infonce_loss` (the same rule)."""
    fn = kernels.select_maxsim_infonce_loss(q.device, checked_backend(backend))
    return _with_temperature(fn, q.embeddings, p.embeddings, labels, temperature, exclude, q_mask=q.mask,
                             p_mask=p.mask)


def _with_temperature(fn, q, p, labels, temperature, exclude, **masks) -> torch.Tensor:
    """``fn(q, p, labels, t, exclude)``; a ``temperature`` tensor that requires a gradient is folded into ``q``
    (``q / t`` at ``t = 1``: scores are linear in ``q``, MaxSim's too), so it is learnt with either backend."""
    if torch.is_tensor(temperature) and temperature.requires_grad:
        return fn((q / temperature.to(q.dtype)), p, labels, 1.0, exclude, **masks)
    return fn(q, p, labels, float(temperature), exclude, **masks)


def candidate_rows(labels: torch.Tensor, num_passages: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(rows, valid)``, both ``[B, G]`` (``G`` the largest group): query ``i``'s own candidates are passages
    ``labels[i]`` up to ``labels[i + 1]`` (the last query's: up to ``num_passages``), its positive first."""
    labels = labels.long()
    sizes = torch.cat([labels[1:], labels.new_tensor([num_passages])]) - labels
    if bool((sizes < 1).any()):
        raise ValueError("labels: distillation expects increasing group starts (each query's positive, then its hard "
                         f"negatives, group after group), got {labels.tolist()} over {num_passages} passages")
    offsets = torch.arange(int(sizes.max()), device=labels.device)
    return (labels[:, None] + offsets).clamp(max=num_passages - 1), offsets < sizes[:, None]


def without_duplicates(rows: torch.Tensor, valid: torch.Tensor, q_pos_ids: torch.Tensor,
                       p_ids: torch.Tensor) -> torch.Tensor:
    """``valid`` less the candidates whose docid hash is the query's positive's or an earlier candidate's."""
    ids = p_ids[rows]
    k = torch.arange(rows.shape[1], device=rows.device)
    earlier = (ids[:, :, None] == ids[:, None, :]) & (k[:, None] > k[None, :]) & valid[:, None, :]
    return valid & ~(earlier.any(-1) | ((ids == q_pos_ids[:, None]) & (k > 0)))


def candidate_scores(q, p, rows: torch.Tensor) -> torch.Tensor:
    """The student's ``[B, G]`` scores of each query's own candidates (``p[rows[i]]``), as the InfoNCE path scores
    them: ``q . p`` in float32 (float64 for float64), or MaxSim over token embeddings."""
    if isinstance(q, TokenEmbeddings):
        return torch.stack([maxsim_scores(q.embeddings[i:i + 1], p.embeddings[r], q.mask[i:i + 1].bool(),
                                          p.mask[r].bool())[0] for i, r in enumerate(rows)])
    dtype = torch.promote_types(q.dtype, torch.float32)
    return (q.to(dtype) @ p.to(dtype).T).gather(1, rows)


def kl_distill(student: torch.Tensor, teacher: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """``mean_i KL(softmax(teacher_i) || softmax(student_i))`` over the ``keep`` entries of ``[B, G]`` logits (already
    divided by their temperatures): torch's ``KLDivLoss(reduction="batchmean")`` with the rest masked from both."""
    log_s = torch.log_softmax(student.masked_fill(~keep, float("-inf")), dim=1)
    log_t = torch.log_softmax(teacher.masked_fill(~keep, float("-inf")), dim=1)
    return torch.where(keep, log_t.exp() * (log_t - log_s), 0.0).sum(1).mean()


def margin_mse(student: torch.Tensor, teacher: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """``mean_i mean_k ((s_i0 - s_ik) - (t_i0 - t_ik))^2`` over the kept candidates ``k >= 1`` (column 0: the
    positive) of ``[B, G]`` logits; a query without a pair adds 0."""
    pairs = keep.clone()
    pairs[:, 0] = False
    teacher = teacher.masked_fill(~keep, 0.0)
    gap = (student[:, :1] - student) - (teacher[:, :1] - teacher)
    return (torch.where(pairs, gap.square(), 0.0).sum(1) / pairs.sum(1).clamp(min=1)).mean()


_DISTILL_FNS = {"kl": kl_distill, "margin_mse": margin_mse}


def distill_loss(kind: str, q, p, labels: torch.Tensor, student_temperature, teacher_temperature: float,
                 teacher_scores: torch.Tensor, q_pos_ids: torch.Tensor | None = None,
                 p_ids: torch.Tensor | None = None) -> torch.Tensor:
    """The mean distillation term (``kind`` ``kl`` or ``margin_mse``, see the module docstring) of queries ``q`` over
    their own candidates among the local passages ``p`` (groups starting at ``labels``); ``teacher_scores`` has one
    score per passage of ``p``; given ``q_pos_ids`` and ``p_ids``, duplicates leave the term."""
    if kind not in _DISTILL_FNS:
        raise UsageError(f"loss.distill: expected one of {DISTILL_LOSSES}, got {kind!r}")
    rows, keep = candidate_rows(labels, p.shape[0])
    if q_pos_ids is not None and p_ids is not None:
        keep = without_duplicates(rows, keep, q_pos_ids, p_ids)
    return distill_term(kind, candidate_scores(q, p, rows), rows, keep, student_temperature, teacher_temperature,
                        teacher_scores)


def distill_term(kind: str, student: torch.Tensor, rows: torch.Tensor, keep: torch.Tensor, student_temperature,
                 teacher_temperature: float, teacher_scores: torch.Tensor) -> torch.Tensor:
    """The mean ``kind`` term of the student's ``[B, G]`` scores of each query's own candidates (passages ``rows``,
    the ``keep`` ones) against ``teacher_scores`` (one per passage); :func:`distill_loss` and the cross-encoder's
    listwise loss (:mod:`~hopscotch.retriever.training.listwise`) share it."""
    if kind not in _DISTILL_FNS:
        raise UsageError(f"loss.distill: expected one of {DISTILL_LOSSES}, got {kind!r}")
    teacher = teacher_scores.to(device=student.device, dtype=student.dtype)[rows]
    if bool(torch.isnan(teacher[keep]).any()):
        raise UsageError(f"loss.distill: {kind} needs a teacher score on every passage of the batch, some have none")
    if torch.is_tensor(student_temperature):
        student_temperature = student_temperature.to(student.dtype)
    return _DISTILL_FNS[kind](student / student_temperature, teacher / teacher_temperature, keep)


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
        distill: ``none``, ``kl`` or ``margin_mse``: the distillation term (see the module docstring).
        distill_weight, infonce_weight: the loss is ``infonce_weight * InfoNCE + distill_weight * distill``.
        teacher_temperature: divides the teacher's scores. student_temperature: divides the student's (None: the
            model's ``temperature``, InfoNCE's).

    ``q`` and ``p`` are embeddings ``(n, d)``, or a multi-vector model's
    :class:`~hopscotch.retriever.model.multi_vector_trainable.TokenEmbeddings` (scored by MaxSim).
    """

    def __init__(self, backend: str = "auto", exclude_positive_duplicates: bool = True,
                 cross_process_negatives: bool = True, matryoshka=(), normalize: bool = True, distill: str = "none",
                 distill_weight: float = 1.0, infonce_weight: float = 1.0, teacher_temperature: float = 1.0,
                 student_temperature: float | None = None):
        super().__init__()
        self.backend = checked_backend(backend)
        self.exclude_positive_duplicates = exclude_positive_duplicates
        self.cross_process_negatives = cross_process_negatives
        self.matryoshka = tuple((int(d), float(w)) for d, w in matryoshka)
        self.normalize = normalize
        if distill not in DISTILL_LOSSES:
            raise UsageError(f"loss.distill: expected one of {DISTILL_LOSSES}, got {distill!r}")
        if float(infonce_weight) == 0 and distill == "none":
            raise UsageError("loss.infonce_weight: 0 leaves no loss without loss.distill (kl or margin_mse)")
        self.distill = distill
        self.distill_weight, self.infonce_weight = float(distill_weight), float(infonce_weight)
        self.teacher_temperature, self.student_temperature = float(teacher_temperature), student_temperature

    def forward(self, q: torch.Tensor, p: torch.Tensor, labels: torch.Tensor, temperature,
                q_pos_ids: torch.Tensor | None = None, p_ids: torch.Tensor | None = None,
                teacher_scores: torch.Tensor | None = None) -> LossOutput:
        """``teacher_scores``: one per passage of ``p`` (NaN: none), needed with ``distill`` (ignored without)."""
        _, size = world()
        distill = None
        if self.distill != "none":  # the query's own candidates: local passages, before any gathering
            if teacher_scores is None:
                raise UsageError(f"loss.distill: {self.distill} needs teacher scores, and the batch carries none")
            ids = (q_pos_ids, p_ids) if self.exclude_positive_duplicates else (None, None)
            with torch.autocast(q.device.type, enabled=False):
                distill = distill_loss(self.distill, q, p, labels, self._student_temperature(temperature),
                                       self.teacher_temperature, teacher_scores, *ids)
        if self.infonce_weight == 0 and distill is not None:
            return self._reduce(None, distill, q.shape[0], q.device, size)
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
        return self._reduce(local_mean, distill, q.shape[0], q.device, size)

    def _student_temperature(self, temperature):
        return temperature if self.student_temperature is None else self.student_temperature

    def _reduce(self, infonce_mean, distill_mean, local_b: int, device, size: int) -> LossOutput:
        """``LossOutput`` of this process's InfoNCE and distillation means (None: absent), each weighted and scaled so
        that DDP's averaged gradients are the global batch's (InfoNCE's local mean as it is without cross-process
        negatives); ``value`` is the weighted global mean."""
        global_b = all_reduce_sum(local_b, device)
        share = local_b * size / global_b
        terms = []  # (weighted local mean, gradient scale)
        if infonce_mean is not None:
            weighted = infonce_mean if self.infonce_weight == 1 else self.infonce_weight * infonce_mean
            terms.append((weighted, share if self.cross_process_negatives else 1.0))
        if distill_mean is not None:
            terms.append((self.distill_weight * distill_mean, share))
        local_sum = sum(term.detach().double() for term, _ in terms) * local_b
        value = all_reduce_sum(float(local_sum), device) / global_b
        loss = terms[0][0] * terms[0][1]
        for term, scale in terms[1:]:
            loss = loss + term * scale
        return LossOutput(loss, value)

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
