"""``hopscotch replay``: re-issue an agent's recorded search calls to a candidate retriever and score them.

    hopscotch replay --runs PATH [--qrels Q [--duplicates D]] --searcher bm25|dense|hybrid|remote
                     [searcher flags: --bm25 DIR | --bm25-url URL, --index DIR, --model M, --url URL, ...]
                     [--rerank-model M ...]
                     [--reasoning]
                     [--query-input VARIANT] [--k 10] [--label NAME] [--compare OTHER/replay.json ...]
                     [--no-plot] --out DIR

``--runs`` is any trace file or folder the trace readers know (BrowseComp-Plus run records, Tongyi
steps, the world's ``traces.jsonl`` / generic JSONL; :mod:`hopscotch.data_synth.traces`). Every search
call with a query is re-issued, with its reasoning and context when ``--reasoning`` (or
``--query-input``, which implies it) asks for the reasoning-aware template, exactly as ``hopscotch
search`` does; calls with an empty query, and calls the trace marks as failed (unless
``--include-failed``), are skipped and counted.
With ``--reasoning`` BM25 expands each query with its reasoning (reasoning-aware BM25). Call ``n`` of question ``Q`` is ``Q#n`` (``n`` counts the replayed calls).
A hybrid's BM25 half may be a Pyserini-compatible endpoint (``--bm25-url ROOT/v1/NAME --index DIR``, e.g. the cmass
ClimbMix service: :mod:`hopscotch.retriever.searchers.remote_bm25`); ``replay.json`` records its URL, never a token.
``--rerank-model`` (every backend's flag, :mod:`hopscotch.retriever.searchers.rerank`) reranks the candidate's
top ``--rerank-depth`` by MaxSim; the searcher is then ``NAME+rerank`` and its query input the reranker's.

Writes ``DIR/calls.trec`` (the candidate's top-``k`` per call), ``DIR/replay.json`` (manifest,
``off_policy``, per-call ``ndcg@10`` / ``recall@k`` equal to ``hopscotch eval`` on ``calls.trec`` with
each call judged by its question's qrels, per-trajectory evidence recall curve, first-found call of each
evidence document and redundancy, run means with 95% CIs, the discovery curve, and ``per_query``: the
per-call scores in ``eval --json``'s shape; scoring in
:mod:`hopscotch.retriever.evaluation.replay`) and ``DIR/discovery.png`` (evidence recall vs call, one line
per retriever; needs matplotlib, the ``dev`` extra; ``--no-plot`` skips it). Without ``--qrels`` only the
qrels-free parts are reported (calls, documents retrieved, redundancy) and no plot is drawn.

Comparing retrievers: replay once per retriever, then pass the earlier ``replay.json`` files to
``--compare``. Each is checked to hold the same calls, qrels and ``k`` (its query input and searcher may
differ: they are what is compared), adds its line to the plot, and gets paired tests (randomisation and
t-test, delta = compared - this replay) per call and per trajectory. Each retriever keeps its own
flags, and a replay is computed once however many comparisons use it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from hopscotch.data_synth.traces import read_traces, unique_steps
from hopscotch.retriever.commands.arg_groups import add_k_flag, add_output_flags, add_reasoning_flag, arg_paths
from hopscotch.retriever.commands.flag_types import clamp_k, cutoff_int, permutations_int, positive_int
from hopscotch.retriever.commands.qrels_options import load_qrels
from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.evaluation.discovery_plot import Curve, plot_discovery, require_matplotlib
from hopscotch.retriever.evaluation.manifest import load_result, make_manifest, per_query_table, query_set, run_depth
from hopscotch.retriever.evaluation.replay import (
    OFF_POLICY,
    ReplayCall,
    check_replays_comparable,
    compare_reports,
    evidence_of,
    replay_report,
)
from hopscotch.retriever.io.common import write_json
from hopscotch.retriever.io.docids import canonical_docid
from hopscotch.retriever.io.outputs import check_outputs, output_folder
from hopscotch.retriever.io.progress import progress
from hopscotch.retriever.io.queries import Query
from hopscotch.retriever.io.runs import RunWriter, read_run
from hopscotch.retriever.searchers import iter_search, searcher_from_args
from hopscotch.retriever.searchers.base import add_option
from hopscotch.retriever.searchers.harness import read_template
from hopscotch.retriever.searchers.registry import SEARCHERS, get_searcher_class, searcher_names

REPLAY_FILES = ("replay.json", "calls.trec", "discovery.png")  # what --out receives (other files are left alone)


def register(sub) -> None:
    p = sub.add_parser("replay", help="re-issue recorded agent search calls to a retriever and score them "
                                      "(per call, per trajectory, discovery curve)",
                       description="Re-issue every search call of recorded agent runs to a candidate retriever "
                                   "and score it: per-call nDCG@10 / recall@k, per-trajectory evidence recall "
                                   "after each call and redundancy, run means with 95% CIs (off-policy).")
    p.add_argument("--runs", required=True, help="agent runs / traces: a file or folder (BrowseComp-Plus run "
                                                 "records, Tongyi steps, world traces.jsonl, generic JSONL)")
    p.add_argument("--trace-format", default="auto",
                   choices=["auto", "ircot", "tongyi", "browsecomp", "world", "generic"],
                   help="format of --runs (default: detected from each file's first record)")
    p.add_argument("--qrels", help="evidence qrels by question id (TREC, BEIR TSV or JSONL); without them only "
                                   "calls, documents retrieved and redundancy are reported")
    p.add_argument("--duplicates", help="JSONL duplicate groups that expand the qrels (exact duplicates)")
    add_output_flags(p, "output folder: replay.json, calls.trec, discovery.png", required=True, what="replay files")
    add_k_flag(p, type=cutoff_int, default=10,
               help="documents retrieved per call (recall@k, discovery; more than the index holds: all of them)")
    add_reasoning_flag(p, "encode calls reasoning-aware from the trace's reasoning and context (as search --reasoning)")
    p.add_argument("--label", help="this retriever's name in the plot and JSON (default: searcher and query input)")
    p.add_argument("--compare", action="append", default=[], metavar="REPLAY_JSON",
                   help="an earlier replay.json of the same runs: paired tests and its line in the plot "
                        "(repeatable)")
    p.add_argument("--include-failed", action="store_true",
                   help="also re-issue calls the trace marks as failed (the agent saw no results for them)")
    p.add_argument("--no-plot", action="store_true", help="do not draw discovery.png (no matplotlib needed)")
    p.add_argument("--permutations", type=permutations_int, default=10_000, help="randomisation test permutations")
    p.add_argument("--batch-size", type=positive_int, default=256, help="calls searched per step")
    add_option(p, "--searcher", "--searcher-type", dest="searcher_type", choices=searcher_names(),
               help="the candidate retriever (default: chosen from the flags given: --bm25 (or --bm25-url) and/or --index, "
                    "or --url)")
    for name in searcher_names():
        SEARCHERS[name].parse_args(p)  # --bm25, --index, --model, --query-input, --fusion, --url, --rerank-model, ...
    p.set_defaults(func=run)


def _reads_reasoning(args) -> bool:
    """Whether the calls are searched with their reasoning: ``--reasoning``, or ``--query-input`` (which implies it)."""
    return bool(args.reasoning or getattr(args, "query_input", None))


def _trajectories(args):
    """The replayed calls (as ReplayCall and as Query records), every question in order, and skip counts."""
    if not Path(args.runs).exists():
        raise UsageError(f"--runs {args.runs}: no such file or folder")
    calls, queries, order, files = [], [], {}, {}
    skipped = {"empty_query": 0, "failed": 0}
    for step in unique_steps(read_traces([args.runs], args.trace_format)):
        q = step.question_id
        if not q or any(ch.isspace() for ch in q):
            raise UsageError(f"{step.source}: question id {q!r} cannot name a run query (it holds whitespace)")
        path = step.source.rsplit(":", 1)[0]
        if files.setdefault(q, path) != path:
            raise UsageError(f"question {q} has trajectories in two files ({files[q]}, {path}); replay one run "
                             "of each question at a time")
        order.setdefault(q, 0)
        if not step.query.strip():
            skipped["empty_query"] += 1
            continue
        if step.failed and not args.include_failed:
            skipped["failed"] += 1
            continue
        order[q] += 1
        call = ReplayCall(q, order[q], step.query.strip(), step.step, step.source)
        calls.append(call)
        queries.append(read_template(Query(call.query, step.reasoning, current_reasoning=step.current_reasoning,
                                           prior_queries=step.prior_queries, prior_results=step.prior_results,
                                           qid=call.id, reasoning_aware=_reads_reasoning(args))))
    if not calls:
        raise UsageError(f"--runs {args.runs}: no search call with a query to replay")
    return calls, queries, list(order), skipped


#: flags never written to replay.json: credentials (the remote service's, a remote BM25 half's)
SECRET_FLAGS = frozenset({"token", "bm25_token"})


def _searcher_flags(args, name: str) -> dict:
    """The candidate backend's flags that differ from their defaults, as recorded in replay.json (no tokens)."""
    parser = argparse.ArgumentParser(add_help=False)
    get_searcher_class(name).parse_args(parser)
    defaults = vars(parser.parse_args([]))
    values = {k: getattr(args, k, None) for k in defaults if not k.startswith("_") and k not in SECRET_FLAGS}
    return {k: v for k, v in values.items() if isinstance(v, (str, int, float, bool)) and v != defaults[k]}


