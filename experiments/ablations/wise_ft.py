"""Choosing ``train.wise_ft_alpha`` (issue 9): a sweep of WiSE-FT mixes of one fine-tune with its starting
model over the agent dev sets, picked on the tune questions.

Each mix is what training with ``train.wise_ft_alpha=A`` saves (``model/weight_merge.py``, the same code),
written to ``WORK/wise_ft/<fingerprint>/a<A>``; it is indexed and searched as ``hopscotch index/search --model M
--reasoning`` (the model's recorded defaults) and ``--query-input query`` with the agent ablation's cached sets
(:mod:`.ablation_runs`). The chosen alpha has the best mean nDCG@10 of the defaults over the sets' tune
questions (ties: the larger alpha, the lesser change); test questions only report it, each cell with its 95%
CI and the paired randomisation p against alpha 1.
"""

from __future__ import annotations

import sys
from pathlib import Path

from hopscotch_experiments.ablations.ablation_runs import build_indexes, evaluate_ndcg, search
from hopscotch_experiments.agent_data.eval_sets import TITLES, build_sets

from hopscotch.retriever.evaluation.metrics import compare_runs
from hopscotch.retriever.io.fingerprint import digest, file_fingerprint
from hopscotch.retriever.io.runs import read_run

START, END = "<!-- wise-ft:start -->", "<!-- wise-ft:end -->"


def mixed_model(finetuned: Path, start: str, alpha: float, out: Path) -> Path:
    """``out``: the fine-tune mixed with ``start`` at ``alpha`` (its recorded search defaults unchanged)."""
    from hopscotch.retriever.model.dual_encoder import DualEncoder
    from hopscotch.retriever.model.weight_merge import mix_with_start

    if not (out / "hopscotch_config.json").is_file():
        model = DualEncoder.from_pretrained(finetuned)
        mix_with_start(model, DualEncoder.from_pretrained(start, model.config), alpha)
        model.save(out)
    return out


def fingerprint(finetuned: Path) -> str:
    """The first 10 hex digits of the digest of the fine-tune's weight files (names and full SHA-256 of their
    bytes; :mod:`hopscotch.retriever.io.fingerprint`)."""
    files = {p.relative_to(finetuned).as_posix(): file_fingerprint(p, full_hash_bytes=sys.maxsize)
             for p in sorted(finetuned.rglob("*.safetensors"))}
    return digest(files)[:10]


def choose(tune_mean: dict[float, float]) -> float:
    """The alpha with the best tune mean; among equals the larger (the lesser change to the fine-tune)."""
    return max(sorted(tune_mean, reverse=True), key=lambda a: tune_mean[a])


def sweep(finetuned: Path, start: str, alphas: list[float], work: Path, names: list[str]) -> dict:
    """The mixes' nDCG@10 on every set, the tune means and the chosen alpha."""
    sets = build_sets(work, names)
    paths = {n: es.write(work / "sets" / n) for n, es in sets.items()}
    tag = fingerprint(finetuned)  # indexes and runs are cached per fine-tune and alpha
    label = {a: f"wise-{tag}-a{a:g}" for a in alphas}
    models = {label[a]: str(mixed_model(finetuned, start, a, work / "wise_ft" / tag / f"a{a:g}")) for a in alphas}
    cells: dict = {}
    for n, es in sets.items():
        idx = build_indexes(work, n, es.corpus, models)
        for a in alphas:
            m = label[a]
            for kind, flags in (("default", ["--reasoning"]), ("query", ["--query-input", "query"])):
                run = read_run(search(work / "runs" / f"{n}.{m}.{kind}.trec", paths[n], "--index", idx[m],
                                      "--model", models[m], *flags))
                cells[n, a, kind] = {"tune": evaluate_ndcg(run, es.qrels, es.tune),
                                     "test": evaluate_ndcg(run, es.qrels, es.test)}
    tune_mean = {a: sum(cells[n, a, "default"]["tune"].mean["ndcg@10"] for n in sets) / len(sets) for a in alphas}
    chosen = choose(tune_mean)
    table = {}
    for a in alphas:
        row = {}
        for n in sets:
            for kind in ("default", "query"):
                test = cells[n, a, kind]["test"]
                cell = {"mean": test.mean["ndcg@10"], "ci95": test.ci95["ndcg@10"],
                        "tune": cells[n, a, kind]["tune"].mean["ndcg@10"]}
                if 1.0 in alphas and a != 1.0:
                    cell["p"] = compare_runs(cells[n, 1.0, kind]["test"], test, "ndcg@10").p_randomization
                row[n, kind] = cell
        table[a] = row
    return {"sets": {n: TITLES.get(n, n) for n in sets}, "alphas": alphas, "tune_mean": tune_mean,
            "chosen": chosen, "table": table, "finetuned": str(finetuned), "fingerprint": tag}


def to_json(result: dict) -> dict:
    """:func:`sweep`'s result with JSON keys (``"0.5"``, ``"set|kind"``)."""
    rows = {f"{a:g}": {f"{n}|{k}": c for (n, k), c in row.items()} for a, row in result["table"].items()}
    return {**result, "table": rows, "tune_mean": {f"{a:g}": v for a, v in result["tune_mean"].items()}}


def render(result: dict) -> str:
    """The docs section: a row per alpha, the defaults and the query-only rows, the chosen alpha marked."""
    sets = result["sets"]

    def cell(c):
        p = f" (p={c['p']:.3f}{'*' if c['p'] < 0.05 else ''})" if "p" in c else ""
        return f"{c['mean']:.3f} ± {c['ci95']:.3f}{p}"

    head = "| alpha | tune mean (defaults) | " + " | ".join(sets.values()) + " |"
    lines = [head, "|---" * (len(sets) + 2) + "|"]
    for kind, label in (("default", "`--reasoning` defaults"), ("query", "query only")):
        lines.append(f"| **{label}** |" + " |" * (len(sets) + 1))
        for a in result["alphas"]:
            mark = " (chosen)" if a == result["chosen"] else ""
            tune = f"{result['tune_mean'][a]:.3f}" if kind == "default" else ""
            lines.append(f"| {a:g}{mark} | {tune} | "
                         + " | ".join(cell(result["table"][a][n, kind]) for n in sets) + " |")
    return "\n".join([
        "### Weight-space ensembling: choosing train.wise_ft_alpha (issue 9)", "",
        ("Generated by `python scripts/agent_wise_ft.py --finetuned DIR` (DIR: `bash "
         "scripts/train_agent_retriever.sh OUT train.wise_ft_alpha=1`, OUT/final). Each row mixes that fine-tune "
         "with all-MiniLM-L6-v2: alpha * fine-tuned + (1 - alpha) * start; alpha 1 is the fine-tune, 0 the "
         "starting weights with the fine-tune's recorded search defaults. Cells: test nDCG@10 with its 95% CI "
         "and the paired randomisation p against alpha 1 (`*` p < 0.05); the tune column is the mean over the "
         "sets' tune questions, which alone choose alpha."), "", *lines, ""])
