"""The cross-encoder's loss: listwise softmax cross-entropy over each query's own candidates, and the same
distillation terms as the encoders' (KL, MarginMSE) beside it.

A cross-encoder scores each (query, passage) pair of its group on its own (``s_ik``: the logit of query ``i`` with
its ``k``-th candidate; ``k = 0`` the positive, the others its hard negatives; passages ``labels[i]`` up to
``labels[i + 1]``, the collator's layout, as :func:`~hopscotch.retriever.training.loss.candidate_rows` reads it).
There are no in-batch negatives: another query's passages were never paired with this query. With ``T`` the
temperature (``loss.temperature``; cross-encoder recipes use 1, the logits themselves)::

    listwise:  mean_i -log softmax(s_i / T)_0          (cross-entropy of the positive among the group)
    total:     infonce_weight * listwise + distill_weight * distill     (``loss.infonce_weight`` weighs it)

the ranking loss of RankNet's listwise successors (ListNet with a one-hot target; sentence-transformers'
``CrossEntropyLoss`` over the group, ``MultipleNegativesRankingLoss`` without in-batch negatives). Duplicates (with
``exclude_positive_duplicates``): a candidate whose docid is the query's positive's, or an earlier candidate's, leaves
the softmax. The distillation term (``loss.distill``) is :func:`~hopscotch.retriever.training.loss.distill_term` over
the same ``[B, G]`` logits and the passages' teacher scores. Scores and log-sum-exp run in float32 whatever the
autocast; each process's mean is weighted as the encoders' loss weighs a local term (DDP averages the gradients).

Example (not run)::

    loss_fn = ListwiseLoss()
    out = loss_fn(None, scores, labels, 1.0, q_pos_ids, p_ids)   # scores: one logit per passage of the batch
"""

from __future__ import annotations

import torch

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.training.distributed import world
from hopscotch.retriever.training.loss import InfoNCELoss, LossOutput, candidate_rows, distill_term, without_duplicates


def listwise_cross_entropy(logits: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """``mean_i -log softmax(logits_i)_0`` over the ``keep`` entries of ``[B, G]`` logits (column 0: the positive)."""
    log_p = torch.log_softmax(logits.masked_fill(~keep, float("-inf")), dim=1)
    return -log_p[:, 0].mean()


class ListwiseLoss(InfoNCELoss):
    """Listwise cross-entropy of a cross-encoder's pair scores (and ``distill``'s term); the arguments are
    :class:`~hopscotch.retriever.training.loss.InfoNCELoss`'s (``backend``, ``cross_process_negatives`` and
    ``matryoshka`` have nothing to act on: each pair is scored once, on its own process)."""

    def __init__(self, exclude_positive_duplicates: bool = True, distill: str = "none", distill_weight: float = 1.0,
                 infonce_weight: float = 1.0, teacher_temperature: float = 1.0,
                 student_temperature: float | None = None):
        super().__init__("reference", exclude_positive_duplicates, cross_process_negatives=False, distill=distill,
                         distill_weight=distill_weight, infonce_weight=infonce_weight,
                         teacher_temperature=teacher_temperature, student_temperature=student_temperature)

    def forward(self, q, p: torch.Tensor, labels: torch.Tensor, temperature, q_pos_ids: torch.Tensor | None = None,
                p_ids: torch.Tensor | None = None, teacher_scores: torch.Tensor | None = None) -> LossOutput:
        """``p``: one score per passage of the batch (``q`` is unused: the scores are the pairs'); ``teacher_scores``:
        one per passage (NaN: none), needed with ``distill``."""
        _, size = world()
        rows, keep = candidate_rows(labels, p.shape[0])
        if self.exclude_positive_duplicates and q_pos_ids is not None and p_ids is not None:
            keep = without_duplicates(rows, keep, q_pos_ids, p_ids)
        with torch.autocast(p.device.type, enabled=False):
            student = p.float()[rows]
            listwise = distill = None
            if self.infonce_weight:
                t = temperature.float() if torch.is_tensor(temperature) else float(temperature)
                listwise = listwise_cross_entropy(student / t, keep)
            if self.distill != "none":
                if teacher_scores is None:
                    raise UsageError(f"loss.distill: {self.distill} needs teacher scores, and the batch carries none")
                distill = distill_term(self.distill, student, rows, keep, self._student_temperature(temperature),
                                       self.teacher_temperature, teacher_scores)
        return self._reduce(listwise, distill, labels.shape[0], p.device, size)
