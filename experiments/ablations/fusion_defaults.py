"""Choosing the CLI's fusion defaults by the selection rule (:mod:`hopscotch.retriever.evaluation.selection`: the real
agent sets decide, every other set guards against a significant loss to the better of the two lists), BM25 + the
trained model's ``search --reasoning`` defaults.

Reads the runs the agent ablation cached under its work folder (``runs/<set>.bm25.trec``,
``runs/<set>.trained.default.trec``) and fuses them as ``hopscotch search --fusion`` does (depth 100, k 100)
with every setting of ``tune-fusion``'s grid; the pick has the best objective among the settings that lose
significantly to neither list on any guard set.
"""

from __future__ import annotations

import json
from pathlib import Path

from hopscotch_experiments.agent_data.eval_sets import GUARDS, OBJECTIVE, SET_NAMES

from hopscotch.retriever.evaluation.metrics import compare_runs, evaluate
from hopscotch.retriever.evaluation.selection import select_default
from hopscotch.retriever.io.qrels import read_qrels
from hopscotch.retriever.io.runs import read_run
from hopscotch.retriever.searchers.fusion import DEFAULT_ADAPTIVE, DEFAULT_INTERP, DEFAULT_RRF, default_settings
from hopscotch.retriever.searchers.fusion_tuning import fuse_runs, fusion_grid


def grid() -> list:
    """``tune-fusion``'s grid, both normalisations, plain and weighted RRF, and adaptive fusion."""
    weights = [i / 10 for i in range(11)]
    return fusion_grid(weights, (5.0, 10.0, 20.0, 60.0), ((1.0, 1.0), (0.5, 1.0), (1.0, 0.5)),
                       adapts=(0.25, 0.5, 1.0, 2.0, 4.0), shifts=(-1.0, 0.0, 0.5, 1.0, 1.5, 2.0, 3.0))


def table(work: Path, split: str, sets=SET_NAMES, settings_list=None, sparse_run: str = "bm25",
          dense_run: str = "trained.default"):
    """``({setting label: {set: nDCG@10}}, {set: {"bm25"|"dense": nDCG@10}}, {label: {set: per-query}},
    {set: {"bm25"|"dense": per-query}}, {label: settings})`` on ``split``'s questions of each set; the two lists are
    ``runs/<set>.<sparse_run>.trec`` and ``runs/<set>.<dense_run>.trec`` under ``work``."""
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


def report(work: Path, split: str, sets: list[str], top: int, sparse_run: str = "bm25",
           dense_run: str = "trained.default", objective=None, guards=None) -> list[str]:
    """The lines the script prints: the better component per set, the selection rule's report (objective and guards
    on the tune questions), the ``top`` settings by objective (and the ``--fusion`` defaults), the per-query oracle,
    and the pick against each set's better component (paired tests) on ``split``'s questions."""
    objective = [n for n in (OBJECTIVE if objective is None else objective) if n in sets]
    guards = [n for n in (GUARDS if guards is None else guards) if n in sets]
    tune = table(work, "tune", sets, None, sparse_run, dense_run)
    scores, components, per_query, component_pq, by_label = tune
    better = {n: component_pq[n][max(components[n], key=components[n].get)].per_query for n in sets}
    candidates = {label: {n: per_query[label][n].per_query for n in objective + guards} for label in scores}
    selection = select_default(candidates, better, objective, guards)
    defaults = {s.describe(): m for m, s in (("interp", DEFAULT_INTERP), ("rrf", DEFAULT_RRF),
                                             ("adaptive", DEFAULT_ADAPTIVE))}
    default = default_settings().describe()
    out = ["better component per set (tune): " + ", ".join(
        f"{n} {max(c, key=c.get)} {max(c.values()):.3f}" for n, c in components.items()),
        "selection: the baseline of every guard is the better of the two lists on that set", *selection.lines(), "",
        "| setting | objective | " + " | ".join(sets) + " |", "|---" * (len(sets) + 2) + "|"]
    for i, j in enumerate(selection.judged.values()):
        if i < top or j.name in defaults or j.name == default:
            mark = (" (default today)" if j.name == default else "") + (
                f" (--fusion {defaults[j.name]})" if j.name in defaults else "")
            out.append(f"| {'x ' if j.disqualified else ''}{j.name}{mark} | {j.objective:.4f} | "
                       + " | ".join(f"{scores[j.name][n]:.3f} ({scores[j.name][n] - max(components[n].values()):+.3f})"
                                    for n in sets) + " |")
    result = tune if split == "tune" else table(work, split, sets, [by_label[selection.pick.name]], sparse_run,
                                                dense_run)
    _, components, per_query, component_pq, _ = result
    oracle = {}
    for n in sets:
        b, dn = component_pq[n]["bm25"].per_query, component_pq[n]["dense"].per_query
        values = [max(b[q]["ndcg@10"], dn[q]["ndcg@10"]) for q in b]
        oracle[n] = sum(values) / len(values)
    out.append(f"per-query oracle ({split}; the better list for each query, which needs labels: a ceiling for "
               "per-query choice): " + ", ".join(f"{n} {v:.3f}" for n, v in oracle.items()))
    out.append(f"the pick ({selection.pick.name}) against each set's two lists ({split} questions, paired tests):")
    for n in sets:
        cells = []
        for half in ("bm25", "dense"):
            c = compare_runs(component_pq[n][half], per_query[selection.pick.name][n], "ndcg@10")
            cells.append(f"{half} {c.mean_a:.4f} (delta {c.delta:+.4f}, p = {c.p_randomization:.3f})")
        out.append(f"  {n}: {per_query[selection.pick.name][n].mean['ndcg@10']:.4f} vs " + "; ".join(cells))
    return out
