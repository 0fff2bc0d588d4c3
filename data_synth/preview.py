"""Readable views of tuples and stats for the terminal (``hopscotch synth --preview N``)."""

from __future__ import annotations

import json
import os
import textwrap
from itertools import islice

from hopscotch.retriever.io.common import read_jsonl


def _short(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def format_tuple(row: dict, width: int = 100) -> str:
    """A tuple as a few indented lines: id, reasoning, query, then + positives and - negatives."""
    lines = [row["query_id"]]
    reasoning = row.get("reasoning") or "(empty)"
    lines += textwrap.wrap(_short(reasoning, 3 * width), width, initial_indent="  reasoning: ",
                           subsequent_indent=" " * 13)
    lines.append(f"  query:     {_short(row['query'], width)}")
    for sign, key in (("+", "positive_passages"), ("-", "negative_passages")):
        for p in row.get(key, []):
            head = f"{p['docid']}  {p['title']}: " if p.get("title") else f"{p['docid']}  "
            lines.append(f"  {sign} {_short(head + p['text'], width)}")
    return "\n".join(lines)


def preview(path: str | os.PathLike, n: int, width: int = 100) -> str:
    """The first ``n`` tuples of a tuples file, formatted."""
    return "\n\n".join(format_tuple(row, width) for _, row in islice(read_jsonl(path), n))


def summary_line(stats: dict) -> str:
    """One line: kept / read, dropped by reason, positive sources."""
    dropped = ", ".join(f"{k} {v:,}" for k, v in stats["dropped"].items()) or "none"
    pos = stats["positives"]
    line = (f"{stats['steps_kept']:,} of {stats['steps_read']:,} steps kept ({100 * stats['kept_fraction']:.1f}%) "
            f"from {stats['questions']:,} questions; dropped: {dropped}; positives: {pos['gold']:,} gold, "
            f"{pos['reranked']:,} reranked")
    if stats.get("kept_fraction_with_gold") is not None:
        line += f"; kept {100 * stats['kept_fraction_with_gold']:.1f}% of steps whose question has gold"
    if stats.get("candidates"):
        line += f"; candidates: {stats['candidates']['first_stage']}"
    return line


def dumps(stats: dict) -> str:
    return json.dumps(stats, indent=2)
