"""Teacher scores for distillation: every passage of a tuple file scored by a stronger ranker than the student.

``hopscotch synth --mode teacher`` reads tuples (DR-Synth's, trajectory-use ones, Tevatron's: any file
:func:`~hopscotch.retriever.io.tuples.read_training_tuples` reads) and writes them again with each passage's
``score`` the teacher's, over the tuple's own candidates (its positives and hard negatives), the score it had before
kept as ``oracle_score``. The distillation losses (``loss.distill: kl | margin_mse``) then match the student's
softmax over those candidates to the teacher's. Teachers (:data:`TEACHERS`):

* ``hybrid``: the reasoning-aware hybrid an agent is served, scoring each candidate: BM25 of the query expanded
  with the tuple's reasoning (the BM25 searcher's default expansion, as ``hopscotch search --reasoning``) and the
  cosine of the dense model's reasoning-aware query vector (its own instruction, length and query input, as the
  dense searcher encodes it) with the passage's vector (its passage prefix and length), the two lists fused by the
  hybrid searcher's default fusion over the tuple's candidates;
* ``cross-encoder``: a cross-encoder's logit of each (query side, passage) pair, the query side in the
  cross-encoder's own template and cut (:mod:`hopscotch.retriever.model.cross_encoder`);
* ``both``: the mean of the two, each standardised over the tuple's candidates (z-scores), so neither scale
  dominates.

A passage missing from the BM25 index scores 0 there (counted in the stats: give the index of the tuples' corpus).
The output (``OUT``) and its stats (``OUT.stats.json``: the teacher, its models, the first stage's defaults, counts)
are written atomically; each line gets ``teacher`` beside its passages.

Example (not run)::

    spec = TeacherSpec("hybrid", corpus="corpus.jsonl", model="runs/agent/final")
    annotate(["tuples.jsonl"], "teacher/tuples.jsonl", spec)
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from hopscotch.data_synth.pipeline import default_stats_path
from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.index.bm25 import BM25Index
from hopscotch.retriever.io.common import atomic_write, write_json
from hopscotch.retriever.io.corpus import read_corpus
from hopscotch.retriever.io.queries import context_dict
from hopscotch.retriever.io.tuples import passage_dict, read_training_tuples
from hopscotch.retriever.model.config import model_settings
from hopscotch.retriever.model.dense_encoder import DenseEncoder
from hopscotch.retriever.model.query_input import searcher_query_input
from hopscotch.retriever.model.query_template import format_document, format_queries
from hopscotch.retriever.searchers.bm25 import BM25Searcher
from hopscotch.retriever.searchers.fusion import default_settings

TEACHERS = ("hybrid", "cross-encoder", "both")
#: tuples scored together (their passages encoded and scored in one pass)
CHUNK = 64


@dataclass
class TeacherSpec:
    """Which teacher and its parts: ``bm25_index`` (a saved index) or ``corpus`` (indexed in memory) and the dense
    ``model`` for the hybrid; ``reranker`` (a cross-encoder folder) for the cross-encoder."""

    teacher: str
    bm25_index: str | os.PathLike | None = None
    corpus: str | os.PathLike | None = None
    model: str | os.PathLike | None = None
    reranker: str | os.PathLike | None = None
    batch_size: int = 32

    def __post_init__(self):
        if self.teacher not in TEACHERS:
            raise UsageError(f"--teacher: expected one of {', '.join(TEACHERS)}, got {self.teacher!r}")
        hybrid = self.teacher in ("hybrid", "both")
        if hybrid and (self.model is None or (self.bm25_index is None) == (self.corpus is None)):
            raise UsageError(f"--teacher {self.teacher} needs --teacher-model M (a dense model) and one of "
                             "--bm25-index DIR or --corpus FILE (the tuples' corpus)")
        if self.teacher in ("cross-encoder", "both") and self.reranker is None:
            raise UsageError(f"--teacher {self.teacher} needs --teacher-reranker R (a cross-encoder folder)")
        if not hybrid and (self.model or self.bm25_index or self.corpus):
            raise UsageError("--teacher-model, --bm25-index and --corpus are the hybrid teacher's: give --teacher "
                             "hybrid or both")


class HybridTeacher:
    """Reasoning-aware BM25 and a dense model's cosine of each candidate, fused by the hybrid's default fusion."""

    def __init__(self, spec: TeacherSpec):
        if spec.bm25_index is not None:
            index = BM25Index.load(spec.bm25_index)
        else:
            index = BM25Index.build(read_corpus(spec.corpus), show_progress=False)
        self.bm25 = BM25Searcher(index)  # its default expansion, as hopscotch search --reasoning
        self.settings = model_settings(spec.model)
        self.query_input = searcher_query_input(None, self.settings.query_input)
        self.queries = DenseEncoder(spec.model, max_length=self.settings.query_max_len, batch_size=spec.batch_size)
        self.passages = DenseEncoder(spec.model, max_length=self.settings.passage_max_len, batch_size=spec.batch_size)
        # as the dense searcher: the reasoning is cut to the model's query length (an untrained model: its own)
        self.query_max_len = self.settings.query_max_len or self.queries.model.max_seq_length
        self.fusion = default_settings()
        self.missing = 0

    def describe(self) -> dict:
        return {"bm25": f"bm25 {self.bm25.expansion.describe()}", "model": str(self.settings.path),
                "query_input": str(self.query_input), "fusion": self.fusion.describe()}

    def bm25_scores(self, t) -> list[float]:
        index = self.bm25.index
        parts = self.bm25.expansion.text_parts(t.query, t)
        scores = (index.weighted_scores(index.term_weights(parts)) if parts is not None
                  else index.corpus_scores(t.query))
        rows = [index.row(p.docid) for p in t.positives + t.negatives]
        self.missing += sum(r is None for r in rows)
        return [0.0 if r is None or scores is None else float(scores[r]) for r in rows]

    def scores(self, tuples: Sequence) -> list[list[float]]:
        texts = format_queries(self.queries.model.tokenizer, self.query_max_len, [t.query for t in tuples],
                               tuples, instruction=self.settings.instruction, reasoning_aware=True,
                               query_input=self.query_input)
        q = self.queries.encode_texts(texts)
        docs = [self.settings.passage_prefix + format_document(p.title, p.text)
                for t in tuples for p in t.positives + t.negatives]
        d = self.passages.encode_texts(docs)
        out, at = [], 0
        for i, t in enumerate(tuples):
            ids = [f"{k}" for k in range(len(t.positives) + len(t.negatives))]
            dense = (d[at:at + len(ids)] @ q[i]).tolist()
            at += len(ids)
            fused = dict(self.fusion.apply(_best_first(ids, self.bm25_scores(t)), _best_first(ids, dense), k=len(ids)))
            out.append([float(fused[k]) for k in ids])
        return out


class CrossEncoderTeacher:
    """A cross-encoder's logit of each (query side, passage) pair."""

    def __init__(self, spec: TeacherSpec):
        from hopscotch.retriever.model.cross_encoder import load_cross_encoder_model

        self.model = load_cross_encoder_model(spec.reranker)
        self.path, self.batch_size = str(spec.reranker), spec.batch_size

    def describe(self) -> dict:
        return {"reranker": self.path, "query_input": self.model.config.query_input,
                "truncation": self.model.config.truncation}

    def scores(self, tuples: Sequence) -> list[list[float]]:
        sides = self.model.format_queries([t.query for t in tuples], tuples, reasoning_aware=True)
        groups = [self.model.format_documents([(p.title, p.text) for p in t.positives + t.negatives]) for t in tuples]
        flat = self.model.score([s for s, g in zip(sides, groups) for _ in g], [d for g in groups for d in g],
                                self.batch_size)
        out, at = [], 0
        for g in groups:
            out.append(flat[at:at + len(g)])
            at += len(g)
        return out


