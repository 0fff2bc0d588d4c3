"""Agent run records (BrowseComp-Plus and cmass layouts), their judgements, and the one vocabulary of tool names.

A run record is one question's trajectory: ``{query_id, status, tool_call_counts, retrieved_docids,
result: [{type, tool_name, arguments, output[, details]}, ...]}``, one JSON object per ``*.json`` file or
one per line of a ``*.jsonl`` file. Nested fields may be JSON objects, JSON strings or Python-repr strings
(some published runs store them so); :func:`~hopscotch.retriever.io.common.parse_nested` reads all three.

Layouts (:func:`run_files`):

* ``bcp``: BrowseComp-Plus's ``search_agent/*_client.py`` write ``run_<timestamp>.json`` into one folder;
  its ``scripts_evaluation/evaluate_run.py`` reads exactly the folder's ``run_*.json`` files.
* ``cmass``: castorini/cmass's ``REPRODUCING.md``: ``artifacts/<run-id>/runs/<query_id>.json`` beside
  ``run_config.json`` and ``evals/``; a record adds ``surfaced_docids``, ``previewed_docids``,
  ``opened_docids``, ``cited_docids``, ``agent_docids`` and per-call ``details`` (``retrievedDocids``,
  ``previewedDocids``, ``docid``); search outputs list hits as ``docid=X``.
* ``any``: every ``*.json`` / ``*.jsonl`` below a folder except evaluation artefacts (``evals/``,
  ``*_eval.json``, ``evaluation_summary.json``, ``run_config.json``).

Judgements (:func:`read_judgements`) come from the harnesses' judges: a folder of per-run
``*_eval.json`` files (BrowseComp-Plus ``evals/.../run_<ts>_eval.json``, cmass
``evals/per-query/<query_id>_eval.json``), one such object per line of a JSONL file, a
``detailed_judge_results.csv``, or an ``evaluation_summary.json`` (``per_query_metrics``: correctness only).

Every record :func:`iter_run_records` yields is checked by :func:`check_run_record` (field types, counts),
after :mod:`.common` has checked its bytes and JSON: a malformed record is a :class:`FormatError` naming
its file and line (a ``*.json`` record: line 1).

Every part of Hopscotch that asks "is this a search call?" (DR-Synth's trace reader, ``eval-agent``)
asks :func:`is_search_tool`, so a ``google_search`` call counts the same everywhere. Every docid read
here goes through :func:`~hopscotch.retriever.io.docids.canonical_docid`.
"""

from __future__ import annotations

import csv
import math
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hopscotch.retriever.errors import FormatError, UsageError
from hopscotch.retriever.io.common import decoded_lines, parse_nested, read_json, read_jsonl
from hopscotch.retriever.io.docids import canonical_docid
from hopscotch.retriever.io.validate import check_id, count, finite_number

#: Search tools by name (after :func:`tool_name`); any name ending in ``_search`` is one too.
SEARCH_TOOL_NAMES = frozenset({"search", "web_search", "google_search", "google_scholar", "bing_search", "retrieve",
                               "retrieval", "local_knowledge_base_retrieval", "wiki_search"})
#: Tools that open one document by docid.
GET_DOCUMENT_TOOL_NAMES = frozenset({"get_document", "get_doc", "open_document", "fetch_document",
                                     "read_document"})
LAYOUTS = ("any", "bcp", "cmass")
_EVAL_ARTEFACTS = ("evaluation_summary.json", "run_config.json")
_OUTPUT_DOCID_PATTERNS = (re.compile(r"<docid:\s*([^>\s]+)\s*>"), re.compile(r'"docid"\s*:\s*"([^"]+)"'),
                          re.compile(r"'docid'\s*:\s*'([^']+)'"), re.compile(r"\bdocid=([^\s\],;)]+)"))


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


def _is_eval_artefact(path: Path, root: Path) -> bool:
    rel = path.relative_to(root).parts
    return "evals" in rel[:-1] or path.name.endswith("_eval.json") or path.name in _EVAL_ARTEFACTS


