"""``hopscotch audit contamination``: training data against evaluation sets; and the check ``train --eval-sets`` runs.

Example (command line, not run)::

    hopscotch audit contamination --tuples out/data/ --eval dev=../shared/data/hotpotqa_ircot \\
        --eval world=sets/world::world/corpus.jsonl [--max-contaminated 0] [--report contamination.json]

An evaluation set is ``NAME=PATH[:QRELS[:CORPUS]]`` (a BEIR folder, or a queries file; see
:mod:`hopscotch.retriever.audit.eval_sets`); the rule is :mod:`hopscotch.retriever.audit.contamination`'s.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

from hopscotch.retriever.audit.contamination import audit_contamination
from hopscotch.retriever.audit.decontaminate import REPORT_NAME, decontaminate, tuple_files
from hopscotch.retriever.audit.eval_sets import corpus_items, load_eval_sets, parse_eval_spec, query_items, tuple_items
from hopscotch.retriever.commands.arg_groups import add_output_flags
from hopscotch.retriever.commands.audit.common import finish
from hopscotch.retriever.commands.flag_types import non_negative_int, positive_int, unit_interval
from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.io.outputs import check_outputs, output_folder

EVAL_METAVAR = "NAME=PATH[:QRELS[:CORPUS]]"


HELP = "training data against evaluation questions, answers and qrel documents"
DESCRIPTION = ("Look for evaluation questions in training data: exact and near-duplicate queries (word 3-gram Jaccard, "
               "MinHash-LSH), questions quoted inside training texts, training positives that are evaluation qrel "
               "documents, and answer strings; per evaluation set counts with examples. Exit 2 when a set has more "
               "than --max-contaminated contaminated questions.")

#: the rule's and the report's flags: ``(flag, add_argument's settings)``, in ``--help``'s order
RULE_FLAGS = (
    ("--threshold", {"type": unit_interval, "default": 0.8,
                     "help": "word 3-gram Jaccard at or above which two texts are near duplicates (default 0.8)"}),
    ("--max-contaminated", {"type": non_negative_int, "default": 0,
                            "help": "contaminated questions a set may have before the audit fails (default 0)"}),
    ("--count-answers", {"action": "store_true",
                         "help": "count answer-string overlap as contamination too (default: reported only)"}),
    ("--examples", {"type": positive_int, "default": 5, "help": "examples per set and kind in the report"}),
)


def add_flags(p) -> None:
    p.add_argument("--eval", action="append", required=True, metavar=EVAL_METAVAR, dest="eval_sets",
                   help="an evaluation set: a BEIR folder (queries.jsonl, qrels, corpus.jsonl) or a queries file, "
                        "with optional qrels and corpus (either may be left empty: NAME=FOLDER::CORPUS); repeatable")
    src = p.add_argument_group("training data (at least one; each repeatable)")
    src.add_argument("--tuples", action="append", default=[], metavar="PATH",
                     help="training tuples (DR-Synth / Tevatron JSONL file or folder)")
    src.add_argument("--tuples-corpus", metavar="PATH",
                     help="corpus where Tevatron's newer-format tuples (document ids only) find their texts")
    src.add_argument("--queries", action="append", default=[], metavar="PATH", help="a queries file of training data")
    src.add_argument("--corpus", action="append", default=[], metavar="PATH",
                     help="a training corpus (each document compared as a passage)")
    for flag, spec in RULE_FLAGS:
        p.add_argument(flag, **spec)
    add_output_flags(p, "write each --tuples file to DIR (same name) without its contaminated tuples, list what "
                        "was removed in DIR/decontamination.json, then audit the cleaned files (the verdict)",
                     flag="--clean", what="cleaned tuple files")


def run(args) -> int:
    if not (args.tuples or args.queries or args.corpus):
        raise UsageError("give training data: --tuples, --queries or --corpus")
    if args.threshold <= 0:
        raise UsageError("--threshold must be above 0")
    sets = load_eval_sets(args.eval_sets)
    tuples = args.tuples
    if args.clean:
        if not args.tuples or args.queries or args.corpus:
            raise UsageError("--clean rewrites tuple files: give --tuples only (no --queries / --corpus)")

        files = tuple_files(args.tuples)
        guard = check_outputs(vars(args), outputs=[output_folder(args.clean, [f.name for f in files] + [REPORT_NAME])],
                              inputs=files + [x for s in sets for x in parse_eval_spec(s.spec)[1:] if x])
        done = decontaminate(sets, files, args.clean, threshold=args.threshold,
                             count_answers=args.count_answers, corpus=args.tuples_corpus)
        guard.finish()
        for name, v in done["files"].items():
            print(f"audit contamination --clean: {name}: kept {v['kept']:,}, removed {v['removed']:,} "
                  f"{v['removed_by_kind']}", file=sys.stderr)
        print(f"audit contamination --clean: wrote {Path(args.clean)}/ ({REPORT_NAME} lists the removed tuples); "
              "auditing the cleaned files", file=sys.stderr)
        tuples = [str(Path(args.clean) / f.name) for f in files if done["files"][f.name]["kept"]]
    items = itertools.chain(*(tuple_items(t, args.tuples_corpus) for t in tuples),
                            *(query_items(q) for q in args.queries), *(corpus_items(c) for c in args.corpus))
    report = audit_contamination(sets, items, threshold=args.threshold, max_contaminated=args.max_contaminated,
                                 count_answers=args.count_answers, examples=args.examples)
    return finish(report, args)


# ------------------------------------------------------------------------------- the check of ``hopscotch train``

def add_train_flags(parser) -> None:
    """``train --eval-sets ... [--allow-contamination] [--max-contaminated N]``."""
    g = parser.add_argument_group("contamination check (before any model loads)")
    g.add_argument("--eval-sets", action="append", metavar=EVAL_METAVAR,
                   help="evaluation sets the recipe's training data must not hold (as 'audit contamination "
                        "--eval'); repeatable")
    g.add_argument("--allow-contamination", action="store_true",
                   help="train even when the training data holds evaluation questions (a warning instead)")
    g.add_argument("--max-contaminated", type=non_negative_int, default=0,
                   help="contaminated questions a set may have (default 0)")


def guard_training(args) -> None:
    """With ``--eval-sets``: audit the recipe's ``data.train`` against them; a failure is a one-line
    :class:`UsageError` (exit 2) naming the count and the first example, unless ``--allow-contamination``."""
    if not getattr(args, "eval_sets", None):
        return
    from hopscotch.retriever.training.recipe import load_recipe

    data = load_recipe(args.recipe, list(args.overrides)).data
    report = audit_contamination(load_eval_sets(args.eval_sets), tuple_items(data.train, data.corpus, data.max_tuples),
                                 max_contaminated=args.max_contaminated, training_label="recipe data.train")
    per_set = report.details["per_set"]
    counts = ", ".join(f"{name} {v['contaminated']}/{v['questions']}" for name, v in per_set.items())
    if report.verdict != "fail":
        print(f"train: contamination check ok ({counts} evaluation questions in the training data)", file=sys.stderr)
        return
    total = sum(v["contaminated"] for v in per_set.values())
    ex = report.details["first_example"]
    msg = (f"the training data holds {total} evaluation question(s) ({counts}); first: {ex['set']} {ex['qid']} "
           f"{ex['eval_text']!r} ({ex['kind']}) in {ex['source']} {ex['train_id']}")
    if not args.allow_contamination:
        raise UsageError(f"{msg}; see 'hopscotch audit contamination', or pass --allow-contamination")
    print(f"train: warning: {msg}; training anyway (--allow-contamination)", file=sys.stderr)
