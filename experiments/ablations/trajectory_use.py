"""Trajectory-use labels against today's Tongyi labels (issue 34): the agent recipe trained twice on the same data
but for its Tongyi file, measured on the question-level dev sets.

Arms: ``top3`` (``tongyi_tuples.jsonl``: DR-Synth with the agent retriever's top 3 as gold) and ``trajectory-use``
(``tongyi_use_tuples.jsonl``: :mod:`hopscotch.data_synth.trajectory_use`), each trained by ``hopscotch train
--recipe RECIPE`` on ``DATA/clean/`` (the decontaminated tuples of ``DATA_ONLY=1 bash
scripts/train_agent_retriever.sh OUT``) with the same overrides and seed, checked against the same dev sets
(``--eval-sets``). Each model is indexed and searched as ``hopscotch index/search --model M`` with ``--query-input
query`` (the query-only row) and ``--reasoning`` (its recorded defaults), beside the untrained MiniLM's query-only
row, through the ablation's cached runs (:mod:`.ablation_runs`, under ``work``).

Cells: nDCG@10 with its 95% CI on the sets' tune (dev) questions and on their test questions; ``p``: the paired
randomisation test of trajectory-use against top3 (same row kind), and of each query-only row against the untrained
MiniLM's. The verdict, on tune only: trajectory-use wins when its mean over every (set, row) tune cell is higher and
none of its tune cells is significantly worse (p < 0.05) than top3's.
"""

from __future__ import annotations

from pathlib import Path

from hopscotch_experiments.ablations.ablation_runs import build_indexes, evaluate_ndcg, run_cli, search
from hopscotch_experiments.agent_data.eval_sets import TITLES, build_sets

from hopscotch.retriever.evaluation.metrics import compare_runs
from hopscotch.retriever.io.runs import read_run

START, END = "<!-- trajectory-use:start -->", "<!-- trajectory-use:end -->"
SETS = ("tongyi_question", "tongyi_pages_question", "hotpotqa")
ARMS = {"top3": "tongyi_tuples.jsonl", "trajectory-use": "tongyi_use_tuples.jsonl"}
OTHER_FILES = ("hotpot_tuples.jsonl", "musique_tuples.jsonl", "world_tuples.jsonl")
KINDS = {"query": ["--query-input", "query"], "reasoning": ["--reasoning"]}


def train_arm(data: Path, arm: str, out: Path, recipe: str, overrides: list[str]) -> Path:
    """``out/final``: the recipe trained on ``data/clean`` with the arm's Tongyi file (resumed when started; nothing
    done when finished)."""
    if (out / "train_summary.json").is_file() and (out / "final" / "hopscotch_config.json").is_file():
        return out / "final"
    clean = data / "clean"
    files = [clean / f for f in (*OTHER_FILES[:2], ARMS[arm], OTHER_FILES[2])]
    specs = (data / "eval" / "specs.txt").read_text().split()
    resume = ["--resume"] if any(out.glob("checkpoint-*")) or (out / "train_manifest.json").is_file() else []
    eval_sets = [x for s in specs for x in ("--eval-sets", s)]
    run_cli("train", "--recipe", recipe, "--output", out, *resume, *eval_sets,
            "data.train=[" + ",".join(map(str, files)) + "]", *overrides)
    return out / "final"


def measure(models: dict[str, str], work: Path, names=SETS) -> dict:
    """``{(set, system, kind): {"tune", "test"}}`` EvalResults for every model (``"base"``: query-only only)."""
    cells, info = {}, {}
    for name, es in build_sets(work, names).items():
        paths = es.write(work / "sets" / name)
        idx = build_indexes(work, es.index_name or name, es.corpus, models)
        info[name] = {"tune": len(es.tune), "test": len(es.test)}
        for label, model in models.items():
            for kind, flags in KINDS.items():
                if label == "base" and kind != "query":
                    continue
                run = read_run(search(work / "runs" / f"{name}.{label}.{kind}.trec", paths, "--index", idx[label],
                                      "--model", model, *flags))
                cells[name, label, kind] = {s: evaluate_ndcg(run, es.qrels, getattr(es, s)) for s in ("tune", "test")}
    return {"cells": cells, "sets": info}


