"""A reranker's first-stage weight (``--rerank-first-weight W``), chosen on the question-level dev sets of
:mod:`.trajectory_use`: the multi-vector reranker's (issue 34 item 2) or a cross-encoder's (the kind of ``--model``'s
folder; a cross-encoder reranks its ``--rerank-depth``, default its own, and takes no token cache).

The first stage is reasoning-aware BM25's top 100 (``hopscotch search --bm25 IDX --reasoning``); the reranker
reorders it with a multi-vector model's MaxSim (``--rerank-model M --reasoning``: the model's recorded query input
and late fusion), and scores each candidate ``W * minmax(BM25) + (1 - W) * minmax(MaxSim)``. W = 0 is a pure MaxSim
reorder (the default before this experiment). Each W of :data:`WEIGHTS` is run on every set; the rule, on the tune
questions only: the W with the highest mean nDCG@10 over the sets (ties: the smaller W), provided none of its tune
cells is significantly below the BM25 list's (p < 0.05), else the best W that satisfies that.

Cells: nDCG@10 ± 95% CI on tune and test questions; ``p`` against the first-stage list (same questions) and, for
the chosen W, against W = 0.
"""

from __future__ import annotations

from pathlib import Path

from hopscotch_experiments.ablations.ablation_runs import build_indexes, evaluate_ndcg, search

START, END = "<!-- rerank-weight:start -->", "<!-- rerank-weight:end -->"
#: the docs section of a cross-encoder's selection (the multi-vector one keeps START / END)
CE_START, CE_END = "<!-- rerank-weight-ce:start -->", "<!-- rerank-weight-ce:end -->"
SETS = ("tongyi_question", "tongyi_pages_question", "hotpotqa")
WEIGHTS = (0.0, 0.25, 0.5, 0.75)
DEPTH = 100


def markers(kind: str) -> tuple[str, str]:
    """The docs section's markers of a reranker ``kind``."""
    return (CE_START, CE_END) if kind == "cross_encoder" else (START, END)


def measure(model: str, work: Path, names=SETS, weights=WEIGHTS, label: str = "mv", depth: int | None = None) -> dict:
    """``{"cells": {(set, system): {"tune", "test"}}, "sets": {set: sizes}, "kind"}``; systems ``"bm25"`` and ``w``
    floats. A cross-encoder reranks ``depth`` candidates (None: its default), a multi-vector model :data:`DEPTH`."""
    from hopscotch_experiments.agent_data.eval_sets import build_sets
    from hopscotch.retriever.io.runs import read_run
    from hopscotch.retriever.model.cross_encoder import is_cross_encoder_folder

    kind = "cross_encoder" if is_cross_encoder_folder(model) else "multi_vector"

    cells, info = {}, {}
    for name, es in build_sets(work, names).items():
        paths = es.write(work / "sets" / name)
        corpus_name = es.index_name or name
        idx = build_indexes(work, corpus_name, es.corpus, {})
        first = ("--bm25", idx["bm25"], "--reasoning")
        runs = {"bm25": search(work / "runs" / f"{name}.bm25.reasoning.trec", paths, *first)}
        rerank = (("--rerank-depth", depth) if depth else ()) if kind == "cross_encoder" else \
            ("--rerank-depth", depth or DEPTH, "--rerank-cache", work / "rerank_cache" / f"{corpus_name}.{label}")
        for w in weights:
            runs[w] = search(work / "runs" / f"{name}.{label}.bm25rr.reasoning.w{w:g}.trec", paths, *first,
                             "--corpus", es.corpus, "--rerank-model", model, *rerank, "--rerank-first-weight", w)
        info[name] = {"tune": len(es.tune), "test": len(es.test)}
        for system, path in runs.items():
            run = read_run(path)
            cells[name, system] = {s: evaluate_ndcg(run, es.qrels, getattr(es, s)) for s in ("tune", "test")}
    return {"cells": cells, "sets": info, "weights": list(weights), "kind": kind}


