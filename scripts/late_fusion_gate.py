"""Late fusion by reasoning length (issue 9): nDCG@10 of ``w * q_variant + (1 - w) * q_query`` for every w,
per dev set and per bucket of reasoning-context words, on the tune and test questions of the ablation's sets.

    .venv/bin/python scripts/late_fusion_gate.py --work /tmp/hopscotch-ablation --model /tmp/agent_run/final \
        [--variant reasoning_tail:128] [--sets hotpotqa,musique,world,tongyi]

Needs the ablation's sets and trained indexes under ``--work`` (``scripts/agent_ablation.py --trained``
builds them). The words counted are the whole reasoning context (all the thinking so far), what the
dense searcher's ``--late-fusion-max-words`` gate counts. Prints the tables recorded in docs/benchmarks.md
("Long reasoning: late fusion with a word gate").
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import numpy as np

WEIGHTS = [i / 10 for i in range(11)]
EDGES = [0, 50, 200, 1000, 3000, 10000, 10**9]


def per_query_scores(work: Path, name: str, model: str, variant: str, encoder=None):
    """``{w: {qid: ndcg@10}}``, the qids' splits and reasoning-context word counts, and the encoder used
    (no word gate: every context is searched at every w, so the buckets show where a gate belongs)."""
    from agent_ablation import late_fusion_runs
    from agent_eval_sets import INDEX_NAMES

    from hopscotch.retriever.evaluation.metrics import evaluate
    from hopscotch.retriever.io.qrels import read_qrels
    from hopscotch.retriever.io.queries import read_queries
    from hopscotch.retriever.model.query_input import ReasoningContext

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
    words = {q.qid: len(str(ReasoningContext.of(q)).split()) for q in queries}
    return scores, split, words, encoder


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/hopscotch-ablation"))
    ap.add_argument("--model", required=True, help="the trained model the ablation indexed with")
    ap.add_argument("--variant", default="reasoning_tail:128")
    ap.add_argument("--sets", default="hotpotqa,musique,world,tongyi")
    args = ap.parse_args(argv)
    encoder = None
    for name in args.sets.split(","):
        scores, split, words, encoder = per_query_scores(args.work, name, args.model, args.variant, encoder)
        print(f"{name}: reasoning-context words median {np.median(list(words.values())):g}")
        for part in ("tune", "test"):
            qids = [q for q in words if split[q] == part]
            print(f"  {part:5s} all         n={len(qids):4d} "
                  + " ".join(f"{w:.1f}:{np.mean([scores[w][q] for q in qids]):.3f}" for w in WEIGHTS))
            for lo, hi in itertools.pairwise(EDGES):
                bucket = [q for q in qids if lo <= words[q] < hi]
                if len(bucket) >= 10:
                    print(f"  {part:5s} [{lo},{hi}) n={len(bucket):4d} "
                          + " ".join(f"{w:.1f}:{np.mean([scores[w][q] for q in bucket]):.3f}" for w in WEIGHTS))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
