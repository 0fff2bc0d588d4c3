"""``hopscotch synth``: DR-Synth training tuples from QA data + agent traces (see docs/data_synth.md), or, with
``--mode trajectory-use``, tuples from what an agent went on to use (docs/training.md, "Trajectory-use labels"), or,
with ``--mode teacher``, tuple files scored again by a teacher for distillation (docs/training.md, "Distillation").

Example (command line, not run)::

    hopscotch synth --qa ../shared/data/hotpotqa_ircot --traces ../shared/data/hotpotqa_ircot/cot_steps.jsonl \\
        --out out/hotpot_tuples.jsonl --oracle lexical --workers 2 --preview 3
    hopscotch synth --mode trajectory-use --traces ../shared/data/qampari_tongyi/agent_search_steps.jsonl \\
        --runs ../shared/data/qampari_tongyi/runs/infly.jsonl --questions train_ids.txt --out out/tongyi_use.jsonl
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

from hopscotch.data_synth.config import SynthConfig
from hopscotch.data_synth.first_stage import CANDIDATE_SOURCES, DEFAULT_CANDIDATES
from hopscotch.data_synth.oracles.base import OracleWeights
from hopscotch.data_synth.pipeline import SynthInputs, default_stats_path, synthesize
from hopscotch.data_synth.preview import preview, summary_line
from hopscotch.data_synth.qa import QRELS_FILES, QUERY_FILES
from hopscotch.data_synth.trace_readers import SNIPPETS_FILE
from hopscotch.data_synth.trajectory_use import UseConfig
from hopscotch.data_synth.trajectory_use_synth import UseInputs, synthesize_trajectory_use
from hopscotch.retriever.commands.arg_groups import add_output_flags, arg_paths
from hopscotch.retriever.commands.bm25_index import CORPUS_FILES
from hopscotch.retriever.commands.flag_types import (
    int_range,
    non_negative_int,
    positive_float,
    positive_int,
    seed_int,
    unit_interval,
)
from hopscotch.retriever.commands.synth_teacher import run_teacher
from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.searchers.adapter.flags import deprecated_help, with_deprecated_aliases
from hopscotch.retriever.io.outputs import check_outputs, named_inputs

RERANKER_CHOICES = ("lexical", "dense", "cross-encoder", "llm")
TRACE_FORMAT_CHOICES = ("auto", "ircot", "tongyi", "browsecomp", "world", "generic")
QUERY_FORMAT_CHOICES = ("separate", "agentir")
MODE_CHOICES = ("dr-synth", "trajectory-use", "teacher")
#: flags of one mode only (dests), refused when given a value other than their default in the other mode
DR_SYNTH_ONLY = ("qa", "qrels", "question_only", "trace_format", "include_failed_calls", "duplicate_groups",
                 "query_format", "query_instruction", "reranker", "candidates", "candidate_index", "gold", "positives",
                 "negatives", "negative_start",
                 "near_duplicate", "oracle_weights", "seed", "encoder", "cross_encoder", "llm_base_url", "llm_model",
                 "llm_api_key_env", "llm_cache", "llm_window", "llm_stride", "llm_max_retries", "llm_timeout")
TRAJECTORY_USE_ONLY = ("snippets", "runs", "questions", "bm25_negatives")
TEACHER_ONLY = ("tuples", "teacher", "teacher_model", "teacher_reranker")


def register(sub) -> None:
    p = sub.add_parser("synth", help="label agent search steps into (reasoning, query, +, -) tuples",
                       description="DR-Synth: for each search step of agent traces, retrieve first-stage candidates "
                                   "(reasoning-aware BM25 by default, --candidates), "
                                   "put the question's gold documents in, rerank with an oracle that sees the "
                                   "question and its answer, and cut positives and hard negatives. --mode "
                                   "trajectory-use: label each search call of agent trajectories by what the agent "
                                   "went on to use (positives) and what it was shown and passed over (negatives).")
    p.add_argument("--mode", default="dr-synth", choices=MODE_CHOICES,
                   help="dr-synth (default): QA + traces + oracle; trajectory-use: a Tongyi steps file's calls "
                        "labelled by the agent's later use (the question-level dev sets' usage rule); teacher: "
                        "--tuples scored again by --teacher (each passage's score, for loss.distill)")
    data = p.add_argument_group("data")
    data.add_argument("--qa", help="QA folder (BEIR queries.jsonl with answers + qrels.tsv, or "
                                   "questions.tsv) or a queries file (required by --mode dr-synth)")
    data.add_argument("--qrels", help="qrels file (default: the QA folder's qrels.tsv, if any)")
    data.add_argument("--corpus", help="corpus file or folder (default: <qa>/corpus.jsonl)")
    src = data.add_mutually_exclusive_group()
    src.add_argument("--traces", action="append", metavar="PATH",
                     help="trace file or folder; repeatable, formats may mix (detected per file)")
    src.add_argument("--question-only", action="store_true",
                     help="no traces: each question is its single query, reasoning empty (baseline)")
    data.add_argument("--trace-format", default="auto", choices=TRACE_FORMAT_CHOICES,
                      help="force the trace format instead of detecting it per file")
    data.add_argument("--include-failed-calls", action="store_true",
                      help="keep steps whose tool call failed in the original run")
    data.add_argument("--max-questions", type=positive_int, help="only the first N questions (in trace order)")
    data.add_argument("--bm25-index", help="a saved 'hopscotch bm25-index' of the corpus (else built in memory)")
    data.add_argument("--duplicate-groups", metavar="PATH",
                      help="the corpus's duplicate groups (cmass format, as 'hopscotch audit near-duplicates' writes "
                           "and 'eval --duplicates' reads): no document they list as an exact or near duplicate "
                           "(at any Jaccard listed) of a positive or gold document is taken as a negative")
    use = p.add_argument_group("trajectory-use mode (--traces: one Tongyi agent_search_steps.jsonl)")
    use.add_argument("--snippets", help="the returned documents' snippets {docid, text} the usage rule reads "
                                        "(default: doc_snippets.jsonl beside --traces)")
    use.add_argument("--runs", help="the trajectories' BrowseComp-Plus run file or folder (their final answers "
                                    "count as later text)")
    use.add_argument("--questions", metavar="FILE", help="question ids to label, one per line (default: every "
                                                          "question); no other question's call is written")
    use.add_argument("--bm25-negatives", type=non_negative_int, default=3, metavar="N",
                     help="BM25 hard negatives per tuple after the shown-not-used ones (default 3; --depth "
                          "candidates searched)")
    teach = p.add_argument_group("teacher mode (--tuples: tuple files; --corpus or --bm25-index: their corpus)")
    teach.add_argument("--tuples", action="append", metavar="PATH", help="tuple file or folder to score (repeatable)")
    teach.add_argument("--teacher", choices=("hybrid", "cross-encoder", "both"),
                       help="hybrid: reasoning-aware BM25 fused with --teacher-model's cosine (the hybrid's default "
                            "fusion); cross-encoder: --teacher-reranker's logit; both: the mean of their z-scores")
    teach.add_argument("--teacher-model", metavar="M", help="the hybrid teacher's dense model")
    teach.add_argument("--teacher-reranker", metavar="R", help="the cross-encoder teacher (a cross-encoder folder)")
    out = p.add_argument_group("output")
    add_output_flags(out, "tuples JSONL to write (Tevatron / AgentIR layout)", required=True,
                     what="tuples and stats files")
    out.add_argument("--stats", help="stats JSON (default: <out stem>.stats.json)")
    out.add_argument("--preview", type=non_negative_int, default=0, metavar="N",
                     help="print the first N tuples readably")
    out.add_argument("--fresh", action="store_true", help="discard work files of an earlier, different run")
    out.add_argument("--query-format", default="separate", choices=QUERY_FORMAT_CHOICES,
                     help="separate (default): 'query' and 'reasoning' in their own fields; agentir: 'query' holds "
                          "AgentIR's 'Reasoning: {reasoning or Empty}\\n\\nQuery: {query}', so Tevatron (which "
                          "reads only 'query') trains on the reasoning")
    out.add_argument("--query-instruction", default="", metavar="TEXT",
                     help="with --query-format agentir: a prefix of that string (default none: Tevatron adds "
                          "AgentIR's instruction itself through its --query_prefix)").allow_empty = True
    lab = p.add_argument_group("labelling")
    lab.add_argument("--oracle", "--reranker", dest="reranker", default="lexical", choices=RERANKER_CHOICES,
                     action=with_deprecated_aliases(argparse._StoreAction, {"--reranker": "--oracle"}),
                     help=deprecated_help("the oracle: the scorer that sees the question and its answers and ranks "
                                          "the candidates (default lexical)", ["--reranker"]))
    lab.add_argument("--candidates", default=DEFAULT_CANDIDATES, choices=CANDIDATE_SOURCES,
                     help="the first stage that mines each step's candidates (its hard negatives): bm25-reasoning "
                          "(default: the query expanded with the step's reasoning, as search --reasoning does; a step "
                          "without one is plain BM25), bm25 (the query alone), or hybrid (that BM25 fused with "
                          "--candidate-index's dense list)")
    lab.add_argument("--candidate-index", metavar="DIR",
                     help="with --candidates hybrid: a dense index of the corpus (hopscotch index), its vector half")
    lab.add_argument("--depth", type=positive_int, default=50, help="candidate window length (default 50)")
    lab.add_argument("--gold", type=non_negative_int, default=5,
                     help="at most this many gold documents put in (default 5)")
    lab.add_argument("--positives", type=positive_int, default=1, help="positives per tuple (default 1)")
    lab.add_argument("--negatives", type=non_negative_int, default=7, help="hard negatives per tuple (default 7)")
    lab.add_argument("--negative-start", type=non_negative_int, default=10,
                     help="0-based oracle rank where the hard-negative pool starts (default 10)")
    lab.add_argument("--near-duplicate", type=unit_interval, default=0.8,
                     help="word 3-gram Jaccard at which two passages count as one (default 0.8)")
    lab.add_argument("--oracle-weights", metavar="gold=2,answer=0.3,query=1,question=0.3",
                     help="feature weights of the lexical / dense / cross-encoder oracles")
    lab.add_argument("--seed", type=seed_int, default=13, help="random seed of the candidate windows and labels")
    lab.add_argument("--workers", type=int_range(1, 1024), default=1, help="processes (output identical for any N)")
    mod = p.add_argument_group("oracle models")
    mod.add_argument("--encoder", default="minilm", help="dense oracle encoder: 'minilm' or a local folder")
    mod.add_argument("--cross-encoder", help="cross-encoder oracle: a local sentence-transformers CrossEncoder folder")
    mod.add_argument("--llm-base-url", help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1")
    mod.add_argument("--llm-model", help="model name sent to the endpoint")
    mod.add_argument("--llm-api-key-env", default="OPENAI_API_KEY", help="environment variable holding the key")
    mod.add_argument("--llm-cache", help="response cache folder (default: <out>.llm-cache)")
    mod.add_argument("--llm-window", type=positive_int, default=20, help="passages per listwise prompt (default 20)")
    mod.add_argument("--llm-stride", type=positive_int, default=10, help="sliding-window stride (default 10)")
    mod.add_argument("--llm-max-retries", type=int_range(0, 100), default=4,
                     help="retries of a failed LLM oracle request")
    mod.add_argument("--llm-timeout", type=positive_float, default=60.0, help="seconds per request")
    p.set_defaults(func=run, _parser=p)


def parse_weights(text: str | None):
    weights = OracleWeights()
    if not text:
        return weights
    for part in text.split(","):
        name, _, value = part.partition("=")
        name = name.strip()
        if not hasattr(weights, name) or not value:
            raise UsageError(f"--oracle-weights: expected name=value pairs with names gold, answer, query, "
                             f"question (got {part!r})")
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not math.isfinite(number):
            raise UsageError(f"--oracle-weights: {name} needs a finite number (got {value!r})")
        setattr(weights, name, number)
    return weights


def _inputs(args) -> list:
    """What synth reads, for the output check: the QA folder's own files (a BEIR folder is not read whole)."""
    return [named_inputs(args.qa, QUERY_FILES + QRELS_FILES + CORPUS_FILES), named_inputs(args.corpus, CORPUS_FILES),
            arg_paths(args, "qrels", "traces", "bm25_index", "encoder", "cross_encoder", "duplicate_groups",
                      "candidate_index")]


