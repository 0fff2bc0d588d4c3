"""``hopscotch eval --run RUN --qrels PATH``: nDCG / Recall / MRR with 95% CIs, optional paired comparison."""

from __future__ import annotations

import os

from hopscotch.retriever.commands.qrels_options import add_qrels_options, load_qrels


def register(sub) -> None:
    p = sub.add_parser("eval", help="evaluate a TREC run against qrels",
                       description="Evaluate a TREC run against qrels (TREC, BEIR TSV or JSONL).")
    p.add_argument("--run", required=True, help="TREC run file")
    add_qrels_options(p)
    p.add_argument("--compare", help="a second run: paired randomisation and t-test against --run")
    p.add_argument("--metrics", default="ndcg@10,recall@10,recall@100",
                   help="comma-separated: ndcg@k, recall@k, mrr@k, map@k, p@k")
    p.add_argument("--json", dest="json_out", help="write {metrics, ci95, per_query} JSON here")
    p.set_defaults(func=run)


def run(args) -> int:
    from hopscotch.retriever.evaluation.metrics import compare_runs, evaluate, format_table
    from hopscotch.retriever.io.common import write_json
    from hopscotch.retriever.io.runs import read_run

    metrics = [m.strip().lower() for m in args.metrics.split(",") if m.strip()]
    qrels = load_qrels(args)
    base = evaluate(read_run(args.run), qrels, metrics)
    rows = [(os.path.basename(args.run), base)]
    other = None
    if args.compare:
        other = evaluate(read_run(args.compare), qrels, metrics)
        rows.append((os.path.basename(args.compare), other))
    print(f"{len(base.per_query)} queries")
    print(format_table(rows, metrics))
    out = base.to_json()
    if other is not None:
        print()
        print("paired comparison (compare - run): delta  p(randomisation)  p(t-test)")
        out["compare"] = {"run": args.compare, "metrics": other.mean, "tests": {}}
        for m in metrics:
            c = compare_runs(base, other, m)
            print(f"  {m:<12} {c.delta:+.4f}  {c.p_randomization:.4f}  {c.p_ttest:.4f}")
            out["compare"]["tests"][m] = {"delta": c.delta, "p_randomization": c.p_randomization,
                                         "p_ttest": c.p_ttest}
    if args.json_out:
        write_json(args.json_out, out)
    return 0
