"""``hopscotch bm25-index --corpus PATH --out DIR [--backend auto|bm25s|disk]``: build a BM25 index.

Two backends that score alike (:mod:`hopscotch.retriever.index.bm25`): bm25s (in RAM) and disk (memory-mapped
postings answered with block-max MaxScore, built by a streaming build that resumes after a kill:
:mod:`hopscotch.retriever.index.bm25.disk_build`); ``auto`` builds bm25s below
:data:`~hopscotch.retriever.index.bm25.AUTO_DISK_DOCS` documents and disk from there on. ``--plan`` prints what
either backend costs at ``--docs N`` (disk, RAM, q/s) from the per-document figures measured here
(:mod:`hopscotch.retriever.index.bm25.plan`), without building. An identical rerun of a finished build does nothing.
"""

from __future__ import annotations

import sys
import time
from itertools import islice
from pathlib import Path

from hopscotch.retriever.commands.arg_groups import add_output_flags
from hopscotch.retriever.commands.flag_types import non_negative_float, positive_int, unit_interval
from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.index.bm25 import BM25Index, read_meta
from hopscotch.retriever.index.bm25.analyzer import check_analyzer_names
from hopscotch.retriever.index.bm25.disk_build import DiskBuildOptions, build_disk_index
from hopscotch.retriever.index.bm25.memory import AUTO_DISK_DOCS, auto_backend
from hopscotch.retriever.index.bm25.plan import format_bm25_plan, measure_figures
from hopscotch.retriever.io.atomic import atomic_folder
from hopscotch.retriever.io.corpus import count_documents, read_corpus
from hopscotch.retriever.io.outputs import Output, check_outputs, named_inputs

#: what a BEIR corpus folder's reader takes from it (io.corpus.corpus_files); another folder is read whole
CORPUS_FILES = ("corpus.jsonl", "corpus.jsonl.gz", "corpus.parquet")
#: the disk backend's own flags (refused with --backend bm25s); none changes the index, so none is fingerprinted
DISK_FLAGS = {"batch_docs": "--batch-docs", "merge_postings": "--merge-postings", "workers": "--workers"}
PLAN_FLAGS = {"docs": "--docs", "avg_doc_bytes": "--avg-doc-bytes"}


def register(sub) -> None:
    p = sub.add_parser("bm25-index", help="build a BM25 index over a corpus",
                       description="Build a BM25 index (Lucene scoring, bm25s's formula) over a corpus and save it: "
                                   "bm25s (in RAM) for small corpora, disk (memory-mapped postings, block-max "
                                   "MaxScore top-k, resumable streaming build) for large ones; both score alike.")
    p.add_argument("--corpus", help="corpus JSONL/parquet file, BEIR folder or shard folder")
    add_output_flags(p, "index folder to write", what="index folder")
    p.add_argument("--backend", choices=("auto", "bm25s", "disk"), default="auto",
                   help="auto (default): bm25s below 100,000 documents, disk from there on (they score alike)")
    p.add_argument("--k1", type=non_negative_float, default=1.5, help="BM25 term-frequency saturation k1 (>= 0)")
    p.add_argument("--b", type=unit_interval, default=0.75, help="BM25 length normalisation b (0..1)")
    p.add_argument("--stemmer", default="english", help="PyStemmer language, or 'none'")
    p.add_argument("--stopwords", default="en", help="bm25s stopword list (en, de, fr, ...), or 'none'")
    p.add_argument("--batch-docs", type=positive_int, help="disk: documents a run, the step a killed build resumes "
                                                            "from (default 100,000; its RAM is about 80 bytes a term "
                                                            "occurrence: --plan prints it)")
    p.add_argument("--merge-postings", type=positive_int, help="disk: postings a merge step holds (default "
                                                                "20,000,000: about 800 MB)")
    p.add_argument("--workers", type=positive_int, help="disk: processes analysing the text (default 1)")
    p.add_argument("--plan", action="store_true", help="print the disk, RAM and q/s of both backends at --docs N "
                                                       "(or the --corpus's count) and build nothing")
    p.add_argument("--docs", type=positive_int, help="--plan: documents to plan for")
    p.add_argument("--avg-doc-bytes", type=positive_int, help="--plan: mean JSONL bytes a document (default: the "
                                                              "measured corpus's)")
    p.set_defaults(func=run)


def _settings(args) -> tuple[str | None, str | None]:
    stemmer = None if args.stemmer == "none" else args.stemmer
    stopwords = None if args.stopwords == "none" else args.stopwords
    try:
        check_analyzer_names(stemmer, stopwords)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return stemmer, stopwords