def run_files(path: str | os.PathLike, layout: str = "any") -> list[Path]:
    """The run files of a folder in ``layout`` (see the module doc), or ``[path]`` for a file."""
    path = Path(path)
    if layout not in LAYOUTS:
        raise UsageError(f"unknown run layout {layout!r} (choose from {', '.join(LAYOUTS)})")
    if not path.exists():
        raise UsageError(f"{path}: no such run file or folder")
    if path.is_file():
        return [path]
    if layout == "bcp":
        files = sorted(path.glob("run_*.json"))
        if not files:
            raise UsageError(f"{path}: no run_*.json files (BrowseComp-Plus's evaluate_run.py reads only those; "
                             "pass a JSONL file of runs by name)")
        return files
    if layout == "cmass":
        folder = path / "runs" if (path / "runs").is_dir() else path
        files = sorted(p for p in folder.glob("*.json") if not _is_eval_artefact(p, folder))
        if not files:
            raise UsageError(f"{folder}: no <query_id>.json run artefacts (cmass layout: <run-id>/runs/*.json)")
        return files
    files = sorted(p for p in path.rglob("*") if p.suffix in (".json", ".jsonl") and p.is_file()
                   and not _is_eval_artefact(p, path))
    if not files:
        raise UsageError(f"{path}: no *.json or *.jsonl run files")
    return files


_DOCID_LIST_KEYS = ("surfaced_docids", "previewed_docids", "opened_docids", "cited_docids", "agent_docids")


def check_run_record(record: dict, path: str | os.PathLike, lineno: int) -> dict:
    """``record`` if its fields have the types the readers below rely on, else :class:`FormatError` at ``path:lineno``.

    Checked when present (nested fields may be JSON or Python-repr strings): ``query_id`` / ``qid`` an id
    (:func:`~hopscotch.retriever.io.validate.check_id`), ``status`` a string, ``tool_call_counts`` an
    object of non-negative integer counts, ``result`` a list of step objects (or strings), and
    ``retrieved_docids`` and the cmass docid lists lists of docids (a JSON list, or a string holding one;
    a bare string is refused, not read as one docid or as its characters; ``retrieved_docids`` may also
    hold ``{call: [docids]}`` objects), and the judgement fields (:func:`judgement_from`).
    """
    for key in ("query_id", "qid"):
        if record.get(key) not in (None, ""):  # absent or empty: the evaluators skip or refuse the record
            check_id(record[key], path, lineno, f"a '{key}'")
    if record.get("status") is not None and not isinstance(record["status"], str):
        raise FormatError(path, lineno, "a string 'status'", repr(record["status"])[:80])
    counts = parse_nested(record.get("tool_call_counts"), path, lineno, "'tool_call_counts'", strict=True)
    if counts is not None:
        if not isinstance(counts, dict):
            raise FormatError(path, lineno, "'tool_call_counts' as an object {tool: count}", repr(counts)[:80])
        for name, value in counts.items():
            count(value, path, lineno, f"'tool_call_counts' entry {str(name)[:40]!r}")
    steps = parse_nested(record.get("result"), path, lineno, "'result'", strict=True)
    if steps is not None and (not isinstance(steps, list) or not all(isinstance(x, (dict, str)) for x in steps)):
        raise FormatError(path, lineno, "'result' as a list of step objects", repr(steps)[:80])
    for key in ("retrieved_docids", *_DOCID_LIST_KEYS):
        value = parse_nested(record.get(key), path, lineno, f"'{key}'", strict=True)
        allowed = (str, int, dict, list) if key == "retrieved_docids" else (str, int)
        items = [] if value is None else value
        if not isinstance(items, list) or not all(isinstance(x, allowed) and not isinstance(x, bool) for x in items):
            raise FormatError(path, lineno, f"'{key}' as a list of docids", repr(value)[:80])
    judgement_from(record, path, lineno)  # correct / confidence of the right types and range
    return record


def iter_run_records(path: str | os.PathLike, layout: str = "any") -> Iterator[tuple[str, dict]]:
    """Yield ``(where, record)`` for every run record of :func:`run_files`; ``where`` is ``file`` or ``file:line``.

    Every record is checked by :func:`check_run_record` (bytes and JSON by :mod:`.common`).
    """
    for f in run_files(path, layout):
        if f.name.endswith((".jsonl", ".jsonl.gz")):
            for lineno, obj in read_jsonl(f, "a run record object"):
                yield f"{f}:{lineno}", check_run_record(obj, f, lineno)
        else:
            yield str(f), check_run_record(read_run_file(f), f, 1)


def read_run_file(path: Path) -> dict:
    """The one run record of a ``*.json`` file (bytes and JSON checked; field types are not: see
    :func:`check_run_record`)."""
    obj = read_json(path, "one JSON run record")
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


def final_response(record: dict) -> str:
    """The final answer text: the last ``result`` item's output when it is ``output_text``, else ``""``.

    This is BrowseComp-Plus's and cmass's definition (a run ending in a tool call has no response).
    """
    steps = parse_nested(record.get("result")) or []
    if isinstance(steps, list) and steps:
        last = parse_nested(steps[-1])
        if isinstance(last, dict) and last.get("type") == "output_text":
            return str(last.get("output") or "")
    return ""