def ndcg_cells(measured: dict, rows, versus) -> dict:
    """``{(split, system, kind, set): cell}`` for the tune and test splits, each ``(system, kind)`` of ``rows`` and
    each of :func:`measure`'s sets: nDCG@10's ``mean`` and ``ci95``, then what ``versus(run_of, system, kind, res)``
    adds (``res`` the cell's evaluation, ``run_of(system, kind)`` another row's on the same set and split)."""
    cells, sets = measured["cells"], list(measured["sets"])
    table: dict = {}
    for split in ("tune", "test"):
        for system, kind in rows:
            for name in sets:
                res = cells[name, system, kind][split]
                cell = {"mean": res.mean["ndcg@10"], "ci95": res.ci95["ndcg@10"]}
                cell.update(versus(lambda s, k, name=name, split=split: cells[name, s, k][split], system, kind, res))
                table[split, system, kind, name] = cell
    return table


def paired_p(baseline, res) -> float:
    """The paired randomisation test's p of ``res`` against ``baseline`` on nDCG@10."""
    return compare_runs(baseline, res, "ndcg@10").p_randomization


def tune_means(table: dict, systems, sets) -> dict:
    """Each system's mean nDCG@10 over every (kind, set) cell of the tune split."""
    return {s: sum(table["tune", s, k, n]["mean"] for k in KINDS for n in sets) / (len(KINDS) * len(sets))
            for s in systems}


def summarize(measured: dict) -> dict:
    """The table's cells (mean, ci95, p) per split, the tune means and the verdict."""
    sets = list(measured["sets"])
    rows = [("base", "query"), ("top3", "query"), ("trajectory-use", "query"), ("top3", "reasoning"),
            ("trajectory-use", "reasoning")]

    def versus(run_of, system, kind, res) -> dict:
        cell = {}
        if system == "trajectory-use":
            cell["p"] = paired_p(run_of("top3", kind), res)
        if system != "base" and kind == "query":
            cell["p_base"] = paired_p(run_of("base", "query"), res)
        return cell

    table = ndcg_cells(measured, rows, versus)
    means = tune_means(table, ARMS, sets)
    worse = [f"{n} {k}" for n in sets for k in KINDS
             if table["tune", "trajectory-use", k, n]["mean"] < table["tune", "top3", k, n]["mean"]
             and table["tune", "trajectory-use", k, n]["p"] < 0.05]
    wins = means["trajectory-use"] > means["top3"] and not worse
    return {"sets": measured["sets"], "rows": rows, "table": table, "tune_mean": means, "significantly_worse": worse,
            "trajectory_use_wins": wins}


def to_json(summary: dict) -> dict:
    """:func:`summarize`'s result with JSON keys (``"tune|top3|query|hotpotqa"``)."""
    return {**summary, "rows": [list(r) for r in summary["rows"]],
            "table": {"|".join(k): v for k, v in summary["table"].items()}}


def render(summary: dict, command: str, notes: str = "") -> str:
    """The docs section: per split, a row per (system, row kind), a column per set."""
    sets = summary["sets"]

    def cell(c: dict) -> str:
        out = f"{c['mean']:.3f} ± {c['ci95']:.3f}"
        ps = [f"{tag}p={c[key]:.3f}{'*' if c[key] < 0.05 else ''}" for key, tag in (("p", ""), ("p_base", "vs base "))
              if key in c]
        return out + (f" ({', '.join(ps)})" if ps else "")

    labels = {"base": "untrained MiniLM", "top3": "trained, top-3 labels (today)",
              "trajectory-use": "trained, trajectory-use labels"}
    lines = []
    for split, title in (("tune", "dev (tune) questions: these decide"), ("test", "held-out test questions: reported")):
        lines += ["", f"**{title}**", "",
                  "| system | row | " + " | ".join(f"{TITLES.get(n, n)} ({sets[n][split]})" for n in sets) + " |",
                  "|---|---|" + "---|" * len(sets)]
        for system, kind in summary["rows"]:
            row = "query only" if kind == "query" else "`--reasoning` defaults"
            lines.append(f"| {labels[system]} | {row} | "
                         + " | ".join(cell(summary["table"][split, system, kind, n]) for n in sets) + " |")
    m = summary["tune_mean"]
    verdict = ("trajectory-use labels WIN on dev" if summary["trajectory_use_wins"] else
               "trajectory-use labels do NOT win on dev")
    worse = ", ".join(summary["significantly_worse"]) or "none"
    return "\n".join([
        f"Generated by `{command}`. nDCG@10 ± 95% CI; `p`: paired randomisation test of trajectory-use against "
        "top3 (same row), `vs base p`: of the query-only row against the untrained MiniLM's (`*` p < 0.05).",
        *lines, "",
        f"Tune mean over the {len(sets)} sets x 2 rows: top3 {m['top3']:.3f}, trajectory-use "
        f"{m['trajectory-use']:.3f}; "
        f"trajectory-use cells significantly worse on tune: {worse}. Verdict: **{verdict}**.",
        *([notes] if notes else [])])
