"""The evaluation manifest: what a score was computed on, recorded in every evaluation JSON.

``eval``, ``eval-agent`` and ``replay`` write ``{"manifest": {...}, ...}``. Two results are comparable
only when their manifests agree on every field of :data:`COMPARED_FIELDS`; :func:`check_comparable`
raises a :class:`~hopscotch.retriever.errors.UsageError` naming the first field that differs::

    a, b = load_result("bm25.json"), load_result("dense.json")
    check_comparable(a["manifest"], b["manifest"], "bm25.json", "dense.json")

Fields:

* ``command``: ``eval``, ``eval-agent`` or ``replay`` (not compared: an ``eval`` and a ``replay`` of
  the same calls may be compared);
* ``corpus``: what the documents were (an index's corpus path, a corpus file, or null when unknown);
* ``qrels``: ``{path, sha256}``; ``sha256`` is of the qrels *content* after duplicate expansion and
  docid normalisation (:func:`qrels_fingerprint`), so two spellings of one file compare equal;
* ``k``: the ranking depth evaluated (``eval``: the deepest cutoff of ``--metrics``);
* ``snippet_chars``: characters of each document shown to an agent (null when not applicable);
* ``query_input``: the query input variant (``query``, ``reasoning``, ...; null when not known);
* ``judge``: where answer judgements came from (``run``, a judge file's path, or null);
* ``protocol``: the metric definitions (``trec_eval``, ``bcp``, ``cmass``, ``hopscotch``);
* ``queries_expected`` / ``queries_evaluated``: queries in the qrels (or runs) vs those scored.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from hopscotch.retriever.errors import FormatError, UsageError
from hopscotch.retriever.io.common import read_json

COMPARED_FIELDS = ("corpus", "qrels", "k", "snippet_chars", "query_input", "judge", "protocol",
                   "queries_expected", "queries_evaluated")


def qrels_fingerprint(qrels: dict[str, dict[str, int]]) -> str:
    """sha256 of the qrels content, independent of file order and format."""
    h = hashlib.sha256()
    for qid in sorted(qrels):
        for docid in sorted(qrels[qid]):
            h.update(f"{qid}\t{docid}\t{qrels[qid][docid]}\n".encode())
    return h.hexdigest()


def make_manifest(command: str, *, corpus: str | os.PathLike | None = None,
                  qrels_path: str | os.PathLike | None = None, qrels: dict | None = None, k: int | None = None,
                  snippet_chars: int | None = None, query_input: str | None = None, judge: str | None = None,
                  protocol: str | None = None, queries_expected: int | None = None,
                  queries_evaluated: int | None = None, **extra) -> dict:
    """A manifest dict; ``extra`` keys are recorded but not compared."""
    manifest = {
        "command": command,
        "corpus": None if corpus is None else str(corpus),
        "qrels": None if qrels is None else {"path": None if qrels_path is None else str(qrels_path),
                                             "sha256": qrels_fingerprint(qrels)},
        "k": k, "snippet_chars": snippet_chars, "query_input": query_input, "judge": judge,
        "protocol": protocol, "queries_expected": queries_expected, "queries_evaluated": queries_evaluated,
    }
    manifest.update(extra)
    return manifest


def _compared_value(manifest: dict, field: str):
    value = manifest.get(field)
    if field == "qrels" and isinstance(value, dict):
        return value.get("sha256")
    return value


def check_comparable(a: dict, b: dict, name_a: str = "first result", name_b: str = "second result") -> None:
    """Raise :class:`UsageError` naming the first field of :data:`COMPARED_FIELDS` where ``a`` and ``b`` differ."""
    for field in COMPARED_FIELDS:
        va, vb = _compared_value(a, field), _compared_value(b, field)
        if va != vb:
            raise UsageError(f"cannot compare {name_a} with {name_b}: their manifests differ in '{field}' "
                             f"({va!r} vs {vb!r})")


def load_result(path: str | os.PathLike) -> dict:
    """An evaluation JSON written by ``eval``, ``eval-agent`` or ``replay``; it must carry a manifest."""
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"{p}: no such result file")
    obj = read_json(p, "an evaluation result (JSON)")  # bad bytes / JSON -> FILE:LINE
    if not isinstance(obj, dict) or not isinstance(obj.get("manifest"), dict):
        raise FormatError(p, 1, "an evaluation result with a 'manifest' object (written by eval, eval-agent "
                                "or replay)")
    return obj


_QID_KEYS = ("query_id", "qid", "id")


def per_query_table(result: dict, path: str | os.PathLike = "<result>") -> dict[str, dict[str, float]]:
    """A result's per-query values as ``{qid: {metric: value}}`` (numeric values only).

    ``per_query`` is either that mapping (``eval --json``) or a list of rows carrying their query id
    (``query_id`` | ``qid`` | ``id``), as cmass-style ``per_query_metrics``.
    """
    rows = result.get("per_query", result.get("per_query_metrics"))
    if isinstance(rows, list):
        table = {}
        for i, row in enumerate(rows):
            qid = next((row[k] for k in _QID_KEYS if isinstance(row, dict) and row.get(k) is not None), None)
            if qid is None:
                raise FormatError(path, None, "per-query rows with a 'query_id'", f"row {i}: {repr(row)[:60]}")
            table[str(qid)] = {k: v for k, v in row.items() if k not in _QID_KEYS}
        rows = table
    if not isinstance(rows, dict) or not rows or not all(isinstance(v, dict) for v in rows.values()):
        raise FormatError(path, None, "a non-empty 'per_query' object {qid: {metric: value}} "
                                      "(write it with eval --json)")
    return {str(q): {m: float(v) for m, v in vals.items()
                     if isinstance(v, (int, float)) and not isinstance(v, bool)}
            for q, vals in rows.items()}


def shared_metrics(a: dict[str, dict[str, float]], b: dict[str, dict[str, float]]) -> list[str]:
    """Metrics every query of both per-query tables carries, in the first table's order."""
    names: list[str] | None = None
    for table in (a, b):
        for vals in table.values():
            names = list(vals) if names is None else [m for m in names if m in vals]
    return names or []
