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
* ``queries_expected`` / ``queries_evaluated``: queries in the qrels (or runs) vs those scored;
* ``queries``: ``{count, sha256}`` of the query ids the run answered among those scored (:func:`query_set`):
  two results of different query sets are not compared;
* ``depth`` (not compared as such): the most hits the run holds for one query (:func:`run_depth`); when two
  depths differ, a metric whose cutoff exceeds the shallower one is not compared (:func:`comparable_metrics`);
* ``queries_answered`` (``eval``): judged queries the run answered; ``compare`` refuses a result whose
  share of the judged queries is below ``--min-coverage``
  (:func:`~hopscotch.retriever.evaluation.metrics.check_coverage`, the one coverage rule).

Every number a result holds is checked as it is read back (:func:`per_query_table`, :func:`manifest_count`):
a per-query value is a finite JSON number, within [0, 1] for the trec_eval metrics (``ndcg@k``,
``recall@k``, ``mrr@k``, ``map@k``, ``p@k``); anything else is a FormatError naming the file and key.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from hopscotch.retriever.errors import FormatError, UsageError
from hopscotch.retriever.evaluation.metrics import parse_metric
from hopscotch.retriever.io.common import read_json
from hopscotch.retriever.io.validate import count, finite_number

COMPARED_FIELDS = ("corpus", "qrels", "k", "snippet_chars", "query_input", "judge", "protocol",
                   "queries_expected", "queries_evaluated", "queries")


def qrels_fingerprint(qrels: dict[str, dict[str, int]]) -> str:
    """sha256 of the qrels content, independent of file order and format."""
    h = hashlib.sha256()
    for qid in sorted(qrels):
        for docid in sorted(qrels[qid]):
            h.update(f"{qid}\t{docid}\t{qrels[qid][docid]}\n".encode())
    return h.hexdigest()


def query_set(qids) -> dict:
    """``{count, sha256}`` of a set of query ids (order and repeats ignored): what the manifest's ``queries`` holds."""
    ids = sorted(set(map(str, qids)))
    return {"count": len(ids), "sha256": hashlib.sha256("\n".join(ids).encode()).hexdigest()}


def run_depth(run: dict[str, dict]) -> int:
    """The most hits a run holds for one query (0 for an empty run): the manifest's ``depth``."""
    return max((len(docs) for docs in run.values()), default=0)


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


def _shown_value(value) -> str:
    if isinstance(value, dict) and set(value) == {"count", "sha256"}:  # a query set
        return f"{value['count']} queries, sha256 {str(value['sha256'])[:12]}..."
    return repr(value)


def check_comparable(a: dict, b: dict, name_a: str = "first result", name_b: str = "second result") -> None:
    """Raise :class:`UsageError` naming the first field of :data:`COMPARED_FIELDS` where ``a`` and ``b`` differ."""
    for field in COMPARED_FIELDS:
        va, vb = _compared_value(a, field), _compared_value(b, field)
        if va != vb:
            what = " (they were scored on different query sets)" if field == "queries" else ""
            if field == "queries" and None in (va, vb):
                what = " (one result records no query set: write both with this version's eval --json)"
            raise UsageError(f"cannot compare {name_a} with {name_b}: their manifests differ in '{field}'{what} "
                             f"({_shown_value(va)} vs {_shown_value(vb)})")


def manifest_count(manifest: dict, key: str, path: str | os.PathLike) -> int | None:
    """A count a manifest records (``depth``, ``queries_answered``, ...), checked as read back; None when absent."""
    value = manifest.get(key)
    return None if value is None else count(value, path, None, f"manifest '{key}'")


def metric_cutoff(name: str) -> int | None:
    """The cutoff of a trec_eval metric name (``recall@100`` -> 100); None for other names (``evidence_recall``)."""
    try:
        return parse_metric(name)[1]
    except UsageError:
        return None


def comparable_metrics(a: dict, b: dict, metrics: list[str], names: tuple[str, str], paths: tuple, *,
                       chosen: bool) -> tuple[list[str], str | None]:
    """``metrics`` less those two runs of different depths cannot compare like for like (a metric whose cutoff
    exceeds the shallower run's depth: ``recall@100`` of a depth-10 and a depth-100 run), and a note naming
    those left out (None when none is). ``chosen`` (the user named the metrics): such a metric is a
    :class:`UsageError` instead."""
    da, db = manifest_count(a, "depth", paths[0]), manifest_count(b, "depth", paths[1])
    if da is None or db is None or da == db:
        return metrics, None
    shallow = min(da, db)
    deep = [m for m in metrics if (metric_cutoff(m) or 0) > shallow]
    if deep and chosen:
        raise UsageError(f"cannot compare {deep[0]} of {names[0]} (run depth {da}) with {names[1]} (run depth {db}): "
                         f"the cutoff exceeds the shallower run's {shallow} hits per query; compare a cutoff <= "
                         f"{shallow} or runs of one depth")
    note = f"{', '.join(deep)} left out: the runs' depths differ ({da} vs {db}) and the cutoff exceeds {shallow}"
    return [m for m in metrics if m not in deep], note if deep else None


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
    return {str(q): {m: v for m, v in ((m, _metric_value(v, path, q, m)) for m, v in vals.items()) if v is not None}
            for q, vals in rows.items()}


def _metric_value(value, path, qid, metric: str) -> float | None:
    """One per-query value as read back: a finite JSON number, in [0, 1] for a trec_eval metric; None for a
    field that is no number under a name that is no trec_eval metric (a note, a flag, a list)."""
    bounded = metric_cutoff(metric) is not None
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not bounded and not is_number:
        return None
    what = f"per-query '{metric}' of query {str(qid)[:40]!r} as a finite number"
    if not is_number:
        raise FormatError(path, None, what + " in [0, 1]", f"{type(value).__name__} {repr(value)[:40]}")
    return finite_number(value, path, None, what, minimum=0 if bounded else None, maximum=1 if bounded else None)


def shared_metrics(a: dict[str, dict[str, float]], b: dict[str, dict[str, float]]) -> list[str]:
    """Metrics every query of both per-query tables carries, in the first table's order."""
    names: list[str] | None = None
    for table in (a, b):
        for vals in table.values():
            names = list(vals) if names is None else [m for m in names if m in vals]
    return names or []