def _query_input(searcher, reasoning: bool) -> str | None:
    """What the candidate's reasoning-aware queries read (:attr:`~hopscotch.retriever.searchers.base.BaseSearcher.
    reasoning_input`: a dense variant, BM25's expansion, a reranker's): ``query`` for plain queries or a searcher
    that ignores the reasoning; None when a remote service picks its own."""
    if not reasoning:
        return "query"
    if searcher.name == "remote":
        return None
    return searcher.reasoning_input or "query"


def _search(searcher, queries, args, out_dir: Path) -> dict:
    """Search every call, write ``calls.trec`` and return the run as written (scores as in the file)."""
    path = out_dir / "calls.trec"
    with RunWriter(path, tag=searcher.name or "hopscotch") as out, \
            progress(total=len(queries), desc=f"replay ({searcher.name})", unit="call") as bar:
        for qid, hits in iter_search(searcher, queries, clamp_k("replay", args.k, searcher), args.batch_size):
            best: dict[str, float] = {}
            for docid, score in hits:
                d = canonical_docid(docid)
                best[d] = max(best.get(d, score), score)
            out.write(qid, best)
            bar.update(1)
    return read_run(path)


def _load_compared(paths) -> list[tuple[str, dict]]:
    """The ``--compare`` files, checked to be replay results (before any searching), every per-call and
    per-trajectory number as ``compare`` checks it (finite; a trec_eval metric in [0, 1])."""
    loaded = []
    for path in paths:
        other = load_result(path)
        if other["manifest"].get("command") != "replay" or not isinstance(other.get("per_call"), dict):
            raise UsageError(f"--compare {path}: not a replay.json (written by hopscotch replay)")
        for key in ("per_call", "per_trajectory"):
            if other.get(key):
                per_query_table({"per_query": other[key]}, path)
        loaded.append((str(path), other))
    return loaded


