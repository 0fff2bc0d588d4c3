"""Our multi-vector recipe against the sentence-transformers multi-vector peer trained on the same tuples, on the
question-level dev sets of :mod:`.trajectory_use`.

Both models are used as the multi-vector model is documented to be used: reranking BM25's top 100 (``hopscotch
search --bm25 IDX --rerank-model M``). Rows: query only (BM25 of the query, MaxSim of the query) and ``--reasoning``
(reasoning-aware BM25, each model's recorded reasoning input: ours ``reasoning_tail:128`` and its late fusion, the
peer records nothing, so its queries take the full-reasoning template it trained on), each at the reranker's
default first-stage weight (:data:`~hopscotch.retriever.searchers.rerank.DEFAULT_FIRST_WEIGHT`) and as a pure
MaxSim reorder (W = 0, the model alone). The first stage is the same list for both models, so every difference is
the model's. Runs and token caches live under ``work`` (shared with :mod:`.rerank_weight`: ours is its ``mv``).

Cells: nDCG@10 with its 95% CI on tune and test questions; ``p``: the paired randomisation test of ours against
the peer (same row, same W). The verdict, on tune: ours holds when none of its cells is significantly below the
peer's (p < 0.05) and its mean over every (set, row) cell at the default W is at least the peer's.
"""

from __future__ import annotations

from pathlib import Path

from hopscotch_experiments.ablations.ablation_runs import build_indexes, evaluate_ndcg, search
from hopscotch_experiments.agent_data.eval_sets import TITLES, build_sets

from hopscotch.retriever.evaluation.metrics import compare_runs
from hopscotch.retriever.io.runs import read_run
from hopscotch.retriever.searchers.rerank import DEFAULT_FIRST_WEIGHT

START, END = "<!-- mv-peer-rows:start -->", "<!-- mv-peer-rows:end -->"
SETS = ("tongyi_question", "tongyi_pages_question", "hotpotqa")
OURS, PEER = "mv", "mv-peer"
KINDS = {"query": (), "reasoning": ("--reasoning",)}
DEPTH = 100


def run_name(name: str, system: str, kind: str, weight: float | None = None) -> str:
    """The cached run file of ``system`` (``"bm25"``: the first stage) on set ``name``."""
    return f"{name}.bm25.{kind}.trec" if system == "bm25" else f"{name}.{system}.bm25rr.{kind}.w{weight:g}.trec"


def measure(models: dict[str, str], work: Path, names=SETS, weights=(0.0, None)) -> dict:
    """``{"cells": {(set, system, kind, w): {"tune", "test"}}, ...}`` with ``system`` ``"bm25"`` (w None) or a label
    of ``models``; a ``None`` in ``weights`` is the reranker's default."""
    weights = [DEFAULT_FIRST_WEIGHT if w is None else float(w) for w in weights]
    cells, info = {}, {}
    for name, es in build_sets(work, names).items():
        paths = es.write(work / "sets" / name)
        corpus_name = es.index_name or name
        idx = build_indexes(work, corpus_name, es.corpus, {})
        info[name] = {"tune": len(es.tune), "test": len(es.test)}
        for kind, flags in KINDS.items():
            first = ("--bm25", idx["bm25"], *flags)
            runs = {("bm25", None): search(work / "runs" / run_name(name, "bm25", kind), paths, *first)}
            for label, model in models.items():
                cache = work / "rerank_cache" / f"{corpus_name}.{label}"
                for w in weights:
                    runs[label, w] = search(work / "runs" / run_name(name, label, kind, w), paths, *first,
                                            "--corpus", es.corpus, "--rerank-model", model, "--rerank-depth", DEPTH,
                                            "--rerank-cache", cache, "--rerank-first-weight", w)
            for (system, w), path in runs.items():
                run = read_run(path)
                cells[name, system, kind, w] = {s: evaluate_ndcg(run, es.qrels, getattr(es, s))
                                                for s in ("tune", "test")}
    return {"cells": cells, "sets": info, "weights": weights, "default": DEFAULT_FIRST_WEIGHT}