def summarize(measured: dict) -> dict:
    """The table (mean, ci95, p per split), the tune means per W and the chosen W."""
    from hopscotch.retriever.evaluation.metrics import compare_runs

    cells, sets, weights = measured["cells"], list(measured["sets"]), measured["weights"]
    table: dict = {}
    for split in ("tune", "test"):
        for system in ("bm25", *weights):
            for name in sets:
                res = cells[name, system][split]
                cell = {"mean": res.mean["ndcg@10"], "ci95": res.ci95["ndcg@10"]}
                if system != "bm25":
                    cell["p_bm25"] = compare_runs(cells[name, "bm25"][split], res, "ndcg@10").p_randomization
                    if system != 0.0 and 0.0 in weights:
                        cell["p_w0"] = compare_runs(cells[name, 0.0][split], res, "ndcg@10").p_randomization
                table[split, system, name] = cell
    means = {w: sum(table["tune", w, n]["mean"] for n in sets) / len(sets) for w in weights}

    def below_bm25(w) -> list[str]:
        return [n for n in sets if table["tune", w, n]["mean"] < table["tune", "bm25", n]["mean"]
                and table["tune", w, n]["p_bm25"] < 0.05]

    ranked = sorted(weights, key=lambda w: (-means[w], w))
    safe = [w for w in ranked if not below_bm25(w)]
    chosen = safe[0] if safe else ranked[0]
    return {"sets": measured["sets"], "weights": weights, "table": table, "tune_mean": means, "chosen": chosen,
            "kind": measured.get("kind", "multi_vector"),
            "chosen_below_bm25": below_bm25(chosen),
            "bm25_tune_mean": sum(table["tune", "bm25", n]["mean"] for n in sets) / len(sets)}


def to_json(summary: dict) -> dict:
    return {**summary, "tune_mean": {f"{w:g}": m for w, m in summary["tune_mean"].items()},
            "table": {f"{split}|{system if system == 'bm25' else f'{system:g}'}|{name}": v
                      for (split, system, name), v in summary["table"].items()}}


def render(summary: dict, command: str) -> str:
    from hopscotch_experiments.agent_data.eval_sets import TITLES

    sets = summary["sets"]
    ce = summary.get("kind") == "cross_encoder"
    reranker, reorder = ("cross-encoder", "cross-encoder") if ce else ("multi-vector", "MaxSim")

    def cell(c: dict) -> str:
        ps = [f"{tag} p={c[key]:.3f}{'*' if c[key] < 0.05 else ''}" for key, tag in (("p_bm25", "vs BM25"),
                                                                                     ("p_w0", "vs W=0")) if key in c]
        return f"{c['mean']:.3f} ± {c['ci95']:.3f}" + (f" ({', '.join(ps)})" if ps else "")

    lines = []
    for split, title in (("tune", "dev (tune) questions: these decide"), ("test", "held-out test questions: reported")):
        lines += ["", f"**{title}**", "",
                  "| system | " + " | ".join(f"{TITLES.get(n, n)} ({sets[n][split]})" for n in sets) + " |",
                  "|---|" + "---|" * len(sets)]
        for system in ("bm25", *summary["weights"]):
            name = ("reasoning-aware BM25, top 100 (the first stage)" if system == "bm25" else
                    f"{reranker} rerank, `--reasoning --rerank-first-weight {system:g}`"
                    + (" (chosen)" if system == summary["chosen"] else ""))
            lines.append(f"| {name} | " + " | ".join(cell(summary["table"][split, system, n]) for n in sets) + " |")
    means = ", ".join(f"W={w:g} {m:.3f}" for w, m in summary["tune_mean"].items())
    return "\n".join([
        f"Generated by `{command}`. nDCG@10 ± 95% CI; `p`: paired randomisation tests against the first-stage list "
        f"and against the pure {reorder} reorder (W = 0), `*` p < 0.05.", *lines, "",
        f"Tune means: BM25 {summary['bm25_tune_mean']:.3f}, {means}. Chosen: **W = {summary['chosen']:g}** "
        f"(highest tune mean with no tune cell significantly below the first stage"
        f"{'' if not summary['chosen_below_bm25'] else '; none qualified, so the highest mean'})."])