def _comparisons(args, loaded, manifest: dict, report: dict, label: str) -> tuple[list[dict], list]:
    compared, curves = [], []
    for path, other in loaded:
        check_replays_comparable(manifest, other["manifest"], "this replay", str(path))
        other_label = (other.get("retriever") or {}).get("label") or Path(path).parent.name
        if other_label == label:
            other_label = f"{other_label} ({Path(path).parent.name})"
        tests = compare_reports(report, other, permutations=args.permutations)
        compared.append({"path": str(path), "label": other_label, "tests": tests})
        if other.get("discovery_curve"):
            curves.append(Curve.from_report(other_label, other["discovery_curve"]))
    return compared, curves


def _fmt(stats: dict) -> str:
    if stats["mean"] is None:
        return "-"
    return f"{stats['mean']:.4f} ± {stats['ci95']:.4f}"


def _print_summary(result: dict, skipped: dict, wrote: list[str]) -> None:
    calls, retriever = result["calls"], result["retriever"]
    print(f"replay: {calls['replayed']} calls of {calls['trajectories']} trajectories re-issued to "
          f"{retriever['label']} (query input: {retriever['query_input']}), k={result['manifest']['k']}")
    print(f"  skipped: {skipped['empty_query']} calls without a query, {skipped['failed']} failed calls")
    if result["manifest"]["qrels"] is None:
        print("  no --qrels: no evidence scores (calls, documents retrieved and redundancy only)")
    else:
        print(f"  scored: {calls['scored']} calls of {calls['trajectories_with_evidence']} trajectories with "
              "evidence in the qrels")
    width = max(len(m) for m in result["metrics"])
    print(f"  {'metric'.ljust(width)}  mean ± ci95            n")
    for name, stats in result["metrics"].items():
        print(f"  {name.ljust(width)}  {_fmt(stats).ljust(20)}  {stats['n']}")
    for comp in result["compare"]:
        print(f"paired comparison ({comp['label']} - {retriever['label']}): delta  p(randomisation)  p(t-test)  n")
        for metric, t in comp["tests"].items():
            print(f"  {metric:<16} {t['delta']:+.4f}  {t['p_randomization']:.4f}  {t['p_ttest']:.4f}  {t['n']}")
    print(f"note: {OFF_POLICY}")
    print("wrote " + ", ".join(wrote))


