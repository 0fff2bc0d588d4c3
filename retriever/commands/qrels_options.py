"""The ``--qrels`` / ``--duplicates`` options that every evaluating command takes, and loading them.

``--duplicates`` expands the qrels over a corpus's duplicate groups (cmass ``corpus_duplicates`` rows,
JSONL or parquet, or exact groups ``{doc_ids}``): a relevant document makes its whole exact-duplicate
class relevant at its grade (the closure: A = B and B = C reach C from A). With
``--near-duplicates-min-jaccard X`` its direct near duplicates at Jaccard >= X count too (near
duplication is not transitive, so they are not chained). See
:class:`hopscotch.retriever.io.qrels.DuplicateGroups`.
"""

from __future__ import annotations

from hopscotch.retriever.commands.flag_types import unit_interval
from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.io.qrels import expand_qrels_with_duplicates, read_qrels


def add_qrels_options(parser, qrels_help: str = "qrels file or BEIR folder") -> None:
    parser.add_argument("--qrels", required=True, help=qrels_help)
    parser.add_argument("--duplicates",
                        help="duplicate groups (JSONL, parquet or a folder of them: cmass corpus_duplicates "
                             "rows) that expand the qrels: a relevant document's exact duplicates, closed "
                             "transitively, become relevant at its grade")
    parser.add_argument("--near-duplicates-min-jaccard", type=unit_interval, default=None, metavar="X",
                        help="with --duplicates: also a relevant document's direct near duplicates with "
                             "Jaccard >= X (cmass lists pairs at 0.7 and above; not chained)")


def load_qrels(args) -> dict[str, dict[str, int]]:
    """``args.qrels``, expanded with ``args.duplicates`` when given (docids canonical)."""
    min_jaccard = getattr(args, "near_duplicates_min_jaccard", None)
    duplicates = getattr(args, "duplicates", None)
    if min_jaccard is not None and not duplicates:
        raise UsageError("--near-duplicates-min-jaccard needs --duplicates")
    qrels = read_qrels(args.qrels)
    if duplicates:
        qrels = expand_qrels_with_duplicates(qrels, duplicates, min_jaccard)
    return qrels


def qrels_manifest_extra(args) -> dict:
    """What the qrels options add to an evaluation manifest beyond the qrels hash (recorded, not compared)."""
    return {"duplicates": getattr(args, "duplicates", None),
            "near_duplicates_min_jaccard": getattr(args, "near_duplicates_min_jaccard", None)}
