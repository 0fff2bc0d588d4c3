"""``hopscotch tune-fusion``: pick the BM25 + dense fusion on dev queries, report it on held-out ones.

    hopscotch tune-fusion --sparse bm25.trec --dense dense.trec --qrels qrels.tsv --out tuned.json
                          [--dev-fraction 0.5 --seed 13 | --dev-qids FILE] [--metric ndcg@10]
                          [--alphas 0,0.1,...,1] [--normalizations minmax,zscore]
                          [--rrf-ks 10,20,40,60,100] [--rrf-weights 1:1,2:1,1:2]
                          [--adapts 0.5,1,2] [--adapt-shifts 0,1,2]
                          [--k 1000] [--depth N] [--min-gain 0] [--duplicates FILE] [--min-coverage 0.9]

The grid (interpolation at convex BM25 weights ``alpha * bm25 + (1 - alpha) * dense`` on min-max and z-score
normalised scores, RRF, and adaptive fusion: a BM25 weight per query from the two lists' own score
distributions and agreement) is scored on the dev queries; the best setting, or the better component alone when no fusion beats
it on dev, is evaluated on the held-out queries beside both components and written to ``--out``, which
``hopscotch search --bm25 DIR --index DIR --fusion-config tuned.json`` reads. Each run must answer at least
``--min-coverage`` (default 0.9) of the judged queries (:func:`~hopscotch.retriever.evaluation.metrics.check_coverage`):
a run of other queries would score zeros, not retrieval. The work is
:mod:`hopscotch.retriever.searchers.fusion_tuning`.
"""

from __future__ import annotations

import math

from hopscotch.retriever.commands.arg_groups import add_k_flag, add_output_flags, arg_paths
from hopscotch.retriever.commands.flag_types import finite_float, metric_name, positive_int, seed_int, unit_interval
from hopscotch.retriever.commands.qrels_options import add_qrels_options, load_qrels
from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.evaluation.metrics import MIN_COVERAGE, parse_metric, run_coverage
from hopscotch.retriever.io.common import write_json
from hopscotch.retriever.io.outputs import check_outputs
from hopscotch.retriever.io.runs import read_run
from hopscotch.retriever.searchers.fusion import NORMALIZATIONS
from hopscotch.retriever.searchers.fusion_tuning import (
    TuningOptions,
    format_report,
    fusion_grid,
    judged_qids,
    read_qid_list,
    split_qids,
    tune_fusion,
)


def register(sub) -> None:
    p = sub.add_parser("tune-fusion", help="tune BM25 + dense fusion on dev queries, report on held-out ones",
                       description="Grid-search interpolation and RRF of a BM25 run and a dense run on a dev split "
                                   "of the queries, guarded never to lose to the better component on dev (unless "
                                   "--min-gain is negative); report the held-out queries and write the chosen "
                                   "settings as JSON.")
    p.add_argument("--sparse", required=True, help="BM25 TREC run (deep, e.g. --k 1000)")
    p.add_argument("--dense", required=True, help="dense TREC run over the same queries")
    add_qrels_options(p)
    add_output_flags(p, "write the chosen settings and scores as JSON here (for --fusion-config)", what="--out file")
    split = p.add_mutually_exclusive_group()
    split.add_argument("--dev-fraction", type=unit_interval, default=0.5,
                       help="share of judged queries for dev, strictly between 0 and 1 (default 0.5)")
    split.add_argument("--dev-qids", help="file of dev query ids (first field per line); the rest is held out")
    p.add_argument("--seed", type=seed_int, default=13, help="seed of the dev/held-out split")
    p.add_argument("--metric", type=metric_name, default="ndcg@10",
                   help="what the dev grid is ranked by (ndcg@k, recall@k, mrr@k, ...)")
    p.add_argument("--alphas", default=",".join(f"{i / 10:g}" for i in range(11)),
                   help="interp: convex BM25 weights in [0, 1] (0 = dense alone, 1 = BM25 alone)")
    p.add_argument("--normalizations", default="minmax,zscore",
                   help="interp: score normalisations to try, comma-separated (minmax is Pyserini's)")
    p.add_argument("--rrf-ks", default="10,20,40,60,100", help="rrf: the constants k to try")
    p.add_argument("--rrf-weights", default="1:1", help="rrf: W_BM25:W_DENSE pairs to try (1:1 is plain RRF)")
    p.add_argument("--adapts", default="0.5,1,2",
                   help="adaptive: strengths to try at every base weight strictly inside (0, 1); 0 alone: none")
    p.add_argument("--adapt-shifts", default="0,1,2",
                   help="adaptive: standout differences (BM25 - dense) at which neither list is favoured")
    add_k_flag(p, default=1000, help="fused lists and components are cut to k before scoring")
    p.add_argument("--depth", type=positive_int, help="cut each run to this depth before fusing (default: all of it)")
    p.add_argument("--min-coverage", type=unit_interval, default=MIN_COVERAGE,
                   help=f"the least share of the judged queries each run must answer (default {MIN_COVERAGE:g}; "
                        "below it is an error, not a score of zeros)")
    p.add_argument("--min-gain", type=finite_float, default=0.0,
                   help="a fusion must beat the better component on dev by more than this (default 0; a negative "
                        "margin takes a fusion up to that much below it, and the report says it is below)")
    p.set_defaults(func=run)


