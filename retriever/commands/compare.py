"""``hopscotch compare A.json B.json [--metric ndcg@10]``: a paired comparison of two evaluation results.

Both files are results written by ``eval --json`` (or ``eval-agent`` / ``replay``) with a manifest; they
are compared only when their manifests agree (:func:`~hopscotch.retriever.evaluation.manifest.check_comparable`:
otherwise exit 2 naming the field that differs). For each metric (``--metric``, repeatable; default every
metric both carry per query) it prints both means, ``delta = B - A`` and the two-sided p-values of a paired
randomisation test and a paired t-test over the queries both results scored.

Like for like only: besides the manifest fields, two results of runs of different depths (``depth``: the
most hits per query) are not compared on a metric whose cutoff exceeds the shallower depth (named with
``--metric``: exit 2; by default: left out with a note), and a result whose run answered less than
``--min-coverage`` (default 0.9) of the judged queries is refused. Every number is checked as it is read
back (:func:`~hopscotch.retriever.evaluation.manifest.per_query_table`): a NaN, a string or an nDCG of 7.5
is an error naming the file and key.
"""

from __future__ import annotations

import os
import sys

from hopscotch.retriever.commands.arg_groups import add_output_flags
from hopscotch.retriever.commands.flag_types import metric_name, permutations_int, unit_interval
from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.evaluation.manifest import (
    check_comparable,
    comparable_metrics,
    load_result,
    manifest_count,
    per_query_table,
    shared_metrics,
)
from hopscotch.retriever.evaluation.metrics import MIN_COVERAGE, check_coverage, compare_per_query
from hopscotch.retriever.io.common import write_json
from hopscotch.retriever.io.outputs import check_outputs


def register(sub) -> None:
    p = sub.add_parser("compare", help="paired comparison of two evaluation results (eval --json)",
                       description="Compare two evaluation results (eval --json outputs) query by query, "
                                   "after checking their manifests agree.")
    p.add_argument("first", metavar="A.json", help="the baseline result")
    p.add_argument("second", metavar="B.json", help="the result compared with it (delta = B - A)")
    p.add_argument("--metric", action="append", dest="metrics", type=metric_name,
                   help="a per-query metric to compare, e.g. ndcg@10 (repeatable; default: every metric both "
                        "results carry)")
    p.add_argument("--permutations", type=permutations_int, default=10_000,
                   help="randomisation-test permutations")
    p.add_argument("--min-coverage", type=unit_interval, default=MIN_COVERAGE,
                   help="the least share of the judged queries each result's run must answer "
                        f"(default {MIN_COVERAGE:g})")
    add_output_flags(p, "write {a, b, num_queries, tests: {metric: {...}}} JSON here", flag="--json",
                     dest="json_out", what="--json file")
    p.set_defaults(func=run)


def run(args) -> int:
    if args.permutations < 1:
        raise UsageError("--permutations must be at least 1")
    guard = check_outputs(vars(args), outputs=[args.json_out], inputs=[args.first, args.second])
    a, b = load_result(args.first), load_result(args.second)
    name_a, name_b = os.path.basename(args.first), os.path.basename(args.second)
    check_comparable(a["manifest"], b["manifest"], name_a, name_b)
    for path, result in ((args.first, a), (args.second, b)):
        answered = manifest_count(result["manifest"], "queries_answered", path)
        judged = manifest_count(result["manifest"], "queries_evaluated", path)
        if answered is not None and judged:
            check_coverage(str(path), answered, judged, args.min_coverage)
    table_a, table_b = per_query_table(a, args.first), per_query_table(b, args.second)
    metrics = [m.strip().lower() for m in args.metrics] if args.metrics else shared_metrics(table_a, table_b)
    metrics, note = comparable_metrics(a["manifest"], b["manifest"], metrics, (name_a, name_b),
                                       (args.first, args.second), chosen=bool(args.metrics))
    if note:
        print(f"hopscotch compare: note: {note}", file=sys.stderr)
    if not metrics:
        raise UsageError(f"{name_a} and {name_b} share no per-query metric; name one with --metric")
    shared = set(table_a) & set(table_b)
    only = len(set(table_a) ^ set(table_b))
    print(f"A = {name_a}, B = {name_b}: {len(shared)} shared queries"
          + (f" ({only} scored by only one, left out)" if only else ""))
    width = max(12, *(len(m) for m in metrics))
    print(f"  {'metric':<{width}} {'A':>8} {'B':>8} {'B - A':>8}  p(randomisation)  p(t-test)")
    tests = {}
    for m in metrics:
        c = compare_per_query(table_a, table_b, m, permutations=args.permutations)
        print(f"  {m:<{width}} {c.mean_a:8.4f} {c.mean_b:8.4f} {c.delta:+8.4f}  {c.p_randomization:16.4f}  "
              f"{c.p_ttest:9.4f}")
        tests[m] = {"mean_a": c.mean_a, "mean_b": c.mean_b, "delta": c.delta,
                    "p_randomization": c.p_randomization, "p_ttest": c.p_ttest}
    if args.json_out:
        write_json(args.json_out, {"a": str(args.first), "b": str(args.second), "num_queries": len(shared),
                                   "tests": tests})
    guard.finish()
    return 0
