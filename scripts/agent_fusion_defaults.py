"""Checking the CLI's fusion defaults (issue 9): the macro-mean nDCG@10 of every interpolation and RRF setting
over the agent dev sets' tune questions, BM25 + the trained model's ``search --reasoning`` defaults.

    .venv/bin/python scripts/agent_fusion_defaults.py --work /tmp/hopscotch-ablation [--split tune] [--top 12]

Reads the runs ``scripts/agent_ablation.py --trained DIR`` cached under ``--work`` (``runs/<set>.bm25.trec``,
``runs/<set>.trained.default.trec``) and fuses them as ``hopscotch search --fusion`` does (depth 100, k 100):
interpolation with min-max (Pyserini's) and z-score normalisation at BM25 weights 0, 0.1, ..., 1 and 0.25,
0.35, 0.45, and RRF. The defaults in ``hopscotch.retriever.searchers.fusion``
(``DEFAULT_INTERP``, ``DEFAULT_RRF``) are the best interpolation and the best RRF setting of this table on
the tune questions, and a default moves only when the best setting beats it significantly (paired randomisation
test over the tune queries of all sets pooled, p < 0.05): the tune slices are small and most neighbouring
settings differ by noise. ``--split test`` only reports.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

SETS = ("hotpotqa", "musique", "world", "tongyi", "tongyi_pages")


def grid() -> list:
    """``tune-fusion``'s grid (:func:`~hopscotch.retriever.searchers.fusion_tuning.fusion_grid`), both
    normalisations, over these weights and RRF settings."""
    from hopscotch.retriever.searchers.fusion_tuning import fusion_grid

    weights = [i / 10 for i in range(11)] + [0.25, 0.35, 0.45]
    return fusion_grid(weights, (5.0, 10.0, 20.0, 40.0, 60.0, 100.0), ((1.0, 1.0), (0.3, 1.0), (0.5, 1.0), (1.0, 0.5)))


def table(work: Path, split: str, sets=SETS) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, dict]]]:
    """``{setting: {set: nDCG@10}}`` on ``split``'s questions of each set, and ``{setting: {"set/qid":
    {"ndcg@10": value}}}`` (the queries of every set pooled, for paired tests)."""
    from hopscotch.retriever.evaluation.metrics import evaluate
    from hopscotch.retriever.io.qrels import read_qrels
    from hopscotch.retriever.io.runs import read_run
    from hopscotch.retriever.searchers.fusion_tuning import fuse_runs

    out: dict[str, dict[str, float]] = {}
    pooled: dict[str, dict[str, dict]] = {}
    for name in sets:
        folder = work / "sets" / name
        qids = (folder / f"{split}_qids.txt").read_text().split()
        qrels = read_qrels(folder / "qrels.tsv")
        sparse, dense = read_run(work / "runs" / f"{name}.bm25.trec"), read_run(work / "runs" / f"{name}.trained.default.trec")
        for settings in grid():
            run = fuse_runs(sparse, dense, settings, qids, k=100, depth=100)
            result = evaluate({q: run.get(q, {}) for q in qids}, {q: qrels[q] for q in qids if q in qrels}, ["ndcg@10"])
            out.setdefault(settings.describe(), {})[name] = result.mean["ndcg@10"]
            pooled.setdefault(settings.describe(), {}).update(
                {f"{name}/{q}": v for q, v in result.per_query.items()})
    return out, pooled


def main(argv=None) -> int:
    from hopscotch.retriever.evaluation.metrics import compare_per_query
    from hopscotch.retriever.searchers.fusion import DEFAULT_INTERP, DEFAULT_RRF

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", default="/tmp/hopscotch-ablation", help="the ablation's cache folder")
    parser.add_argument("--split", choices=("tune", "test"), default="tune")
    parser.add_argument("--top", type=int, default=12, help="rows to print (the defaults are always printed)")
    args = parser.parse_args(argv)
    scores, pooled = table(Path(args.work), args.split)
    mean = {s: sum(v.values()) / len(v) for s, v in scores.items()}
    ranked = sorted(mean, key=lambda s: -mean[s])
    defaults = {DEFAULT_INTERP.describe(), DEFAULT_RRF.describe()}
    print(f"| setting | {args.split} mean | " + " | ".join(SETS) + " |")
    print("|---" * (len(SETS) + 2) + "|")
    for s in [r for i, r in enumerate(ranked) if i < args.top or r in defaults]:
        mark = " (default)" if s in defaults else ""
        print(f"| {s}{mark} | {mean[s]:.4f} | " + " | ".join(f"{scores[s][n]:.3f}" for n in SETS) + " |")
    best = {m: max((s for s in ranked if s.startswith(m)), key=lambda s: mean[s]) for m in ("interp", "rrf")}
    print(f"best interp: {best['interp']}; best rrf: {best['rrf']}; defaults: {sorted(defaults)}")
    for default in (DEFAULT_INTERP.describe(), DEFAULT_RRF.describe()):
        top = best[default.split()[0]]
        if top != default:
            c = compare_per_query(pooled[default], pooled[top], "ndcg@10")
            verdict = "moves the default" if c.p_randomization < 0.05 and c.delta > 0 else "keeps the default"
            print(f"{top} vs the default {default} over the {len(pooled[top])} pooled {args.split} queries: "
                  f"{c.delta:+.4f}, paired p = {c.p_randomization:.3f}"
                  + (f" ({verdict})" if args.split == "tune" else " (held out: reported, never chosen on)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
