"""``hopscotch audit false-negatives``: mined hard negatives that are really positives.

    hopscotch audit false-negatives --tuples FILE [FILE ...] [--qa DIR ...] [--sample N] [--model M|none]
                                    [--seed S] [--near-duplicate J] [--max-rate R] [--examples N] [--report PATH]

Rules and rates: :mod:`hopscotch.data_synth.false_negative_audit`. Exit 2 when a source's false-negative rate
(answer-bearing or near-duplicate negatives) exceeds ``--max-rate``.
"""

from __future__ import annotations

from hopscotch.data_synth.false_negative_audit import audit_false_negatives
from hopscotch.retriever.commands.audit.common import finish
from hopscotch.retriever.commands.flag_types import positive_int, seed_int, unit_interval

HELP = ("hard negatives that are really positives (answer-bearing, near-duplicates of a positive, closer to it than "
        "the query)")
DESCRIPTION = ("Judge a seeded sample of the mined hard negatives of each tuple file (source) and oracle by rules "
               "independent of the oracle; report the rates and the worst examples.")


def add_flags(p) -> None:
    p.add_argument("--tuples", nargs="+", required=True, metavar="FILE",
                   help="training tuple JSONL files or folders (each file is a source unless its rows say 'source')")
    p.add_argument("--qa", nargs="+", default=[], metavar="DIR",
                   help="QA datasets whose answers ('answers', 'answer', 'answer_aliases') the tuples' questions have")
    p.add_argument("--sample", type=positive_int, default=300, help="negatives sampled per source and oracle")
    p.add_argument("--model", default="minilm",
                   help="second encoder of the 'closer to the positive' rule (default: the bundled MiniLM; "
                        "'none' skips the rule)")
    p.add_argument("--seed", type=seed_int, default=13, help="sampling seed")
    p.add_argument("--near-duplicate", type=unit_interval, default=0.8, metavar="J",
                   help="word 3-gram Jaccard with a positive at or above which a negative is its near-duplicate")
    p.add_argument("--max-rate", type=unit_interval, default=0.1, metavar="R",
                   help="the largest false-negative rate of a source that passes (above: exit 2)")
    p.add_argument("--examples", type=positive_int, default=5, help="worst examples kept per source")


def run(args) -> int:
    model = None if str(args.model).lower() == "none" else args.model
    report = audit_false_negatives(args.tuples, qa_dirs=args.qa, sample=args.sample, seed=args.seed, model=model,
                                   near_duplicate=args.near_duplicate, max_rate=args.max_rate,
                                   examples=args.examples)
    return finish(report, args)