def _backend(args) -> str:
    """The backend to build (auto: by the corpus's size, counted up to the threshold only)."""
    given = [flag for dest, flag in DISK_FLAGS.items() if getattr(args, dest) is not None]
    if args.backend == "bm25s" and given:
        raise UsageError(f"{given[0]} applies to the disk backend only: drop it, or use --backend disk")
    if args.backend != "auto":
        return args.backend
    counted = sum(1 for _ in islice(read_corpus(args.corpus, unique=False), AUTO_DISK_DOCS))
    backend = auto_backend(counted)
    if backend == "bm25s" and given:
        raise UsageError(f"{given[0]} applies to the disk backend only, and --backend auto builds bm25s for this "
                         f"corpus ({counted:,} documents, below {AUTO_DISK_DOCS:,}): drop it, or use --backend disk")
    return backend


def run(args) -> int:
    if args.plan:
        return run_plan(args)
    given = [flag for dest, flag in PLAN_FLAGS.items() if getattr(args, dest) is not None]
    if given:
        raise UsageError(f"{given[0]} applies to --plan only: drop it, or add --plan")
    if not args.corpus or not args.out:
        raise UsageError("the following arguments are required: --corpus, --out (or --plan --docs N)")
    stemmer, stopwords = _settings(args)
    guard = check_outputs(vars(args), outputs=[Output(Path(args.out), folder=True)],
                          inputs=named_inputs(args.corpus, CORPUS_FILES), ignore=tuple(DISK_FLAGS))
    backend = _backend(args)  # before anything else: a flag the backend ignores is refused
    if not args.overwrite and _up_to_date(args.out, guard.fingerprint):
        guard.finish()
        print(f"bm25 index {args.out} is up to date (built from the same corpus and flags); nothing to do")
        return 0
    t0 = time.perf_counter()
    if backend == "disk":
        num_docs = _build_disk(args, stemmer, stopwords, guard.fingerprint)
    else:
        num_docs = _build_bm25s(args, stemmer, stopwords, guard.fingerprint)
    guard.finish()
    print(f"bm25 index ({backend}) of {num_docs:,} documents written to {args.out} in {time.perf_counter() - t0:.1f}s")
    return 0


def _up_to_date(out: str, fingerprint: str) -> bool:
    if not (Path(out) / "hopscotch_bm25.json").is_file():
        return False
    try:
        return read_meta(out).get("fingerprint") == fingerprint
    except UsageError:
        return False


def _build_bm25s(args, stemmer, stopwords, fingerprint: str) -> int:
    index = BM25Index.build(read_corpus(args.corpus), k1=args.k1, b=args.b, stemmer=stemmer, stopwords=stopwords)
    index.fingerprint = fingerprint
    with atomic_folder(args.out) as build:  # killed: only a .NAME.*.tmp folder, removed by the next run
        index.save(build)
    return len(index.docids)


def _build_disk(args, stemmer, stopwords, fingerprint: str) -> int:
    defaults = DiskBuildOptions()
    options = DiskBuildOptions(k1=args.k1, b=args.b, stemmer=stemmer, stopwords=stopwords,
                               batch_docs=args.batch_docs or defaults.batch_docs,
                               merge_postings=args.merge_postings or defaults.merge_postings,
                               workers=args.workers or defaults.workers)
    meta = build_disk_index(read_corpus(args.corpus, unique=False), args.out, fingerprint, options,
                            corpus_name=str(args.corpus), log=lambda line: print(line, file=sys.stderr))
    return meta["num_docs"]


def run_plan(args) -> int:
    if args.out:
        raise UsageError("--plan builds nothing: drop --out")
    if args.workers is not None:
        raise UsageError("--workers: --plan sizes one analysing process (each worker adds its own batch's RAM): "
                         "drop it")
    docs, figures = args.docs, None
    if args.corpus:
        stemmer, stopwords = _settings(args)
        figures = measure_figures(args.corpus, stemmer=stemmer, stopwords=stopwords)
        if args.avg_doc_bytes:
            raise UsageError("--avg-doc-bytes is measured from --corpus: give one of them")
        if docs is None:
            docs = count_documents(args.corpus)
    if docs is None:
        raise UsageError("--plan needs --docs N (or --corpus to count)")
    print(format_bm25_plan(docs, args.avg_doc_bytes, figures, args.batch_docs, args.merge_postings))
    return 0
