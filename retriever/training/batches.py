"""Turning training tuples (:mod:`hopscotch.retriever.io.tuples`) into batches.

Each epoch (:func:`plan_epoch`), deterministically from ``(seed, epoch)``:

* every tuple picks one positive (rotating through its positives from epoch to epoch) and a window of
  ``group_size - 1`` hard negatives (sliding through a seeded shuffle of its negatives);
* tuples are shuffled, optionally grouped by length (sorted within mega-batches, batches shuffled);
* global batches (``per_device_batch x processes`` groups) are filled so that no passage appears twice
  and no tuple's passages include another tuple's positives; a tuple that would clash waits for a later
  batch. An incomplete last batch is dropped.

:class:`Collator` tokenizes a batch with dynamic padding and gives the labels, docid hashes and (where the
tuples carry them) teacher scores the loss needs. Queries are written in the model's query input variant
(``model.query_input``), from each tuple's context fields; ``plan_epoch(..., variants=[...], weights=[...])``
instead draws one variant per tuple per epoch (seeded, and without changing the rest of the plan): the recipe's
``data.query_inputs`` mixture. Besides the query input variants the mixture knows :data:`EMPTY_REASONING` (the
template with the text dropped: ``Reasoning: Empty``). Resuming at ``(epoch, batch)`` replays the same plan and
skips the batches already done.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.io.docids import signed_docid_hash
from hopscotch.retriever.io.tuples import Passage, TrainingTuple
from hopscotch.retriever.model.query_input import REASONING, QueryContext, QueryInput, as_context

#: the mixture variant that keeps the reasoning template but drops its text: ``Reasoning: Empty``
#: (what a search without reasoning, or a Tevatron tuple, looks like to a reasoning-aware model)
EMPTY_REASONING = "empty_reasoning"
_NO_CONTEXT = QueryContext()


def parse_variant(value: str | QueryInput, where: str = "query input variants") -> QueryInput | str:
    """A mixture entry: a :class:`QueryInput` or :data:`EMPTY_REASONING`; UsageError otherwise."""
    if isinstance(value, str) and value.strip() == EMPTY_REASONING:
        return EMPTY_REASONING
    try:
        return QueryInput.parse(value, where)
    except UsageError as exc:
        raise UsageError(f"{exc} or {EMPTY_REASONING}") from None


@dataclass(slots=True)
class Group:
    """One tuple's share of a batch: the query and its positive first, then its negatives."""

    tuple_index: int
    query: str
    reasoning: str | None
    passages: list[Passage]   # positive first
    positive_ids: frozenset   # all positive docids of the tuple
    context: QueryContext | None = None    # the tuple's context fields (None: ``reasoning`` alone)
    query_input: QueryInput | None = None  # this epoch's variant for the tuple (None: the model's own)


def _stable_seed(*parts) -> int:
    return signed_docid_hash("\x1f".join(map(str, parts))) & 0x7FFFFFFF


def make_group(t: TrainingTuple, index: int, epoch: int, seed: int, group_size: int,
               variants: Sequence[QueryInput | str] | None = None,
               weights: Sequence[float] | None = None) -> Group:
    """The tuple's positive and negative window for ``epoch`` (Tevatron's rotation, seeded per tuple) and,
    given ``variants`` (parsed, see :func:`parse_variant`), its query input variant for the epoch (its own
    seeded draw, in proportion to ``weights`` when given)."""
    tuple_seed = _stable_seed(seed, t.query_id, index)
    variant = None
    context = as_context(t)
    if variants:
        rng = random.Random(_stable_seed(seed, t.query_id, index, "variant", epoch))
        variant = rng.choices(variants, weights)[0] if weights else variants[rng.randrange(len(variants))]
        if variant == EMPTY_REASONING:
            variant, context = REASONING, _NO_CONTEXT
    positive = t.positives[(tuple_seed + epoch) % len(t.positives)]
    negs = list(t.negatives)
    want = group_size - 1
    if negs and want > 0:
        random.Random(tuple_seed).shuffle(negs)
        if len(negs) > want:
            start = (epoch * want) % len(negs)
            negs = (negs + negs)[start:start + want]
    else:
        negs = []
    return Group(index, t.query, t.reasoning, [positive] + negs[:want], frozenset(p.docid for p in t.positives),
                 context, variant)


def _length_grouped(order: list[int], tuples, batch: int, mega: int = 32) -> list[int]:
    """Sort within mega-batches of ``mega x batch`` tuples so each batch holds similar lengths."""
    out = []
    size = batch * mega
    for start in range(0, len(order), size):
        out.extend(sorted(order[start:start + size], key=lambda i: -tuples[i].length))
    return out


class _Filling:
    """A global batch being filled: groups that clash with it (a passage already in it, or one of its
    tuples' positives) are set aside."""

    def __init__(self):
        self.groups: list[Group] = []
        self.clashing: list[Group] = []
        self.used: set[str] = set()        # docids of the batch's passages
        self.positives: set[str] = set()   # all positive docids of the batch's tuples

    def offer(self, g: Group) -> None:
        ids = {p.docid for p in g.passages}
        if ids & self.used or g.positive_ids & self.used or ids & self.positives:
            self.clashing.append(g)
            return
        self.groups.append(g)
        self.used.update(ids)
        self.positives.update(g.positive_ids)


