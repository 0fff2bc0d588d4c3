"""Late fusion by reasoning length (issue 9): nDCG@10 of ``w * q_variant + (1 - w) * q_query`` for every w,
per dev set and per bucket of reasoning-context words, on the tune and test questions of the agent ablation's
sets (its sets and trained indexes under the work folder).

The words counted are the whole reasoning context (all the thinking so far), what the dense searcher's
``--query-mix-max-words`` gate counts.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from hopscotch_experiments.ablations.ablation_runs import late_fusion_runs
from hopscotch_experiments.agent_data.eval_sets import INDEX_NAMES

from hopscotch.retriever.evaluation.metrics import evaluate
from hopscotch.retriever.io.qrels import read_qrels
from hopscotch.retriever.io.queries import read_queries

WEIGHTS = [i / 10 for i in range(11)]
EDGES = [0, 50, 200, 1000, 3000, 10000, 10**9]


def per_query_scores(work: Path, name: str, model: str, variant: str, encoder=None):
    """``{w: {qid: ndcg@10}}``, the qids' splits and reasoning-context word counts, and the encoder used
    (no word gate: every context is searched at every w, so the buckets show where a gate belongs)."""
    folder = work / "sets" / name
    split = {q: s for s in ("tune", "test") for q in (folder / f"{s}_qids.txt").read_text().split()}
    queries = [q for q in read_queries(folder / "queries.jsonl") if q.qid in split]
    runs, encoder = late_fusion_runs(work / "idx" / f"{INDEX_NAMES.get(name, name)}.trained", model, variant, queries,
                                     encoder=encoder, weights=WEIGHTS, k=100)
    qrels = read_qrels(folder / "qrels.tsv")
    scores = {}
    for w, run in runs.items():
        result = evaluate(run, {q.qid: qrels[q.qid] for q in queries}, ["ndcg@10"])
        scores[w] = {q: v["ndcg@10"] for q, v in result.per_query.items()}
    words = {q.qid: len((q.reasoning or "").split()) for q in queries}
    return scores, split, words, encoder


def report(work: Path, names: list[str], model: str, variant: str) -> Iterator[str]:
    """The tables' lines, set by set (yielded as each set is scored): the median reasoning-context words, then
    per split the mean nDCG@10 at every w over all questions and over each bucket of 10 or more."""
    encoder = None
    for name in names:
        scores, split, words, encoder = per_query_scores(work, name, model, variant, encoder)
        yield f"{name}: reasoning-context words median {np.median(list(words.values())):g}"
        for part in ("tune", "test"):
            qids = [q for q in words if split[q] == part]
            yield (f"  {part:5s} all         n={len(qids):4d} "
                   + " ".join(f"{w:.1f}:{np.mean([scores[w][q] for q in qids]):.3f}" for w in WEIGHTS))
            for lo, hi in itertools.pairwise(EDGES):
                bucket = [q for q in qids if lo <= words[q] < hi]
                if len(bucket) >= 10:
                    yield (f"  {part:5s} [{lo},{hi}) n={len(bucket):4d} "
                           + " ".join(f"{w:.1f}:{np.mean([scores[w][q] for q in bucket]):.3f}" for w in WEIGHTS))