def as_ours(measured: dict, label: str) -> dict:
    """``measured`` with the cells of the model cached as ``label`` filed as ours (another model of ours, cached
    under its own name in ``work``, against the same peer)."""
    return {**measured, "cells": {(n, OURS if s == label else s, k, w): v for (n, s, k, w), v in measured["cells"].items()}}


def summarize(measured: dict) -> dict:
    """Cells per split with ours-vs-peer tests, the tune means at the default weight and the verdict."""
    cells, sets, default = measured["cells"], list(measured["sets"]), measured["default"]
    table: dict = {}
    for (name, system, kind, w), res in cells.items():
        for split in ("tune", "test"):
            cell = {"mean": res[split].mean["ndcg@10"], "ci95": res[split].ci95["ndcg@10"]}
            if system == OURS:
                cell["p"] = compare_runs(cells[name, PEER, kind, w][split], res[split], "ndcg@10").p_randomization
            table[split, system, kind, w, name] = cell
    keys = [(kind, default) for kind in KINDS]
    means = {s: sum(table["tune", s, k, w, n]["mean"] for k, w in keys for n in sets) / (len(keys) * len(sets))
             for s in (OURS, PEER)}
    below = {split: [f"{n} {k} W={w:g}" for n in sets for k in KINDS for w in measured["weights"]
                     if table[split, OURS, k, w, n]["p"] < 0.05
                     and table[split, OURS, k, w, n]["mean"] < table[split, PEER, k, w, n]["mean"]]
             for split in ("tune", "test")}
    holds = means[OURS] >= means[PEER] and not below["tune"]
    return {"sets": measured["sets"], "weights": measured["weights"], "default": default, "table": table,
            "tune_mean": means, "significantly_below": below, "holds": holds}


def to_json(summary: dict) -> dict:
    return {**summary, "table": {"|".join([split, system, kind, "" if w is None else f"{w:g}", name]): v
                                 for (split, system, kind, w, name), v in summary["table"].items()}}


def render(summary: dict, command: str) -> str:
    sets, t = summary["sets"], summary["table"]

    def cell(c: dict) -> str:
        p = f" (p={c['p']:.3f}{'*' if c['p'] < 0.05 else ''})" if "p" in c else ""
        return f"{c['mean']:.3f} ± {c['ci95']:.3f}{p}"

    rows = [("bm25", kind, None) for kind in KINDS]
    rows += [(system, kind, w) for kind in KINDS for w in summary["weights"] for system in (PEER, OURS)]
    labels = {"bm25": "BM25 top 100 (the first stage)", PEER: "sentence-transformers multi-vector peer (same tuples)",
              OURS: "Hopscotch recipe (`recipes/minilm_agent_multivector.yaml`)"}
    lines = []
    for split, title in (("tune", "dev (tune) questions: these decide"), ("test", "held-out test questions: reported")):
        lines += ["", f"**{title}**", "", "| system | row | "
                  + " | ".join(f"{TITLES.get(n, n)} ({sets[n][split]})" for n in sets) + " |",
                  "|---|---|" + "---|" * len(sets)]
        for system, kind, w in rows:
            row = ("query only" if kind == "query" else "`--reasoning`") + (
                "" if w is None else f", W={w:g}" + (" (default)" if w == summary["default"] else " (MaxSim alone)"))
            lines.append(f"| {labels[system]} | {row} | "
                         + " | ".join(cell(t[split, system, kind, w, n]) for n in sets) + " |")
    m, below = summary["tune_mean"], summary["significantly_below"]
    return "\n".join([
        f"Generated by `{command}`. nDCG@10 ± 95% CI; `p`: paired randomisation test of ours against the peer (same "
        "row), `*` p < 0.05. W: `--rerank-first-weight`.", *lines, "",
        f"Tune means at the default W (2 rows x {len(sets)} sets): ours {m[OURS]:.3f}, peer {m[PEER]:.3f}. Ours "
        f"significantly below the peer on tune: {', '.join(below['tune']) or 'none'}; on test: "
        f"{', '.join(below['test']) or 'none'}. Verdict on tune: **{'ours holds' if summary['holds'] else 'the peer wins'}**."])