def _floats(text: str, flag: str, lo: float = 0.0, hi: float | None = None) -> list[float]:
    """Comma-separated finite numbers ``lo <= x <= hi`` (hi None: no upper bound), at least one."""
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"{flag}: expected comma-separated numbers, got {text!r}") from None
    if not values:
        raise UsageError(f"{flag}: no value given")
    bad = [v for v in values if not math.isfinite(v) or v < lo or (hi is not None and v > hi)]
    if bad:
        span = f"in [{lo:g}, {hi:g}]" if hi is not None else f">= {lo:g}"
        raise UsageError(f"{flag}: expected finite numbers {span}, got {bad[0]:g}")
    return values


def _pairs(text: str) -> list[tuple[float, float]]:
    pairs = [tuple(x.split(":")) for x in text.split(",") if x.strip()]
    if not pairs or any(len(p) != 2 for p in pairs):
        raise UsageError(f"--rrf-weights: expected W_BM25:W_DENSE pairs such as 1:1,2:1, got {text!r}")
    return [(_floats(a, "--rrf-weights")[0], _floats(b, "--rrf-weights")[0]) for a, b in pairs]


def _normalizations(text: str) -> list[str]:
    names = [x.strip() for x in text.split(",") if x.strip()]
    bad = [n for n in names if n not in NORMALIZATIONS]
    if not names or bad:
        raise UsageError(f"--normalizations: expected a comma-separated subset of {','.join(NORMALIZATIONS)}, got {text!r}")
    return names


def run(args) -> int:
    parse_metric(args.metric)
    if args.k <= 0 or (args.depth is not None and args.depth <= 0):
        raise UsageError("--k and --depth must be positive")
    grid = fusion_grid(_floats(args.alphas, "--alphas", 0.0, 1.0), _floats(args.rrf_ks, "--rrf-ks"),
                       _pairs(args.rrf_weights), _normalizations(args.normalizations),
                       _floats(args.adapts, "--adapts"), _floats(args.adapt_shifts, "--adapt-shifts", lo=-1e6))
    guard = check_outputs(vars(args), outputs=[args.out], inputs=arg_paths(args, "sparse", "dense", "qrels", "duplicates",
                                                                    "dev_qids"))
    qrels = load_qrels(args)
    judged = judged_qids(qrels)
    runs = {flag: read_run(path) for flag, path in (("--sparse", args.sparse), ("--dense", args.dense))}
    for flag, path in (("--sparse", args.sparse), ("--dense", args.dense)):
        run_coverage(runs[flag], qrels).check(f"{flag} {path}", args.min_coverage)
    if args.dev_qids:
        wanted = set(read_qid_list(args.dev_qids))
        dev, test = [q for q in judged if q in wanted], [q for q in judged if q not in wanted]
        if not dev or not test:
            raise UsageError(f"--dev-qids {args.dev_qids}: {len(dev)} judged dev and {len(test)} held-out queries; "
                             "both must be non-empty")
    else:
        dev, test = split_qids(judged, args.dev_fraction, args.seed)
    options = TuningOptions(metric=args.metric, k=args.k, depth=args.depth, min_gain=args.min_gain)
    result = tune_fusion(runs["--sparse"], runs["--dense"], qrels, dev, test, grid, options)
    print(format_report(result))
    if args.out:
        out = result.to_json()
        out.update(sparse_run=args.sparse, dense_run=args.dense, qrels=args.qrels, seed=args.seed,
                   dev_fraction=None if args.dev_qids else args.dev_fraction, dev_qids_file=args.dev_qids,
                   k=args.k, depth=args.depth)
        write_json(args.out, out)
        print(f"settings written to {args.out} (use: hopscotch search ... --fusion-config {args.out})")
    guard.finish()
    return 0
