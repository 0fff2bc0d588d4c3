"""Agent run records (BrowseComp-Plus layout) and the one vocabulary of their tool names.

A run record is one question's trajectory: ``{query_id, status, tool_call_counts, retrieved_docids,
result: [{type, tool_name, arguments, output}, ...]}``, one JSON object per ``*.json`` file or one per
line of a ``*.jsonl`` file. Nested fields may be JSON objects, JSON strings or Python-repr strings
(some published runs store them so); :func:`~hopscotch.retriever.io.common.parse_nested` reads all three.

Every part of Hopscotch that asks "is this a search call?" (DR-Synth's trace reader, ``eval-agent``)
asks :func:`is_search_tool`, so a ``google_search`` call counts the same everywhere.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hopscotch.retriever.errors import FormatError, UsageError
from hopscotch.retriever.io.common import parse_nested, read_jsonl

#: Search tools by name (after :func:`tool_name`); any name ending in ``_search`` is one too.
SEARCH_TOOL_NAMES = frozenset({"search", "web_search", "google_search", "google_scholar", "bing_search", "retrieve",
                               "retrieval", "local_knowledge_base_retrieval", "wiki_search"})
#: Tools that open one document by docid.
GET_DOCUMENT_TOOL_NAMES = frozenset({"get_document", "get_doc", "open_document", "fetch_document",
                                     "read_document"})


def tool_name(name: Any) -> str:
    """A tool name lower-cased without its namespace: ``"functions.Search"`` -> ``"search"``."""
    if not isinstance(name, str):
        return ""
    return name.strip().lower().rsplit(".", 1)[-1]


def is_search_tool(name: Any) -> bool:
    name = tool_name(name)
    return name in SEARCH_TOOL_NAMES or name.endswith("_search")


def is_get_document_tool(name: Any) -> bool:
    return tool_name(name) in GET_DOCUMENT_TOOL_NAMES


def iter_run_records(path: str | os.PathLike) -> Iterator[tuple[str, dict]]:
    """Yield ``(where, record)`` for every run record in a folder (recursively) or file."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"{path}: no such run file or folder")
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.suffix in (".json", ".jsonl"))
    if not files:
        raise UsageError(f"{path}: no *.json or *.jsonl run files")
    for f in files:
        if f.suffix == ".jsonl":
            for lineno, obj in read_jsonl(f, "a run record object"):
                yield f"{f}:{lineno}", obj
        else:
            yield str(f), read_run_file(f)


def read_run_file(path: Path) -> dict:
    """The one run record of a ``*.json`` file."""
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise FormatError(path, exc.lineno, "one JSON run record", f"invalid JSON: {exc.msg}") from None
    if not isinstance(obj, dict):
        raise FormatError(path, 1, "one JSON run record (an object)", type(obj).__name__)
    return obj


def tool_calls(record: dict) -> list[dict]:
    """The ``tool_call`` items of a record's ``result``, parsed."""
    steps = parse_nested(record.get("result")) or []
    out = []
    for step in steps if isinstance(steps, list) else []:
        step = parse_nested(step)
        if isinstance(step, dict) and step.get("type") == "tool_call":
            out.append(step)
    return out