def tool_call_counts(record: dict) -> dict[str, int]:
    """``tool_call_counts`` by raw tool name as the harness wrote them (``{}`` when absent)."""
    counts = parse_nested(record.get("tool_call_counts"))
    if not isinstance(counts, dict):
        return {}
    return {str(k): int(v) for k, v in counts.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0}


def step_details(step: dict) -> dict:
    """A tool call's ``details`` object (cmass), or ``{}``."""
    details = parse_nested(step.get("details"))
    return details if isinstance(details, dict) else {}


def step_arguments(step: dict) -> dict:
    args = parse_nested(step.get("arguments"))
    return args if isinstance(args, dict) else {}


def step_failed(step: dict) -> bool:
    """True for a failed call: an output starting with ``Error`` or a JSON ``{"error": ...}`` without a docid
    (BrowseComp-Plus's get_document miss), or ``details`` with an error or an HTTP status >= 400."""
    output = step.get("output")
    if str(output or "").lstrip().lower().startswith("error"):
        return True
    parsed = parse_nested(output)
    if isinstance(parsed, dict) and parsed.get("error") and "docid" not in parsed:
        return True
    details = step_details(step)
    status = details.get("httpStatus", details.get("status"))
    return bool(details.get("error")) or (isinstance(status, int) and status >= 400)


def canonical_list(values: Iterable[Any]) -> list[str]:
    """Docids in first-encounter order, deduplicated, through ``canonical_docid``."""
    seen: dict[str, None] = {}
    for value in values:
        if value is not None and str(value).strip():
            seen.setdefault(canonical_docid(str(value).strip()), None)
    return list(seen)


def docid_field(record_or_step: dict, key: str) -> list[str] | None:
    """A list-of-docids field (``surfaced_docids``, ``details.retrievedDocids``, ...), or None when absent."""
    if key not in record_or_step or record_or_step[key] is None:
        return None
    value = parse_nested(record_or_step[key])
    return canonical_list(value if isinstance(value, list) else [value])


def output_docids(output: Any) -> list[str]:
    """Docids in a search output: a JSON list of ``{docid, ...}`` hits, ``<docid: X>``, ``"docid": "X"`` or ``docid=X``."""
    parsed = parse_nested(output)
    if isinstance(parsed, list):
        return canonical_list(h.get("docid") for h in parsed if isinstance(h, dict))
    if not isinstance(output, str):
        return []
    found = [(m.start(), m.group(1)) for pattern in _OUTPUT_DOCID_PATTERNS for m in pattern.finditer(output)]
    return canonical_list(d for _, d in sorted(found))


def opened_docid(step: dict) -> str | None:
    """The docid a get-document / read_document call opened (arguments, else ``details.docid``)."""
    docid = step_arguments(step).get("docid", step_details(step).get("docid"))
    return None if docid is None else canonical_docid(str(docid))


@dataclass
class Judgement:
    """One answer judgement: ``correct`` is None when the judge gave none (parse error, not judged)."""

    query_id: str | None
    correct: bool | None
    confidence: float | None = None
    parse_error: bool = False
    run_stem: str | None = None  # the stem of the run file it judges (``json_path``), when known


#: the one mapping of judgement words to outcomes (case and spaces ignored): JSON booleans, 0 / 1, and these
#: words (CSV judge files hold text: ``detailed_judge_results.csv`` writes True / False); anything else is refused
CORRECT_WORDS = {"true": True, "yes": True, "correct": True, "1": True,
                 "false": False, "no": False, "incorrect": False, "0": False}


def _as_bool(value: Any, path=None, lineno: int | None = None, what: str = "'correct'") -> bool | None:
    """A judgement outcome: a bool, 0 / 1, or a word of :data:`CORRECT_WORDS`; None when absent (None or an
    empty string); anything else (``"maybe"``, ``2``, ``"80%"``) a :class:`FormatError` at ``path:lineno``."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in CORRECT_WORDS:
        return CORRECT_WORDS[value.strip().lower()]
    raise FormatError(path or "<judgement>", lineno, f"{what} as true or false (or one of "
                      f"{', '.join(sorted(CORRECT_WORDS))})", repr(value)[:60])


def _as_float(value: Any, path=None, lineno: int | None = None, what: str = "'confidence'") -> float | None:
    """A judge's confidence: a number in [0, 100] (a JSON number, or a CSV field's digits); None when absent
    (None, an empty string, or non-finite: pandas writes a missing confidence as ``nan``); ``150`` or
    ``"80%"`` a :class:`FormatError` at ``path:lineno``."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, (int, float, str)) and not isinstance(value, bool):
        try:
            if not math.isfinite(float(value)):
                return None
        except (ValueError, OverflowError):
            pass  # "80%": refused below
    return finite_number(value, path or "<judgement>", lineno, f"{what} as a number", minimum=0, maximum=100)


