"""Choosing the CLI's fusion defaults by a rule that never loses (issue 22): the maximin setting over the agent
dev sets' tune questions, BM25 + the trained model's ``search --reasoning`` defaults.

Reads the runs the agent ablation cached under its work folder (``runs/<set>.bm25.trec``,
``runs/<set>.trained.default.trec``) and fuses them as ``hopscotch search --fusion`` does (depth 100, k 100)
with every setting of ``tune-fusion``'s grid. For each setting and set: its nDCG@10 minus the better
component's (the better of BM25 and dense *on that set*); the default is the setting whose worst per-set
delta is largest (:func:`~hopscotch.retriever.searchers.fusion_tuning.maximin`).
"""

from __future__ import annotations

import json
from pathlib import Path

from hopscotch_experiments.agent_data.eval_sets import SET_NAMES


def grid() -> list:
    """``tune-fusion``'s grid, both normalisations, plain and weighted RRF, and adaptive fusion."""
    from hopscotch.retriever.searchers.fusion_tuning import fusion_grid

    weights = [i / 10 for i in range(11)]
    return fusion_grid(weights, (5.0, 10.0, 20.0, 60.0), ((1.0, 1.0), (0.5, 1.0), (1.0, 0.5)),
                       adapts=(0.25, 0.5, 1.0, 2.0, 4.0), shifts=(-1.0, 0.0, 0.5, 1.0, 1.5, 2.0, 3.0))


def table(work: Path, split: str, sets=SET_NAMES, settings_list=None, sparse_run: str = "bm25",
          dense_run: str = "trained.default"):
    """``({setting label: {set: nDCG@10}}, {set: {"bm25"|"dense": nDCG@10}}, {label: {set: per-query}},
    {set: {"bm25"|"dense": per-query}}, {label: settings})`` on ``split``'s questions of each set; the two lists are
    ``runs/<set>.<sparse_run>.trec`` and ``runs/<set>.<dense_run>.trec`` under ``work``."""
    from hopscotch.retriever.evaluation.metrics import evaluate
    from hopscotch.retriever.io.qrels import read_qrels
    from hopscotch.retriever.io.runs import read_run
    from hopscotch.retriever.searchers.fusion_tuning import fuse_runs

    scores: dict[str, dict[str, float]] = {}
    per_query: dict[str, dict[str, object]] = {}
    components: dict[str, dict[str, float]] = {}
    component_pq: dict[str, dict[str, object]] = {}
    by_label = {}
    names_file = work / "runs" / "names.json"
    prefixes = json.loads(names_file.read_text()) if names_file.is_file() else {}
    for name in sets:
        folder = work / "sets" / name
        qids = (folder / f"{split}_qids.txt").read_text().split()
        qrels = read_qrels(folder / "qrels.tsv")
        judged = {q: qrels[q] for q in qids if q in qrels}
        run_name = prefixes.get(name, name)   # sets sharing one index share their runs (agent_ablation.shared_runs)
        sparse = read_run(work / "runs" / f"{run_name}.{sparse_run}.trec")
        dense = read_run(work / "runs" / f"{run_name}.{dense_run}.trec")
        for label, run in (("bm25", sparse), ("dense", dense)):
            result = evaluate({q: dict(sorted(run.get(q, {}).items(), key=lambda kv: (-kv[1], kv[0]))[:100])
                               for q in qids}, judged, ["ndcg@10"])
            components.setdefault(name, {})[label] = result.mean["ndcg@10"]
            component_pq.setdefault(name, {})[label] = result
        for settings in settings_list or grid():
            run = fuse_runs(sparse, dense, settings, qids, k=100, depth=100)
            result = evaluate({q: run.get(q, {}) for q in qids}, judged, ["ndcg@10"])
            label = settings.describe()
            by_label[label] = settings
            scores.setdefault(label, {})[name] = result.mean["ndcg@10"]
            per_query.setdefault(label, {})[name] = result
    return scores, components, per_query, component_pq, by_label


def deltas(scores: dict, components: dict) -> dict[str, dict[str, float]]:
    """``{setting: {set: score - the better component's score}}``."""
    return {label: {n: v - max(components[n].values()) for n, v in by_set.items()} for label, by_set in scores.items()}


def report(work: Path, split: str, sets: list[str], top: int, sparse_run: str = "bm25",
           dense_run: str = "trained.default") -> list[str]:
    """The lines the script prints: the better component per set, the ``top`` settings by worst per-set delta
    (and the three ``--fusion`` defaults), the maximin pick per method and overall, the per-query oracle, and
    the paired test of the default against each set's better component."""
    from hopscotch.retriever.evaluation.metrics import compare_runs
    from hopscotch.retriever.searchers.fusion import DEFAULT_ADAPTIVE, DEFAULT_INTERP, DEFAULT_RRF, default_settings
    from hopscotch.retriever.searchers.fusion_tuning import maximin

    scores, components, per_query, component_pq, by_label = table(work, split, sets, None, sparse_run, dense_run)
    d = deltas(scores, components)
    worst = {label: min(v.values()) for label, v in d.items()}
    mean = {label: sum(v.values()) / len(v) for label, v in scores.items()}
    ranked = sorted(d, key=lambda label: (-worst[label], -mean[label]))
    defaults = {s.describe(): m for m, s in (("interp", DEFAULT_INTERP), ("rrf", DEFAULT_RRF),
                                             ("adaptive", DEFAULT_ADAPTIVE))}
    default = default_settings().describe()
    out = [f"better component per set ({split}): " + ", ".join(
        f"{n} {max(c, key=c.get)} {max(c.values()):.3f}" for n, c in components.items())]
    out.append(f"| setting | worst delta | {split} mean | " + " | ".join(sets) + " |")
    out.append("|---" * (len(sets) + 3) + "|")
    for label in [r for i, r in enumerate(ranked) if i < top or r in defaults]:
        mark = (" (default)" if label == default else "") + (f" (--fusion {defaults[label]})" if label in defaults else "")
        out.append(f"| {label}{mark} | {worst[label]:+.4f} | {mean[label]:.4f} | "
                   + " | ".join(f"{scores[label][n]:.3f} ({d[label][n]:+.3f})" for n in sets) + " |")
    for method in ("interp", "rrf", "adaptive"):
        pick, low = maximin({label: v for label, v in d.items() if by_label[label].method == method})
        out.append(f"maximin {method}: {pick} (worst per-set delta {low:+.4f}, mean {mean[pick]:.4f})")
    pick, low = maximin(d)
    out.append(f"maximin over every setting: {pick} (worst per-set delta {low:+.4f})"
               + ("" if split == "tune" else " (held out: reported, never chosen on)"))
    oracle = {}
    for n in sets:
        b, dn = component_pq[n]["bm25"].per_query, component_pq[n]["dense"].per_query
        values = [max(b[q]["ndcg@10"], dn[q]["ndcg@10"]) for q in b]
        oracle[n] = sum(values) / len(values)
    out.append("per-query oracle (the better list for each query; needs labels, a ceiling for per-query choice): "
               + ", ".join(f"{n} {v:.3f}" for n, v in oracle.items()))
    out.append(f"paired tests of the default `--fusion` ({default}) against each set's better component ({split}):")
    for n in sets:
        better = max(components[n], key=components[n].get)
        c = compare_runs(component_pq[n][better], per_query[default][n], "ndcg@10")
        out.append(f"  {n}: {c.mean_b:.4f} vs {better} {c.mean_a:.4f}, delta {c.delta:+.4f}, "
                   f"p = {c.p_randomization:.3f}")
    return out
