"""``hopscotch eval-agent --runs DIR --qrels PATH``: evidence recall, search calls and accuracy of agent runs."""

from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("eval-agent", help="evaluate search-agent run files (BrowseComp-Plus layout)",
                       description="From agent run files (one JSON per question, or JSONL), compute evidence "
                                   "recall over the documents the agent was shown, search calls per question, and "
                                   "accuracy when the runs carry a judgement.")
    p.add_argument("--runs", required=True, help="folder of run files (*.json / *.jsonl), or one file")
    p.add_argument("--qrels", required=True, help="evidence qrels (TREC, BEIR TSV or JSONL)")
    p.add_argument("--duplicates", help="JSONL duplicate groups that expand the qrels")
    p.add_argument("--json", dest="json_out", help="write the report (with per-run rows) as JSON here")
    p.set_defaults(func=run)


def run(args) -> int:
    from hopscotch.retriever.evaluation.agent_runs import evaluate_agent_runs, format_report
    from hopscotch.retriever.io.common import write_json
    from hopscotch.retriever.io.qrels import expand_qrels_with_duplicates, read_qrels

    qrels = read_qrels(args.qrels)
    if args.duplicates:
        qrels = expand_qrels_with_duplicates(qrels, args.duplicates)
    report = evaluate_agent_runs(args.runs, qrels)
    print(format_report(report))
    if args.json_out:
        write_json(args.json_out, report)
    return 0