def _check_mode(args) -> None:
    """Flags of the other mode given a value, and each mode's required inputs: argparse's one-line error, exit 2."""
    parser = args._parser
    other = {"dr-synth": TRAJECTORY_USE_ONLY + TEACHER_ONLY, "trajectory-use": DR_SYNTH_ONLY + TEACHER_ONLY,
             "teacher": ("traces", *DR_SYNTH_ONLY, *TRAJECTORY_USE_ONLY)}[args.mode]
    given = [d for d in other if getattr(args, d) != parser.get_default(d)
             and not (d == "trace_format" and args.trace_format == "tongyi")]  # what the mode reads anyway
    if given:
        flag = next(a.option_strings[0] for a in parser._actions if a.dest == given[0])
        parser.error(f"{flag} does not apply to --mode {args.mode}")
    if args.mode == "teacher":
        if not args.tuples or not args.teacher:
            parser.error("--mode teacher needs --tuples PATH and --teacher")
    elif args.mode == "trajectory-use":
        if not args.traces or len(args.traces) != 1:
            parser.error("--mode trajectory-use needs one --traces (a Tongyi agent_search_steps.jsonl)")
    elif args.qa is None:
        parser.error("the following arguments are required: --qa")
    elif not args.traces and not args.question_only:
        parser.error("one of the arguments --traces --question-only is required")


