"""Choosing reasoning-aware BM25's defaults (``--bm25-reasoning``, ``--bm25-query-weight``) by maximin.

For every setting of the grid (which reasoning text x how many times the query counts) and every dev set that
votes (labels no retriever bounded: :data:`hopscotch_experiments.agent_data.eval_sets.CALL_LEVEL` sets never vote):
nDCG@10 of the expanded BM25 on the set's tune questions minus plain BM25's. The default is the setting whose
worst per-set gain is largest (:func:`~hopscotch.retriever.searchers.fusion_tuning.maximin`), the mean gain
breaking ties. Test questions are only reported. Searches run in-process through
:class:`~hopscotch.retriever.searchers.bm25.BM25Searcher` (what ``hopscotch search --bm25 --reasoning
--bm25-reasoning V --bm25-query-weight W`` runs), over the BM25 indexes the agent ablation caches.
"""

from __future__ import annotations

import time
from pathlib import Path

VARIANTS = ("reasoning_tail:16", "reasoning_tail:32", "reasoning_tail:64", "reasoning_tail:128",
            "reasoning_tail:256", "reasoning_focus:64", "current_reasoning", "reasoning")
QUERY_WEIGHTS = (1.0, 2.0, 3.0, 5.0, 10.0)


def set_runs(work: Path, names: list[str], settings: list[tuple[str, float]], k: int = 100):
    """``(sets, {set: {label: per-query nDCG@10 result on tune, test}}, {set: q/s per label})``; label ``plain`` is
    BM25 without expansion."""
    from hopscotch_experiments.agent_data.eval_sets import build_sets
    from hopscotch_experiments.ablations.ablation_runs import build_indexes, evaluate_ndcg
    from hopscotch.retriever.io.queries import read_queries
    from hopscotch.retriever.searchers.base import search_run
    from hopscotch.retriever.searchers.bm25 import BM25Searcher
    from hopscotch.retriever.searchers.bm25_expansion import BM25Expansion

    sets = build_sets(work, names)
    results, speed = {}, {}
    for n, es in sets.items():
        paths = es.write(work / "sets" / n)
        index = build_indexes(work, es.index_name or n, es.corpus, {})["bm25"]
        queries = list(read_queries(paths["queries"]))
        base = BM25Searcher(index)
        results[n], speed[n] = {}, {}
        for label, expansion in [("plain", None)] + [(f"{v} x{w:g}", BM25Expansion.parse(v, w)) for v, w in settings]:
            searcher = base if expansion is None else BM25Searcher(base.index, expansion=expansion)
            t0 = time.perf_counter()
            run = search_run(searcher, queries, k, reasoning_aware=expansion is not None)
            speed[n][label] = len(queries) / (time.perf_counter() - t0)
            results[n][label] = (evaluate_ndcg(run, es.qrels, es.tune), evaluate_ndcg(run, es.qrels, es.test))
    return sets, results, speed


def report(work: Path, names: list[str], variants=VARIANTS, weights=QUERY_WEIGHTS) -> tuple[list[str], dict]:
    """The printed lines (the grid by worst tune gain, the pick, its test rows with paired tests) and the pick."""
    from hopscotch.retriever.evaluation.metrics import compare_runs
    from hopscotch.retriever.searchers.fusion_tuning import maximin

    settings = [(v, w) for v in variants for w in weights]
    sets, results, speed = set_runs(work, names, settings)
    voters = [n for n, es in sets.items() if es.votes]
    tune = {n: {label: r[0].mean["ndcg@10"] for label, r in by.items()} for n, by in results.items()}
    gains = {label: {n: tune[n][label] - tune[n]["plain"] for n in voters} for label in tune[voters[0]]
             if label != "plain"}
    worst = {label: min(g.values()) for label, g in gains.items()}
    mean = {label: sum(g.values()) / len(g) for label, g in gains.items()}
    pick, _ = maximin(gains)   # ties: the larger mean gain
    out = [f"voting sets (tune questions): {', '.join(voters)}; call-level sets (reported, no vote): "
           f"{', '.join(n for n in sets if n not in voters) or 'none'}",
           "| setting | worst tune gain | mean tune gain | " + " | ".join(voters) + " |",
           "|---" * (len(voters) + 3) + "|",
           "| plain BM25 | | | " + " | ".join(f"{tune[n]['plain']:.3f}" for n in voters) + " |"]
    for label in sorted(gains, key=lambda label: (-worst[label], -mean[label])):
        out.append(f"| {label}{' (pick)' if label == pick else ''} | {worst[label]:+.4f} | {mean[label]:+.4f} | "
                   + " | ".join(f"{tune[n][label]:.3f} ({gains[label][n]:+.3f})" for n in voters) + " |")
    out.append(f"maximin pick: {pick} (worst tune gain {worst[pick]:+.4f}, mean {mean[pick]:+.4f})")
    out.append("test questions (held out), plain vs pick, paired randomisation test; q/s of the whole set:")
    for n in sets:
        a, b = results[n]["plain"][1], results[n][pick][1]
        c = compare_runs(a, b, "ndcg@10")
        out.append(f"  {n}{'' if n in voters else ' (call-level, no vote)'}: {c.mean_a:.4f} -> {c.mean_b:.4f} "
                   f"(delta {c.delta:+.4f}, p = {c.p_randomization:.3f}); q/s {speed[n]['plain']:.0f} -> "
                   f"{speed[n][pick]:.0f}")
    variant, _, weight = pick.rpartition(" x")
    return out, {"reasoning": variant, "query_weight": float(weight), "worst_tune_gain": worst[pick],
                 "mean_tune_gain": mean[pick]}
