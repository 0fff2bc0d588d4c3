"""``hopscotch audit near-duplicates``: MinHash-LSH duplicate groups of a corpus (cmass's format).

Example (command line, not run)::

    hopscotch audit near-duplicates --corpus corpus.jsonl --out groups.jsonl [--state groups.state] \\
        [--threshold 0.8] [--chunk-size 50000] [--report near_duplicates.json]

The groups file feeds ``hopscotch eval --duplicates`` and ``hopscotch synth --duplicate-groups``; a killed run,
rerun with the same flags, resumes from ``--state`` (:mod:`hopscotch.retriever.audit.near_duplicates`).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from hopscotch.retriever.audit.near_duplicates import NearDuplicateConfig, find_near_duplicates
from hopscotch.retriever.commands.arg_groups import add_output_flags
from hopscotch.retriever.commands.audit.common import finish
from hopscotch.retriever.commands.flag_types import int_range, unit_interval
from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.io.outputs import output_folder

HELP = "exact and near-duplicate groups of a corpus (cmass format)"
DESCRIPTION = ("Group a corpus's exact duplicates (same normalised text) and near duplicates (word 3-gram Jaccard >= "
               "--threshold, found by MinHash-LSH, checked exactly) into cmass's duplicate-group JSONL. Streams the "
               "corpus; checkpoints to --state so a killed run resumes.")


def add_flags(p) -> None:
    p.add_argument("--corpus", required=True, help="corpus file, BEIR folder or shard folder")
    # what=None: the output flag alone; --report's group adds --overwrite, and the audit's output guard
    # (audit.common.guarded) checks --out, --state and --report
    add_output_flags(p, "groups JSONL to write ({doc_id, exact_duplicates, near_duplicates})", required=True,
                     what=None)
    p.add_argument("--state", help="checkpoint folder (default: OUT.state)")
    p.add_argument("--threshold", type=unit_interval, default=0.8,
                   help="exact word 3-gram Jaccard at or above which two documents are near duplicates (default 0.8)")
    p.add_argument("--chunk-size", type=int_range(2, 10_000_000), default=50_000,
                   help="documents per checkpointed chunk (default 50000)")
    p.add_argument("--max-bucket", type=int_range(2, 1_000_000), default=1000,
                   help="an LSH bucket pairs each document with at most this many others (default 1000)")
    p.add_argument("--verify-batch", type=int_range(2, 1_000_000_000), default=200_000,
                   help="documents whose shingles are held at once when checking candidates (default 200000)")
    p.add_argument("--fresh", action="store_true",
                   help="empty the state folder first (only a state folder of this audit: anything else is refused)")


#: --fresh changes how the state folder is used, not what the outputs hold
FINGERPRINT_IGNORE = ("fresh",)


def outputs(args) -> list:
    """``--out`` and the ``--state`` folder (resumable: its own manifest decides a resume), for the output guard."""
    return [args.out, output_folder(args.state or f"{args.out}.state", resumable=True)]


def run(args) -> int:
    if args.threshold <= 0:
        raise UsageError("--threshold must be above 0")
    state = args.state or f"{args.out}.state"
    config = NearDuplicateConfig(args.threshold, args.chunk_size, args.max_bucket, args.verify_batch)
    fresh_state = not Path(state).exists()
    try:
        report = find_near_duplicates(args.corpus, args.out, state, config, fresh=args.fresh)
    except Exception:
        if fresh_state:  # bad input found by this run: leave nothing behind (a killed run keeps its state)
            shutil.rmtree(state, ignore_errors=True)
        raise
    return finish(report, args)
