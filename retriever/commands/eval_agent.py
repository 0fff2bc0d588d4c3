"""``hopscotch eval-agent --runs DIR --qrels PATH [--protocol bcp|cmass|hopscotch]``: score agent run files.

Each protocol computes one harness's own numbers from the run files (and the judge's output, when
given with ``--judgements``; otherwise judgements are read from the run records):

* ``hopscotch`` (default): evidence recall over every document the agent was shown, search and document
  calls per question, accuracy over judged runs with incomplete runs counted wrong;
* ``bcp``: BrowseComp-Plus's scripts_evaluation/evaluate_run.py: accuracy over every run (incomplete or
  unjudged = wrong), recall over retrieved_docids, average tool calls, calibration error, citations;
* ``cmass``: castorini/cmass's REPRODUCING.md: accuracy over the qrels' questions, macro previewed recall
  (and surfaced / opened / cited / agent), search + read_document calls per question.

No judge model is run: runs without a judgement count as wrong (bcp, cmass) or are left out (hopscotch).
``--json`` writes ``{manifest, ...report}``; the manifest records the protocol and the judgement source.
"""

from __future__ import annotations

import argparse

from hopscotch.retriever.commands.arg_groups import add_output_flags, arg_paths
from hopscotch.retriever.commands.qrels_options import add_qrels_options, load_qrels, qrels_manifest_extra
from hopscotch.retriever.evaluation import agent_runs, bcp_protocol, cmass_protocol
from hopscotch.retriever.evaluation.manifest import make_manifest, query_set
from hopscotch.retriever.io.common import write_json
from hopscotch.retriever.io.outputs import check_outputs

PROTOCOLS = ("hopscotch", "bcp", "cmass")


def register(sub) -> None:
    p = sub.add_parser("eval-agent", help="evaluate search-agent run files (BrowseComp-Plus / cmass layouts)",
                       description=__doc__.split("\n\n", 1)[1].strip(),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", required=True,
                   help="run files: a folder (bcp: its run_*.json; cmass: <run-id>/runs/*.json; hopscotch: every "
                        "*.json / *.jsonl below it), or one JSON / JSONL file")
    add_qrels_options(p, "evidence qrels (TREC, BEIR TSV or JSONL); cmass: also the question set")
    p.add_argument("--protocol", choices=PROTOCOLS, default="hopscotch",
                   help="whose metric definitions to use (default: hopscotch)")
    p.add_argument("--judgements",
                   help="the judge's output: a folder of *_eval.json (BrowseComp-Plus evals/, cmass "
                        "evals/per-query/), a JSONL of them, detailed_judge_results.csv or evaluation_summary.json; "
                        "default: judgements carried by the run records")
    add_output_flags(p, "write the report (manifest, per-run rows) as JSON here", flag="--json", dest="json_out",
                     what="--json file")
    p.set_defaults(func=run)


def run(args) -> int:
    guard = check_outputs(vars(args), outputs=[args.json_out], inputs=arg_paths(args, "runs", "qrels", "duplicates",
                                                                         "judgements"))
    evaluate, fmt = {
        "hopscotch": (agent_runs.evaluate_agent_runs, agent_runs.format_report),
        "bcp": (bcp_protocol.evaluate_bcp, bcp_protocol.format_bcp_report),
        "cmass": (cmass_protocol.evaluate_cmass, cmass_protocol.format_cmass_report),
    }[args.protocol]
    qrels = load_qrels(args)  # canonical docids: read_qrels' own
    report = evaluate(args.runs, qrels, args.judgements)
    print(fmt(report))
    if args.json_out:
        manifest = make_manifest("eval-agent", qrels_path=args.qrels, qrels=qrels, protocol=args.protocol,
                                 judge=report["judge"], queries_expected=report["queries_expected"],
                                 queries_evaluated=report["queries_evaluated"], snippet_chars=None,
                                 runs=str(args.runs), queries=query_set(r["query_id"] for r in report["per_run"]),
                                 **qrels_manifest_extra(args))
        write_json(args.json_out, {"manifest": manifest, **report})
    guard.finish()
    return 0
