"""``hopscotch eval --run RUN --qrels PATH``: nDCG / Recall / MRR with 95% CIs, optional paired comparison.

Before scoring, each run is checked against the qrels (:func:`~hopscotch.retriever.evaluation.metrics.run_coverage`)
and problems are warned about on stderr: docids that barely meet the qrels' docids (fewer than 5% of the
evaluated queries the run answers retrieved any judged docid: a second docid spelling or another corpus;
``--strict`` makes this an error, exit 2), qrels queries the run lacks (scored 0) and run queries without
judgements (ignored). A missing query scores 0, as ``trec_eval -c`` scores it; ``--min-coverage S`` makes a
run answering less than the share S of the judged queries an error (the coverage rule
:func:`~hopscotch.retriever.evaluation.metrics.check_coverage`, which ``tune-fusion`` and ``compare`` apply
at 0.9). ``--json`` writes ``{manifest, metrics, ci95, num_queries, per_query[, compare]}``;
the manifest (:mod:`hopscotch.retriever.evaluation.manifest`) is what ``hopscotch compare`` checks.
"""

from __future__ import annotations

import os
import sys

from hopscotch.retriever.commands.arg_groups import add_output_flags, arg_paths
from hopscotch.retriever.commands.flag_types import metric_list, unit_interval
from hopscotch.retriever.commands.qrels_options import add_qrels_options, load_qrels, qrels_manifest_extra
from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.evaluation.manifest import make_manifest, query_set, run_depth
from hopscotch.retriever.evaluation.metrics import compare_runs, evaluate, format_table, parse_metric, run_coverage
from hopscotch.retriever.io.common import write_json
from hopscotch.retriever.io.outputs import check_outputs
from hopscotch.retriever.io.runs import read_run


def register(sub) -> None:
    p = sub.add_parser("eval", help="evaluate a TREC run against qrels",
                       description="Evaluate a TREC run against qrels (TREC, BEIR TSV or JSONL).")
    p.add_argument("--run", required=True, help="TREC run file")
    add_qrels_options(p)
    p.add_argument("--compare", help="a second run: paired randomisation and t-test against --run")
    p.add_argument("--metrics", type=metric_list, default="ndcg@10,recall@10,recall@100",
                   help="comma-separated: ndcg@k, recall@k, mrr@k, map@k, p@k (k >= 1)")
    p.add_argument("--corpus", help="the corpus (or index) the run searched; recorded in the JSON manifest")
    p.add_argument("--strict", action="store_true",
                   help="fail (exit 2) instead of warning when a run's docids barely meet the qrels' docids")
    p.add_argument("--min-coverage", type=unit_interval, default=0.0,
                   help="fail (exit 2) when a run answers less than this share of the judged queries (default 0: "
                        "a missing query scores 0, with a warning; tune-fusion and compare require 0.9)")
    add_output_flags(p, "write {manifest, metrics, ci95, per_query} JSON here", flag="--json", dest="json_out",
                     what="--json file")
    p.set_defaults(func=run)


def _check(name: str, run_docs, qrels, strict: bool, min_coverage: float) -> int:
    """Warn (or, with ``strict``, fail) about how the run meets the qrels; fail below ``min_coverage``;
    returns the queries it answers."""
    coverage = run_coverage(run_docs, qrels)
    coverage.check(name, min_coverage)
    if strict and coverage.docids_disjoint:
        raise UsageError(coverage.overlap_message(name) + " (--strict)")
    for line in coverage.warnings(name):
        print(f"hopscotch eval: warning: {line}", file=sys.stderr)
    return coverage.answered


def run(args) -> int:
    metrics = list(args.metrics)  # lower-case names, at least one (metric_list)
    depth = max(parse_metric(m)[1] for m in metrics)
    guard = check_outputs(vars(args), outputs=[args.json_out],
                          inputs=arg_paths(args, "run", "compare", "qrels", "duplicates", "corpus"))
    qrels = load_qrels(args)
    base_run = read_run(args.run)
    answered = _check(os.path.basename(args.run), base_run, qrels, args.strict, args.min_coverage)
    other_run = None
    if args.compare:
        other_run = read_run(args.compare)
        _check(os.path.basename(args.compare), other_run, qrels, args.strict, args.min_coverage)
    base = evaluate(base_run, qrels, metrics)
    rows = [(os.path.basename(args.run), base)]
    other = None
    if other_run is not None:
        other = evaluate(other_run, qrels, metrics)
        rows.append((os.path.basename(args.compare), other))
    print(f"{len(base.per_query)} queries")
    print(format_table(rows, metrics))
    manifest = make_manifest("eval", corpus=args.corpus, qrels_path=args.qrels, qrels=qrels, k=depth,
                             protocol="trec_eval", queries_expected=len(qrels),
                             queries_evaluated=len(base.per_query), run=str(args.run), metrics=metrics,
                             queries_answered=answered, depth=run_depth(base_run),
                             queries=query_set(q for q in base.per_query if base_run.get(q)),
                             **qrels_manifest_extra(args))
    out = {"manifest": manifest, **base.to_json()}
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
    guard.finish()
    return 0
