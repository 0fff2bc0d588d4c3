"""The ``--qrels`` / ``--duplicates`` options that every evaluating command takes, and loading them."""

from __future__ import annotations


def add_qrels_options(parser, qrels_help: str = "qrels file or BEIR folder") -> None:
    parser.add_argument("--qrels", required=True, help=qrels_help)
    parser.add_argument("--duplicates", help="JSONL duplicate groups that expand the qrels (exact duplicates)")


def load_qrels(args) -> dict[str, dict[str, int]]:
    """``args.qrels``, expanded with ``args.duplicates`` when given."""
    from hopscotch.retriever.io.qrels import expand_qrels_with_duplicates, read_qrels

    qrels = read_qrels(args.qrels)
    if args.duplicates:
        qrels = expand_qrels_with_duplicates(qrels, args.duplicates)
    return qrels
