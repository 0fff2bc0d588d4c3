"""Choosing ``train.wise_ft_alpha`` (issue 9): a sweep of WiSE-FT mixes of one fine-tune with its starting
model over the agent dev sets, picked on the tune questions; regenerates its section of docs/benchmarks.md.

    bash scripts/train_agent_retriever.sh /tmp/agent_ft train.wise_ft_alpha=1     # the un-mixed fine-tune
    .venv/bin/python scripts/agent_wise_ft.py --finetuned /tmp/agent_ft/final --work /tmp/hopscotch-ablation \\
        [--alphas 0,0.3,0.5,0.7,1] [--sets hotpotqa,musique,world,tongyi,tongyi_pages] [--no-docs]

Each mix is what training with ``train.wise_ft_alpha=A`` saves (``model/weight_merge.py``, the same code),
written to ``WORK/wise_ft/a<A>``; it is indexed and searched as ``hopscotch index/search --model M
--reasoning`` (the model's recorded defaults) and ``--query-input query`` with the ablation's cached sets
(``scripts/agent_ablation.py``; delete a file under WORK to redo it). The chosen alpha has the best mean
nDCG@10 of the defaults over the sets' tune questions (ties: the larger alpha, the lesser change); test
questions only report it, each cell with its 95% CI and the paired randomisation p against alpha 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

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
    from hopscotch.retriever.io.fingerprint import digest, file_fingerprint

    files = {p.relative_to(finetuned).as_posix(): file_fingerprint(p, full_hash_bytes=sys.maxsize)
             for p in sorted(finetuned.rglob("*.safetensors"))}
    return digest(files)[:10]


def choose(tune_mean: dict[float, float]) -> float:
    """The alpha with the best tune mean; among equals the larger (the lesser change to the fine-tune)."""
    return max(sorted(tune_mean, reverse=True), key=lambda a: tune_mean[a])


def sweep(finetuned: Path, start: str, alphas: list[float], work: Path, names: list[str]) -> dict:
    from agent_ablation import _evaluate, build_indexes, search
    from agent_eval_sets import TITLES, build_sets

    from hopscotch.retriever.evaluation.metrics import compare_runs
    from hopscotch.retriever.io.runs import read_run

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
                cells[n, a, kind] = {"tune": _evaluate(run, es.qrels, es.tune), "test": _evaluate(run, es.qrels, es.test)}
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


def render(result: dict) -> str:
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


def main(argv=None) -> int:
    from agent_ablation import replace_section

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--finetuned", required=True, help="a fine-tune trained with train.wise_ft_alpha=1")
    parser.add_argument("--start", default="minilm", help="the model it started from (default: bundled MiniLM)")
    parser.add_argument("--alphas", default="0,0.3,0.5,0.7,1", help="comma-separated alphas in [0, 1]")
    parser.add_argument("--work", default="/tmp/hopscotch-ablation", help="cache folder (sets, indexes, runs)")
    parser.add_argument("--sets", default="hotpotqa,musique,world,tongyi,tongyi_pages", help="dev sets to run")
    parser.add_argument("--docs", default=str(ROOT / "docs" / "benchmarks.md"), help="markdown file to update")
    parser.add_argument("--no-docs", action="store_true", help="print only")
    parser.add_argument("--json", help="write every number here")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    alphas = sorted({float(a) for a in args.alphas.split(",") if a.strip()})
    if not alphas or not all(0 <= a <= 1 for a in alphas):
        parser.error(f"--alphas: expected numbers in [0, 1], got {args.alphas!r}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch

    torch.set_num_threads(args.threads)
    result = sweep(Path(args.finetuned).resolve(), args.start, alphas, Path(args.work),
                   [s.strip() for s in args.sets.split(",") if s.strip()])
    section = render(result)
    print(section)
    print(f"chosen: train.wise_ft_alpha={result['chosen']:g}")
    if args.json:
        rows = {f"{a:g}": {f"{n}|{k}": c for (n, k), c in row.items()} for a, row in result["table"].items()}
        Path(args.json).write_text(json.dumps({**result, "table": rows,
                                               "tune_mean": {f"{a:g}": v for a, v in result["tune_mean"].items()}},
                                              indent=2))
    if not args.no_docs:
        docs = Path(args.docs)
        text = docs.read_text() if docs.exists() else ""
        docs.write_text(replace_section(text, section, START, END))
        print(f"updated {docs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