def judgement_from(obj: dict, path=None, lineno: int | None = None) -> Judgement | None:
    """The judgement an object carries (a run record or a judge's ``*_eval.json``), else None.

    Read from ``judge_result.{correct, confidence, parse_error}``, else ``correct`` / ``is_correct`` /
    ``judgement`` and ``confidence`` at the top level; each present field is checked (:func:`_as_bool`,
    :func:`_as_float`), a bad one is a :class:`FormatError` naming ``path:lineno`` and the key.
    """
    judge = parse_nested(obj.get("judge_result"))
    judge = judge if isinstance(judge, dict) else {}
    correct = None
    for key, value in (("judge_result.correct", judge.get("correct")), ("correct", obj.get("correct")),
                       ("is_correct", obj.get("is_correct")), ("judgement", obj.get("judgement"))):
        correct = _as_bool(value, path, lineno, f"'{key}'")
        if correct is not None:
            break
    key = "judge_result.confidence" if "confidence" in judge else "confidence"
    confidence = _as_float(judge.get("confidence", obj.get("confidence")), path, lineno, f"'{key}'")
    parse_error = bool(judge.get("parse_error", False))
    if correct is None and not parse_error:
        return None
    qid = obj.get("query_id")
    stem = Path(str(obj["json_path"])).stem if obj.get("json_path") else None
    return Judgement(None if qid is None else str(qid), correct, confidence, parse_error, stem)


def _csv_judgements(path: Path) -> list[Judgement]:
    where = {"line": 1}  # the file line csv has last read (a quoted field may span several)

    def lines() -> Iterator[str]:
        for lineno, line in decoded_lines(path):
            where["line"] = lineno
            yield line

    out = []
    reader = csv.DictReader(lines())
    try:
        for row in reader:
            if "query_id" not in row:
                raise FormatError(path, 1, "a detailed_judge_results.csv header with query_id", ",".join(row))
            qid = check_id(row["query_id"], path, where["line"], "a 'query_id'")
            line = where["line"]
            correct = _as_bool(row.get("judge_correct", ""), path, line, "'judge_correct'")
            conf_key = "judge_confidence" if "judge_confidence" in row else "confidence"
            stem = Path(row["json_path"]).stem if isinstance(row.get("json_path"), str) and row["json_path"] else None
            out.append(Judgement(qid, correct, _as_float(row.get(conf_key), path, line, f"'{conf_key}'"),
                                 _as_bool(row.get("parse_error", ""), path, line, "'parse_error'") is True
                                 or correct is None, stem))
    except csv.Error as exc:  # an unterminated quote, a field over csv's size limit
        raise FormatError(path, where["line"], "CSV judge results", str(exc)) from None
    return out


def _json_judgements(path: Path, obj: Any, lineno: int | None = None) -> list[Judgement]:
    if isinstance(obj, dict) and isinstance(obj.get("per_query_metrics"), list):  # an evaluation_summary.json
        return [Judgement(check_id(m["query_id"], path, 1, "a per_query_metrics 'query_id'"),
                          bool(_as_bool(m.get("correct"), path, 1, "a per_query_metrics 'correct'")))
                for m in obj["per_query_metrics"] if isinstance(m, dict) and "query_id" in m]
    items = obj if isinstance(obj, list) else [obj]
    out = []
    for item in items:
        j = judgement_from(item, path, lineno) if isinstance(item, dict) else None
        if j is None:
            raise FormatError(path, None, "a judge result with judge_result.correct", str(item)[:80])
        if j.query_id is None and path.name.endswith("_eval.json"):
            j.query_id = path.name[: -len("_eval.json")]
        out.append(j)
    return out


def read_judgements(path: str | os.PathLike) -> list[Judgement]:
    """The judgements of a judge's output (see the module doc for the accepted layouts)."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"{path}: no such judgement file or folder")
    if path.is_dir():
        files = sorted(path.rglob("*_eval.json"))
        if not files:
            raise UsageError(f"{path}: no *_eval.json judge files")
        return [j for f in files for j in _json_judgements(f, read_json(f, "a judge result (JSON)"))]
    if path.name.endswith((".csv", ".csv.gz")):
        return _csv_judgements(path)
    if path.name.endswith((".jsonl", ".jsonl.gz")):
        return [j for n, obj in read_jsonl(path, "a judge result object") for j in _json_judgements(path, obj, n)]
    return _json_judgements(path, read_json(path, "judge results (JSON, JSONL, CSV or a folder)"))
