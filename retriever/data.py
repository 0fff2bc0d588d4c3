"""Training tuples: reading DR-Synth / Tevatron / AgentIR JSONL and turning them into batches.

A tuple is ``{query_id, query, reasoning?, positive_passages: [{docid, title, text}], negative_passages}``.
AgentIR's files carry no ``reasoning`` field but a query string ``Reasoning: ...\\n\\nQuery: ...``;
it is split back into the two so the reasoning can be cut from the left at training time.

Each epoch (:func:`plan_epoch`), deterministically from ``(seed, epoch)``:

* every tuple picks one positive (rotating through its positives from epoch to epoch) and a window of
  ``group_size - 1`` hard negatives (sliding through a seeded shuffle of its negatives);
* tuples are shuffled, optionally grouped by length (sorted within mega-batches, batches shuffled);
* global batches (``per_device_batch x processes`` groups) are filled so that no passage appears twice
  and no tuple's passages include another tuple's positives; a tuple that would clash waits for a later
  batch. An incomplete last batch is dropped.

:class:`Collator` tokenizes a batch with dynamic padding and gives the labels and docid hashes the loss
needs. Resuming at ``(epoch, batch)`` replays the same plan and skips the batches already done.
"""

from __future__ import annotations

import os
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import torch

from retriever.errors import FormatError, UsageError
from retriever.io.common import read_jsonl
from retriever.loss import docid_hash

_AGENTIR_QUERY = re.compile(r"^\s*Reasoning:\s*(.*?)\n\nQuery:\s*(.*)$", re.S)


@dataclass(frozen=True, slots=True)
class Passage:
    docid: str
    title: str
    text: str


@dataclass(slots=True)
class TrainingTuple:
    query_id: str
    query: str
    reasoning: str | None
    positives: list[Passage]
    negatives: list[Passage]

    @property
    def length(self) -> int:
        """A cheap size proxy (characters) used to group similar-length tuples."""
        return len(self.query) + len(self.reasoning or "")


@dataclass(slots=True)
class Group:
    """One tuple's share of a batch: the query and its positive first, then its negatives."""

    tuple_index: int
    query: str
    reasoning: str | None
    passages: list[Passage]   # positive first
    positive_ids: frozenset   # all positive docids of the tuple


def _passage(obj, path, lineno, field: str) -> Passage:
    if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
        raise FormatError(path, lineno, f"'{field}' entries as {{docid, title, text}} objects with a string text",
                          repr(obj)[:80])
    text = obj["text"]
    title = obj.get("title") or ""
    docid = obj.get("docid", obj.get("_id", obj.get("id")))
    docid = str(docid) if docid is not None else f"text:{docid_hash(title + chr(0) + text):x}"
    return Passage(docid, str(title), text)


def parse_tuple(obj: dict, path, lineno) -> TrainingTuple:
    """One JSONL record to a :class:`TrainingTuple`; hard negatives equal to a positive are dropped."""
    query = obj.get("query")
    if not isinstance(query, str) or not query.strip():
        raise FormatError(path, lineno, "a non-empty string 'query'", f"keys {sorted(obj)[:8]}")
    qid = obj.get("query_id", obj.get("qid", obj.get("_id")))
    if qid is None:
        raise FormatError(path, lineno, "a 'query_id'", f"keys {sorted(obj)[:8]}")
    reasoning = obj.get("reasoning")
    if reasoning is not None and not isinstance(reasoning, str):
        raise FormatError(path, lineno, "a string 'reasoning'", type(reasoning).__name__)
    if reasoning is None and (m := _AGENTIR_QUERY.match(query)):
        reasoning, query = m.group(1).strip(), m.group(2).strip()
        reasoning = None if reasoning in ("", "Empty") else reasoning
    for key in ("positive_passages", "negative_passages"):
        if not isinstance(obj.get(key, []), list):
            raise FormatError(path, lineno, f"'{key}' as a list", type(obj.get(key)).__name__)
    positives = [_passage(x, path, lineno, "positive_passages") for x in obj.get("positive_passages") or []]
    if not positives:
        raise FormatError(path, lineno, "at least one entry in 'positive_passages'", "none")
    pos_ids = {p.docid for p in positives}
    seen, negatives = set(), []
    for x in obj.get("negative_passages") or []:
        neg = _passage(x, path, lineno, "negative_passages")
        if neg.docid not in pos_ids and neg.docid not in seen:
            seen.add(neg.docid)
            negatives.append(neg)
    return TrainingTuple(str(qid), query, reasoning, positives, negatives)


def _files(source: str) -> list[Path]:
    p = Path(source)
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.name.endswith((".jsonl", ".jsonl.gz")))
        if not files:
            raise UsageError(f"data.train: {source} is a folder without *.jsonl files")
        return files
    return [p]


def _hf_rows(name: str) -> Iterable[tuple[int, dict]]:
    if os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("HF_DATASETS_OFFLINE") == "1":
        raise UsageError(f"data.train: {name!r} is not a local file and the Hugging Face hub is offline "
                         "(HF_HUB_OFFLINE=1)")
    import datasets

    name, _, split = name.partition(":")
    for i, row in enumerate(datasets.load_dataset(name, split=split or "train"), start=1):
        yield i, dict(row)


