"""``hopscotch synth --mode teacher``: tuple files scored again by a teacher (:mod:`hopscotch.data_synth.teacher_scores`).

Example (not run)::

    hopscotch synth --mode teacher --tuples runs/agent/data/clean/hotpot_tuples.jsonl --teacher hybrid \\
        --corpus ../shared/data/hotpotqa_ircot/corpus.jsonl --teacher-model runs/agent/final \\
        --out runs/agent/teacher/hotpot_tuples.jsonl
"""

from __future__ import annotations

import time

from hopscotch.data_synth.pipeline import default_stats_path
from hopscotch.data_synth.teacher_scores import TeacherSpec, annotate
from hopscotch.retriever.commands.arg_groups import arg_paths
from hopscotch.retriever.io.outputs import check_outputs


def run_teacher(args) -> int:
    t0 = time.perf_counter()
    spec = TeacherSpec(args.teacher, bm25_index=args.bm25_index, corpus=args.corpus, model=args.teacher_model,
                       reranker=args.teacher_reranker)
    stats_path = args.stats or default_stats_path(args.out)
    guard = check_outputs(vars(args), outputs=[args.out, stats_path],
                          inputs=[arg_paths(args, "tuples", "bm25_index", "corpus", "teacher_model", "teacher_reranker")],
                          ignore=("workers", "preview", "fresh"))
    stats = annotate(args.tuples, args.out, spec, stats_path)
    guard.finish()
    missing = f" ({stats['missing_from_bm25']} passages not in the BM25 index: scored 0 there)" \
        if stats["missing_from_bm25"] else ""
    print(f"synth: {stats['tuples']} tuples, {stats['passages']} passages scored by the {args.teacher} teacher"
          f"{missing}; tuples -> {args.out}; stats -> {stats_path} ({time.perf_counter() - t0:.1f}s)")
    return 0
