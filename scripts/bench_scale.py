"""Benchmark: measured cost curves of BM25 (bm25s and the disk backend), dense Flat, IVF-PQ and multi-vector indexes
at 10k, 100k and 1M documents, with ``hopscotch index --plan``'s and ``bm25-index --plan``'s predictions beside them
(docs/scaling.md, sections "Measured cost curves" and "BM25 cost curves").

Documents are real sentences recombined (2-6 sentences of HotpotQA / MuSiQue paragraphs each, no two alike); the
encoder is all-MiniLM-L6-v2 cut to its first 2 layers at max length 64 (``--model``); see
:mod:`hopscotch_experiments.benchmarks.scale.data`. Each stage of each size runs in its own process (wall time and
peak RSS: :mod:`hopscotch_experiments.benchmarks.scale.stages`) and is saved under ``--work``; a rerun skips the
finished ones (``--fresh`` redoes them). The plan checks: :mod:`hopscotch_experiments.benchmarks.scale.run`.

    flock /tmp/hopscotch-heavy.lock .venv/bin/python scripts/bench_scale.py --json /tmp/scale.json   # ~2-2.5 h
    .venv/bin/python scripts/bench_scale.py --sizes 10000 --threads 1 --doc /tmp/scaling.md          # ~6 min
    .venv/bin/python scripts/bench_scale.py --kinds bm25s disk --sizes 10000 100000 1000000 10000000   # BM25 only
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from hopscotch_experiments.benchmarks.common import add_run_options, shared_data_dir
from hopscotch_experiments.benchmarks.scale.bm25 import bm25_findings, bm25_table
from hopscotch_experiments.benchmarks.scale.data import DEFAULT_QUERY_SOURCES, DEFAULT_SOURCES
from hopscotch_experiments.benchmarks.scale.report import dense_findings, measured_table, plan_table, write_scale_report
from hopscotch_experiments.benchmarks.scale.run import run_scale
from hopscotch_experiments.benchmarks.scale.stages import KINDS, ScaleConfig

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    p.add_argument("--model", default="minilm1", help="minilmN (MiniLM's first N of 6 layers, its own weights), random "
                                                      "(2 random layers), minilm, or a model folder; the default keeps "
                                                      "1M documents within ~20 min on 2 cores")
    p.add_argument("--max-length", type=int, default=32, help="encoder tokens a document")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--shard-size", type=int, default=100_000)
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--k", type=int, default=100)
    p.add_argument("--ivf-spec", default="auto",
                   help="auto: what --spec auto builds above its Flat cut-off, at every size; or a FAISS spec, "
                        "{nlist}: --spec auto's list count for N")
    p.add_argument("--nprobe", type=int, help="default: --spec auto's search default at each size")
    p.add_argument("--refine", type=int, help="default: --spec auto's search default (2)")
    p.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS),
                   help="indexes to measure: bm25s, disk (the two BM25 backends), dense (Flat and IVF-PQ), mv")
    p.add_argument("--bm25s-max", type=int, default=1_000_000, help="largest size bm25s is built at (RAM)")
    p.add_argument("--dense-max", type=int, default=1_000_000, help="largest size encoded for Flat / IVF-PQ")
    p.add_argument("--multivector-max", type=int, default=10_000,
                   help="largest size given a multi-vector index (~5 KB and ~9 ms of build a document on 2 cores)")
    p.add_argument("--mv-dim", type=int, default=128)
    p.add_argument("--mv-nbits", type=int, default=2, choices=[1, 2, 4, 8])
    p.add_argument("--mv-nprobe", type=int, default=4)
    p.add_argument("--mv-candidates", type=int, default=256)
    p.add_argument("--no-mv-exact", action="store_true", help="skip the exact MaxSim reference (no recall)")
    p.add_argument("--source", nargs="+", help="corpora whose sentences make the documents (default: HotpotQA and "
                                              "MuSiQue paragraphs of the shared data)")
    p.add_argument("--query-source", nargs="+", help="query files (default: HotpotQA and MuSiQue questions)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--fresh", action="store_true", help="redo every stage")
    p.add_argument("--doc", default=str(ROOT / "docs" / "scaling.md"), help="Markdown file to put the section in")
    p.add_argument("--png", help="the plot (default: scaling_curves.png beside --doc)")
    p.add_argument("--no-doc", action="store_true", help="write neither --doc nor --png")
    p.add_argument("--note", default="", help="a line for the section, above its tables (e.g. how busy the machine "
                                              "was)")
    add_run_options(p, "/tmp/hopscotch-bench-scale", threads=2, repeats=3)
    args = p.parse_args()
    data = shared_data_dir(ROOT)
    cfg = ScaleConfig(work=args.work, sizes=args.sizes, model=args.model, max_length=args.max_length,
                      batch_size=args.batch_size, shard_size=args.shard_size, queries=args.queries, k=args.k,
                      ivf_spec=args.ivf_spec, nprobe=args.nprobe, refine=args.refine,
                      multivector_max=args.multivector_max, kinds=args.kinds, bm25s_max=args.bm25s_max,
                      dense_max=args.dense_max, mv_dim=args.mv_dim, mv_nbits=args.mv_nbits,
                      mv_nprobe=args.mv_nprobe, mv_candidates=args.mv_candidates, mv_exact=not args.no_mv_exact,
                      threads=args.threads, repeats=args.repeats, seed=args.seed,
                      sources=[str(Path(s).resolve()) for s in args.source or [data / s for s in DEFAULT_SOURCES]],
                      query_sources=[str(Path(s).resolve())
                                     for s in args.query_source or [data / s for s in DEFAULT_QUERY_SOURCES]])
    result = run_scale(cfg, fresh=args.fresh, log=lambda line: print(line, file=sys.stderr, flush=True))
    print(measured_table(result), *dense_findings(result), "", bm25_table(result), *bm25_findings(result), "",
          plan_table(result), sep="\n")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    if not args.no_doc:
        argv = sys.argv[1:]
        if "--note" in argv:  # the note is the section's, not the command's
            del argv[argv.index("--note"):argv.index("--note") + 2]
        command = "python scripts/bench_scale.py " + shlex.join(argv)
        png = args.png or str(Path(args.doc).with_name("scaling_curves.png"))
        print(write_scale_report(result, args.doc, png, command, args.note))


if __name__ == "__main__":
    main()
