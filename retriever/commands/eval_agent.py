"""``hopscotch eval-agent --runs DIR --qrels PATH``: evidence recall, search calls and accuracy of agent runs.

From agent run files (one JSON per question, or JSONL), compute evidence recall over the documents the
agent was shown, search calls per question, and accuracy when the runs carry a judgement.
"""

from __future__ import annotations

from hopscotch.retriever.commands.qrels_options import add_qrels_options, load_qrels


def register(sub) -> None:
    p = sub.add_parser("eval-agent", help="evaluate search-agent run files (BrowseComp-Plus layout)",
                       description=__doc__.split("\n\n", 1)[1].strip())
    p.add_argument("--runs", required=True, help="folder of run files (*.json / *.jsonl), or one file")
    add_qrels_options(p, "evidence qrels (TREC, BEIR TSV or JSONL)")
    p.add_argument("--json", dest="json_out", help="write the report (with per-run rows) as JSON here")
    p.set_defaults(func=run)


def run(args) -> int:
    from hopscotch.retriever.evaluation.agent_runs import evaluate_agent_runs, format_report
    from hopscotch.retriever.io.common import write_json

    qrels = load_qrels(args)
    report = evaluate_agent_runs(args.runs, qrels)
    print(format_report(report))
    if args.json_out:
        write_json(args.json_out, report)
    return 0