def run_trajectory_use(args) -> int:
    t0 = time.perf_counter()
    stats_path = args.stats or default_stats_path(args.out)
    inputs = UseInputs(args.traces[0], args.snippets, args.runs, args.corpus, args.questions, args.bm25_index)
    beside = Path(args.traces[0]).parent / SNIPPETS_FILE  # the default --snippets (and --corpus)
    guard = check_outputs(vars(args), outputs=[args.out, stats_path],
                          inputs=[arg_paths(args, "traces", "snippets", "runs", "corpus", "questions", "bm25_index"),
                                  beside if args.snippets is None and beside.is_file() else None],
                          # flags newer than the mode's outputs, at their defaults here: earlier outputs still match
                          ignore=("workers", "preview", "fresh", "candidates", "candidate_index", *TEACHER_ONLY))
    stats = synthesize_trajectory_use(inputs, args.out, UseConfig(args.bm25_negatives, args.depth), stats_path,
                                      args.max_questions, args.fresh)
    guard.finish()
    if args.preview > 0:
        print(preview(args.out, args.preview))
        print()
    print(f"synth: {stats['tuples']} tuples from {stats['calls']} search calls of {stats['questions']} questions "
          f"({stats['calls_without_use']} calls without a used document skipped, {stats['questions_left_out']} "
          f"questions left out); positives {stats['positives']['total']}, negatives shown "
          f"{stats['negatives']['shown']} + BM25 {stats['negatives']['bm25']}")
    print(f"synth: tuples -> {args.out}; stats -> {stats_path} ({time.perf_counter() - t0:.1f}s)")
    return 0