def plan_epoch(tuples: Sequence[TrainingTuple], epoch: int, seed: int, group_size: int, global_batch: int,
               length_grouping: bool = True, variants: Sequence[str | QueryInput] | None = None,
               weights: Sequence[float] | None = None) -> list[list[Group]]:
    """The epoch's global batches (lists of ``global_batch`` groups), without duplicate passages.

    ``variants`` (query input variants or :data:`EMPTY_REASONING`, e.g. ``["reasoning",
    "current_reasoning"]``): each tuple draws one per epoch, with probabilities proportional to ``weights``
    (None: uniform); None: every query in the model's own variant.
    """
    if global_batch < 1 or group_size < 1:
        raise UsageError("train.batch_size and data.group_size must be >= 1")
    variants = [parse_variant(v) for v in variants] if variants else None
    if weights is not None and (variants is None or len(weights) != len(variants) or min(weights) < 0
                                or sum(weights) <= 0):
        raise UsageError("query input weights: expected one weight >= 0 per variant, not all 0")
    rng = random.Random(_stable_seed(seed, "epoch", epoch))
    order = list(range(len(tuples)))
    rng.shuffle(order)
    if length_grouping:
        order = _length_grouped(order, tuples, global_batch)
    batches: list[list[Group]] = []
    waiting: list[Group] = []     # groups that clashed with an earlier batch: tried first next time
    stream = (make_group(tuples[i], i, epoch, seed, group_size, variants, weights) for i in order)
    exhausted = False
    while True:
        batch = _Filling()
        for g in waiting:
            if len(batch.groups) < global_batch:
                batch.offer(g)
            else:
                batch.clashing.append(g)
        while len(batch.groups) < global_batch and not exhausted:
            g = next(stream, None)
            if g is None:
                exhausted = True
            else:
                batch.offer(g)
        waiting = batch.clashing
        if len(batch.groups) < global_batch:
            break  # the rest cannot fill a batch without a duplicate: dropped this epoch
        batches.append(batch.groups)
    rng.shuffle(batches)
    return batches


@dataclass
class Batch:
    """Tokenized queries and passages of one process's share of a global batch."""

    queries: dict             # a cross-encoder's: its (query, passage) pairs, one per passage
    passages: dict            # empty for a cross-encoder
    labels: torch.Tensor      # index of each query's positive among ``passages``
    q_pos_ids: torch.Tensor   # docid hash of each query's positive
    p_ids: torch.Tensor       # docid hash of each passage
    teacher_scores: torch.Tensor | None = None  # float32 teacher score of each passage (NaN: none); None: none at all

    def to(self, device) -> Batch:
        def move(features: dict) -> dict:
            return {k: v.to(device) for k, v in features.items()}

        scores = None if self.teacher_scores is None else self.teacher_scores.to(device)
        return Batch(move(self.queries), move(self.passages), self.labels.to(device), self.q_pos_ids.to(device),
                     self.p_ids.to(device), scores)

    @property
    def num_queries(self) -> int:
        return int(self.labels.shape[0])


class Collator:
    """Tokenize groups with dynamic padding (to the longest text, rounded up to ``pad_to_multiple_of``). A model that
    scores pairs (``scores_pairs``: a cross-encoder) gets each query's side paired with its group's passages, as the
    batch's ``queries`` (``passages`` empty; the labels, ids and teacher scores as for an encoder)."""

    def __init__(self, model, pad_to_multiple_of: int | None = 8):
        self.model = model
        self.pad_to_multiple_of = pad_to_multiple_of

    def __call__(self, groups: Sequence[Group]) -> Batch:
        contexts = [g.reasoning if g.context is None else g.context for g in groups]
        variants = [g.query_input for g in groups]
        variants = None if all(v is None for v in variants) else variants
        passages = [p for g in groups for p in g.passages]
        if getattr(self.model, "scores_pairs", False):  # a cross-encoder: each query paired with its own passages
            queries = self.model.tokenize_groups([g.query for g in groups], contexts,
                                                 [[(p.title, p.text) for p in g.passages] for g in groups], variants)
            features = {}
        else:
            queries = self.model.tokenize_queries([g.query for g in groups], contexts, self.pad_to_multiple_of,
                                                  variants)
            features = self.model.tokenize_passages([(p.title, p.text) for p in passages], self.pad_to_multiple_of)
        starts, n = [], 0
        for g in groups:
            starts.append(n)
            n += len(g.passages)
        scores = None
        if any(p.score is not None for p in passages):  # the tuples' teacher scores, for the distillation losses
            scores = torch.tensor([math.nan if p.score is None else p.score for p in passages], dtype=torch.float32)
        return Batch(queries, features, torch.tensor(starts, dtype=torch.long),
                     torch.tensor([signed_docid_hash(g.passages[0].docid) for g in groups], dtype=torch.long),
                     torch.tensor([signed_docid_hash(p.docid) for p in passages], dtype=torch.long), scores)


def local_share(batch: list[Group], rank: int, world_size: int) -> list[Group]:
    """This process's slice of a global batch."""
    per = len(batch) // world_size
    return batch[rank * per:(rank + 1) * per]