def _best_first(ids: list[str], scores: list[float]) -> list[tuple[str, float]]:
    """A ranked list (best first, ties by id), as the hybrid searcher fuses its halves' lists."""
    return sorted(zip(ids, scores), key=lambda h: (-h[1], h[0]))


def standardised(scores: Sequence[float]) -> np.ndarray:
    """``(s - mean) / sd`` over one tuple's candidates (0 where they are all equal)."""
    arr = np.asarray(scores, dtype=np.float64)
    sd = float(arr.std())
    return (arr - arr.mean()) / sd if sd > 0 else np.zeros_like(arr)


def annotate(files: Sequence[str | os.PathLike], out: str | os.PathLike, spec: TeacherSpec,
             stats_path: str | os.PathLike | None = None) -> dict:
    """Write ``files``' tuples to ``out`` with each passage's ``score`` the teacher's; returns the stats (also
    written to ``stats_path``, default ``OUT.stats.json``)."""
    tuples = read_training_tuples(list(files))
    if not tuples:
        raise UsageError(f"{', '.join(map(str, files))}: no tuples to score")
    teachers = []
    if spec.teacher in ("hybrid", "both"):
        teachers.append(HybridTeacher(spec))
    if spec.teacher in ("cross-encoder", "both"):
        teachers.append(CrossEncoderTeacher(spec))
    passages = 0
    with atomic_write(out) as fh:
        for start in range(0, len(tuples), CHUNK):
            chunk = tuples[start:start + CHUNK]
            per_teacher = [t.scores(chunk) for t in teachers]
            for i, t in enumerate(chunk):
                scores = per_teacher[0][i] if len(teachers) == 1 else \
                    ((standardised(per_teacher[0][i]) + standardised(per_teacher[1][i])) / 2).tolist()
                if not all(math.isfinite(s) for s in scores):
                    raise UsageError(f"tuple {t.query_id}: the teacher gave a non-finite score")
                entries = [_entry(p, s) for p, s in zip(t.positives + t.negatives, scores)]
                row = {"query_id": t.query_id, "query": t.query, "reasoning": t.reasoning, **context_dict(t),
                       "teacher": spec.teacher, "positive_passages": entries[:len(t.positives)],
                       "negative_passages": entries[len(t.positives):]}
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
                passages += len(entries)
    stats = {"teacher": spec.teacher, "tuples": len(tuples), "passages": passages,
             "inputs": [str(f) for f in files], "teachers": [t.describe() for t in teachers],
             "missing_from_bm25": sum(getattr(t, "missing", 0) for t in teachers)}
    write_json(stats_path or default_stats_path(out), stats)
    return stats


def _entry(passage, score: float) -> dict:
    """The passage with the teacher's ``score``, the score it had (the oracle's) kept as ``oracle_score``."""
    out = passage_dict(passage.docid, passage.title, passage.text, score)
    if passage.score is not None:
        out["oracle_score"] = passage.score
    return out