def run(args) -> int:
    _check_mode(args)
    if args.mode == "trajectory-use":
        return run_trajectory_use(args)
    if args.mode == "teacher":
        return run_teacher(args)

    t0 = time.perf_counter()
    try:
        config = SynthConfig(
            reranker=args.reranker, candidates=args.candidates, depth=args.depth, gold=args.gold, positives=args.positives,
            negatives=args.negatives, negative_start=args.negative_start, near_duplicate=args.near_duplicate,
            seed=args.seed, workers=args.workers, trace_format=args.trace_format,
            include_failed_calls=args.include_failed_calls, max_questions=args.max_questions,
            weights=parse_weights(args.oracle_weights), encoder=args.encoder, cross_encoder=args.cross_encoder,
            llm_base_url=args.llm_base_url, llm_model=args.llm_model, llm_api_key_env=args.llm_api_key_env,
            llm_cache=args.llm_cache, llm_window=args.llm_window, llm_stride=args.llm_stride,
            llm_timeout=args.llm_timeout, llm_max_retries=args.llm_max_retries, fresh=args.fresh,
            query_format=args.query_format, query_instruction=args.query_instruction)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.query_instruction and args.query_format != "agentir":
        raise UsageError("--query-instruction needs --query-format agentir")
    guard = check_outputs(vars(args), outputs=[args.out, args.stats or default_stats_path(args.out)],
                          inputs=_inputs(args),  # the other mode's flags are at their defaults here: left out, so
                          # outputs recorded before --mode existed still match their identical rerun
                          ignore=("workers", "preview", "fresh", "mode", *TRAJECTORY_USE_ONLY, *TEACHER_ONLY))
    inputs = SynthInputs(args.qa, args.corpus, traces=args.traces or (), question_only=args.question_only,
                         qrels=args.qrels, bm25_index=args.bm25_index, duplicate_groups=args.duplicate_groups,
                         candidate_index=args.candidate_index)
    stats = synthesize(inputs, out=args.out, config=config, stats_path=args.stats)
    guard.finish()
    if args.preview > 0:
        print(preview(args.out, args.preview))
        print()
    print(f"synth: {summary_line(stats)}")
    print(f"synth: tuples -> {args.out}; stats -> {args.stats or default_stats_path(args.out)} "
          f"({time.perf_counter() - t0:.1f}s)")
    return 0