def run(args) -> int:
    if args.k <= 0 or args.batch_size <= 0 or args.permutations <= 0:
        raise UsageError("--k, --batch-size and --permutations must be positive")
    if args.duplicates and not args.qrels:
        raise UsageError("--duplicates expands --qrels: give --qrels too")
    if args.qrels and not args.no_plot:
        require_matplotlib()  # fail before searching, not after
    guard = check_outputs(vars(args), outputs=[output_folder(args.out, REPLAY_FILES)], ignore=("batch_size", "rerank_cache"),
                          inputs=arg_paths(args, "runs", "qrels", "duplicates", "compare", "bm25", "corpus", "index",
                                           "model", "fusion_config", "rerank_model"))
    loaded = _load_compared(args.compare)
    calls, queries, questions, skipped = _trajectories(args)
    qrels = None
    if args.qrels:
        qrels = load_qrels(args)  # canonical docids: read_qrels' own
        if not any(evidence_of(qrels, q) for q in questions):
            raise UsageError(f"none of the {len(questions)} questions of --runs (e.g. {questions[0]!r}) has a "
                             f"relevant document in --qrels {args.qrels}")
    scored = sum(evidence_of(qrels, c.question_id) is not None for c in calls) if qrels is not None else 0
    replayed = query_set(c.id for c in calls)
    early = make_manifest("replay", qrels_path=args.qrels, qrels=qrels, k=args.k, protocol="hopscotch",
                          queries_expected=len(calls), queries_evaluated=scored, queries=replayed)
    for path, other in loaded:  # before searching; the corpus is checked once the searcher says it
        check_replays_comparable(early, other["manifest"], "this replay", path)
    if getattr(args, "query_input", None):
        args.reasoning = True  # as in hopscotch search: the dense searcher makes 'query' plain
    searcher = searcher_from_args(args, reasoning=bool(args.reasoning))  # --rerank-model: a RerankedSearcher
    query_input = _query_input(searcher, args.reasoning)
    label = args.label or (searcher.name if query_input in ("query", None) else f"{searcher.name} ({query_input})")
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    try:
        run_ = _search(searcher, queries, args, out_dir)
    finally:
        searcher.close()
    seconds = time.perf_counter() - t0
    report = replay_report(calls, run_, qrels, args.k, trajectories=questions)
    vector = searcher.vector_stage
    corpus = getattr(args, "corpus", None) or (vector.meta.corpus if vector is not None else None) or None
    manifest = make_manifest("replay", corpus=corpus, qrels_path=args.qrels, qrels=qrels, k=args.k,
                             query_input=query_input, protocol="hopscotch", queries_expected=len(calls),
                             queries_evaluated=report["calls"]["scored"], runs=str(args.runs),
                             searcher=searcher.name, queries=replayed, depth=run_depth(run_))
    compared, curves = _comparisons(args, loaded, manifest, report, label)
    flags = _searcher_flags(args, searcher.first_stage.name)
    result = {"manifest": manifest, "off_policy": OFF_POLICY,
              "retriever": {"label": label, "searcher": searcher.name, "query_input": query_input,
                            "reasoning": bool(args.reasoning), "flags": flags},
              "calls": {**report["calls"], "skipped": skipped, "search_seconds": round(seconds, 3)},
              "metrics": report["metrics"], "discovery_curve": report["discovery_curve"], "compare": compared,
              "plot": None, "per_call": report["per_call"], "per_trajectory": report["per_trajectory"]}
    if report["per_query"]:  # the per-call scores in eval --json's shape, for hopscotch compare
        result["per_query"] = report["per_query"]
    wrote, png = [str(out_dir / "calls.trec")], out_dir / "discovery.png"
    if args.no_plot or report["discovery_curve"] is None:
        why = "--no-plot" if args.no_plot else "no --qrels"
        print(f"hopscotch replay: note: no discovery.png ({why})", file=sys.stderr)
        png.unlink(missing_ok=True)  # an earlier replay's plot into this folder would not be this one's
    else:
        lines = plot_discovery([Curve.from_report(label, report["discovery_curve"]), *curves], png)
        result["plot"] = {"path": str(png), "lines": lines}
        wrote.append(str(png))
    write_json(out_dir / "replay.json", result)
    guard.finish()
    wrote.insert(0, str(out_dir / "replay.json"))
    _print_summary(result, skipped, wrote)
    return 0