def read_training_tuples(sources: str | os.PathLike | Sequence[str | os.PathLike]) -> list[TrainingTuple]:
    """Read tuples from JSONL files or folders (or ``org/name[:split]`` Hugging Face datasets when online)."""
    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    tuples: list[TrainingTuple] = []
    for source in sources:
        source = str(source)
        if Path(source).exists():
            for f in _files(source):
                tuples.extend(parse_tuple(obj, f, n) for n, obj in read_jsonl(f, "a training tuple object"))
        elif re.fullmatch(r"[\w.-]+/[\w.-]+(:\w+)?", source):
            tuples.extend(parse_tuple(obj, source, n) for n, obj in _hf_rows(source))
        else:
            raise UsageError(f"data.train: {source}: no such file or folder")
    if not tuples:
        raise UsageError(f"data.train: no training tuples in {list(map(str, sources))}")
    return tuples


def _stable_seed(*parts) -> int:
    return docid_hash("\x1f".join(map(str, parts))) & 0x7FFFFFFF


def make_group(t: TrainingTuple, index: int, epoch: int, seed: int, group_size: int) -> Group:
    """The tuple's positive and negative window for ``epoch`` (Tevatron's rotation, seeded per tuple)."""
    tuple_seed = _stable_seed(seed, t.query_id, index)
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
    return Group(index, t.query, t.reasoning, [positive] + negs[:want], frozenset(p.docid for p in t.positives))


def _length_grouped(order: list[int], tuples, batch: int, mega: int = 32) -> list[int]:
    """Sort within mega-batches of ``mega x batch`` tuples so each batch holds similar lengths."""
    out = []
    size = batch * mega
    for start in range(0, len(order), size):
        out.extend(sorted(order[start:start + size], key=lambda i: -tuples[i].length))
    return out


def plan_epoch(tuples: Sequence[TrainingTuple], epoch: int, seed: int, group_size: int, global_batch: int,
               length_grouping: bool = True) -> list[list[Group]]:
    """The epoch's global batches (lists of ``global_batch`` groups), without duplicate passages."""
    if global_batch < 1 or group_size < 1:
        raise UsageError("train.batch_size and data.group_size must be >= 1")
    rng = random.Random(_stable_seed(seed, "epoch", epoch))
    order = list(range(len(tuples)))
    rng.shuffle(order)
    if length_grouping:
        order = _length_grouped(order, tuples, global_batch)
    batches: list[list[Group]] = []
    waiting: list[Group] = []     # groups that clashed with an earlier batch: tried first next time
    stream = (make_group(tuples[i], i, epoch, seed, group_size) for i in order)
    exhausted = False
    while True:
        current: list[Group] = []
        used: set[str] = set()        # docids of the batch's passages
        positives: set[str] = set()   # all positive docids of the batch's tuples
        still: list[Group] = []

        def offer(g: Group) -> None:
            ids = {p.docid for p in g.passages}
            if ids & used or g.positive_ids & used or ids & positives:
                still.append(g)
                return
            current.append(g)
            used.update(ids)
            positives.update(g.positive_ids)

        for g in waiting:
            if len(current) < global_batch:
                offer(g)
            else:
                still.append(g)
        while len(current) < global_batch and not exhausted:
            g = next(stream, None)
            if g is None:
                exhausted = True
            else:
                offer(g)
        waiting = still
        if len(current) < global_batch:
            break  # the rest cannot fill a batch without a duplicate: dropped this epoch
        batches.append(current)
    rng.shuffle(batches)
    return batches


@dataclass
class Batch:
    """Tokenized queries and passages of one process's share of a global batch."""

    queries: dict
    passages: dict
    labels: torch.Tensor      # index of each query's positive among ``passages``
    q_pos_ids: torch.Tensor   # docid hash of each query's positive
    p_ids: torch.Tensor       # docid hash of each passage

    def to(self, device) -> "Batch":
        move = lambda d: {k: v.to(device) for k, v in d.items()}  # noqa: E731
        return Batch(move(self.queries), move(self.passages), self.labels.to(device), self.q_pos_ids.to(device),
                     self.p_ids.to(device))

    @property
    def num_queries(self) -> int:
        return int(self.labels.shape[0])


class Collator:
    """Tokenize groups with dynamic padding (to the longest text, rounded up to ``pad_to_multiple_of``)."""

    def __init__(self, model, pad_to_multiple_of: int | None = 8):
        self.model = model
        self.pad_to_multiple_of = pad_to_multiple_of

    def __call__(self, groups: Sequence[Group]) -> Batch:
        queries = self.model.tokenize_queries([g.query for g in groups], [g.reasoning for g in groups],
                                              self.pad_to_multiple_of)
        passages = [p for g in groups for p in g.passages]
        features = self.model.tokenize_passages([(p.title, p.text) for p in passages], self.pad_to_multiple_of)
        starts, n = [], 0
        for g in groups:
            starts.append(n)
            n += len(g.passages)
        return Batch(queries, features, torch.tensor(starts, dtype=torch.long),
                     torch.tensor([docid_hash(g.passages[0].docid) for g in groups], dtype=torch.long),
                     torch.tensor([docid_hash(p.docid) for p in passages], dtype=torch.long))


def local_share(batch: list[Group], rank: int, world_size: int) -> list[Group]:
    """This process's slice of a global batch."""
    per = len(batch) // world_size
    return batch[rank * per:(rank + 1) * per]
