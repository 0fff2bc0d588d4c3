"""One reader per agent-trace format; each yields :class:`~hopscotch.data_synth.traces.TraceStep` records.

Besides ``reasoning`` (all the reasoning so far) each reader fills what it can of a step's other
context fields (:mod:`hopscotch.retriever.model.query_input` turns them into the query input variants):

* ``ircot``: IRCoT chain-of-thought steps ``{qid, step, cumulative_cot, new_sentence,
  retrieved_titles_after_step?}``. The new sentence is the query; the chain of thought before it is the
  reasoning. ``current_reasoning`` is the new sentence (all IRCoT writes after a retrieval),
  ``prior_queries`` the question's earlier sentences, ``prior_results`` the titles the previous step
  had retrieved (titles only).
* ``tongyi``: Tongyi-DeepResearch search steps ``{query_id, reasoning, search_query, valid,
  retrieved_docids?}``. A row's ``reasoning`` is the thinking since the last tool result (consecutive
  rows of a query never repeat each other), so it is ``current_reasoning`` and ``reasoning`` joins the
  question's rows so far (blank lines between). A list of parallel queries becomes one step per query,
  sharing the context. ``search_query: null`` (a call without a query) yields a step with an empty
  query, so it is counted and then dropped. ``prior_queries``: the earlier rows' queries;
  ``prior_results``: the previous row's ``retrieved_docids`` as snippets when a ``doc_snippets.jsonl``
  (``{docid, text}``) sits beside the file (else None).
* ``browsecomp``: BrowseComp-Plus run records ``{query_id, result: [{type, tool_name, arguments,
  output}]}``: ``reasoning`` joins every ``reasoning`` item before the search call, ``current_reasoning``
  those since the last tool call, ``prior_queries`` the earlier search calls' queries, ``prior_results``
  the last tool call's output (split into its numbered results; none after an error). Nested fields
  may be JSON objects, JSON strings or Python-repr strings.
* ``generic`` (also the embedded world's ``traces.jsonl``): ``{question_id, step?, reasoning, query,
  gold_docids?, current_reasoning?, prior_queries?, prior_results?}``; ``qid`` / ``query_id`` are
  accepted for the id and ``search_query`` for the query. Absent context fields are derived where the
  file allows: ``prior_queries`` from the question's earlier steps, ``current_reasoning`` as what the
  reasoning added to the previous step's (the whole reasoning at a question's first step).

Parallel queries share their call's context: one is not a prior query of another. Steps without an
explicit number are numbered 1, 2, ... per question in file order.

The generic format's one writer sits beside its reader: :func:`trace_line` (one step as a JSON line, keys in
:data:`TRACE_KEYS` order) and :func:`write_trace_file` (a whole file, atomically); the embedded world's
``traces.jsonl`` and the agent experiments' training traces are written through them.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path

from hopscotch.data_synth.trace_step import TraceStep
from hopscotch.retriever.errors import FormatError
from hopscotch.retriever.io.agent_runs import is_search_tool
from hopscotch.retriever.io.common import atomic_write, read_jsonl
from hopscotch.retriever.io.common import parse_nested as _parse_nested
from hopscotch.retriever.io.queries import parse_context_fields
from hopscotch.retriever.model.query_input import clip_text

#: the file of ``{docid, text}`` snippets a Tongyi steps file may have beside it
SNIPPETS_FILE = "doc_snippets.jsonl"
_RESULT_START = re.compile(r"^[ \t]*\d+\.[ \t]+<docid:[^>]*>[^\n]*\n?", re.MULTILINE)


def parse_nested(value, path: Path, lineno: int, what: str, strict: bool = True):
    """See :func:`hopscotch.retriever.io.common.parse_nested`; strict by default for trace files."""
    return _parse_nested(value, path, lineno, what, strict)


def _question_id(obj: dict, keys: tuple[str, ...], path: Path, lineno: int, expected: str) -> str:
    for key in keys:
        value = obj.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value).strip():
            return str(value)
    raise FormatError(path, lineno, expected, f"keys {sorted(obj)[:10]}")


def _text(value, path: Path, lineno: int, what: str) -> str:
    if value is None:
        return ""
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "\n".join(value)
    if not isinstance(value, str):
        raise FormatError(path, lineno, f"{what} to be a string", type(value).__name__)
    return value


def _step_number(value, path: Path, lineno: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise FormatError(path, lineno, "'step' to be an integer", repr(value))
    try:
        return int(value)
    except ValueError:
        raise FormatError(path, lineno, "'step' to be an integer", repr(value)) from None


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    """Non-empty items, first occurrences only, in order."""
    return tuple(dict.fromkeys(q for q in items if q))


def _snippet(text: str) -> dict:
    text = text.strip()
    if text.startswith("[") and "\n" in text:  # a '[preview...]' first line, as Tongyi's chunks have
        text = text.split("\n", 1)[1]
    return {"title": "", "snippet": clip_text(text)}


def _output_results(output) -> tuple[dict, ...]:
    """A tool output's results: its numbered ``N. <docid: ...>`` entries, or the whole text as one."""
    if not isinstance(output, str) or not output.strip() or output.lstrip().lower().startswith("error"):
        return ()
    parts = _RESULT_START.split(output)
    bodies = parts[1:] if len(parts) > 1 else parts
    return tuple(_snippet(b) for b in bodies if b.strip())


def read_ircot(records, path: Path) -> Iterator[TraceStep]:
    expected = "an IRCoT step {qid, step, cumulative_cot, new_sentence}"
    previous: dict[str, list[str]] = defaultdict(list)
    titles: dict[str, list | None] = {}  # the titles retrieved after each question's previous step
    for lineno, obj in records:
        qid = _question_id(obj, ("qid", "question_id", "_id"), path, lineno, expected)
        if "new_sentence" not in obj or "cumulative_cot" not in obj:
            raise FormatError(path, lineno, expected, f"keys {sorted(obj)[:10]}")
        sentence = _text(obj["new_sentence"], path, lineno, "'new_sentence'").strip()
        cot = _text(obj["cumulative_cot"], path, lineno, "'cumulative_cot'").rstrip()
        if sentence and cot.endswith(sentence):
            reasoning = cot[: len(cot) - len(sentence)].strip()
        else:  # fall back to the sentences of the earlier steps
            reasoning = " ".join(previous[qid]).strip()
        step = _step_number(obj["step"], path, lineno) if "step" in obj else len(previous[qid]) + 1
        seen = titles.get(qid)
        results = None if seen is None else tuple({"title": str(t), "snippet": ""} for t in seen)
        retrieved = obj.get("retrieved_titles_after_step")
        titles[qid] = retrieved if isinstance(retrieved, list) else None
        context = {"current_reasoning": sentence, "prior_queries": _unique(previous[qid]), "prior_results": results}
        previous[qid].append(sentence)
        yield TraceStep(qid, step, reasoning, sentence, source=f"{path}:{lineno}", **context)


def _load_snippets(path: Path) -> dict[str, str] | None:
    """``{docid: text}`` from the ``doc_snippets.jsonl`` beside ``path``, or None when there is none."""
    f = Path(path).parent / SNIPPETS_FILE
    if Path(path).name == SNIPPETS_FILE or not f.is_file():
        return None
    out = {}
    for _, obj in read_jsonl(f, "a snippet {docid, text}"):
        if isinstance(obj.get("text"), str) and obj.get("docid") is not None:
            out[str(obj["docid"])] = obj["text"]
    return out


def _tongyi_queries(obj: dict, path: Path, lineno: int) -> list[str]:
    queries = parse_nested(obj["search_query"], path, lineno, "'search_query'", strict=False)
    if queries is None:
        queries = [""]
    elif isinstance(queries, str):
        queries = [queries]
    if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
        raise FormatError(path, lineno, "'search_query' to be a string, a list of strings or null",
                          repr(obj["search_query"]))
    return [q.strip() for q in queries] or [""]


def read_tongyi(records, path: Path) -> Iterator[TraceStep]:
    expected = "a Tongyi search step {query_id, reasoning, search_query}"
    counters: dict[str, int] = defaultdict(int)           # step numbers run on per question (unique ids)
    # a trajectory is one run of one question: a steps file may hold several runs of a question (one per
    # retriever, ``retriever`` / ``source``), whose reasoning, queries and results must not mix
    thoughts: dict[tuple, list[str]] = defaultdict(list)  # each trajectory's rows' reasoning so far
    asked: dict[tuple, list[str]] = defaultdict(list)     # each trajectory's queries so far
    last_docids: dict[tuple, list] = {}                   # the trajectory's previous row's retrieved docids
    snippets = _load_snippets(path)
    for lineno, obj in records:
        qid = _question_id(obj, ("query_id", "qid", "question_id"), path, lineno, expected)
        if "search_query" not in obj:
            raise FormatError(path, lineno, expected, f"keys {sorted(obj)[:10]}")
        run = (qid, str(obj.get("retriever") or ""), str(obj.get("source") or ""))
        current = _text(obj.get("reasoning"), path, lineno, "'reasoning'").strip()
        queries = _tongyi_queries(obj, path, lineno)
        if current:
            thoughts[run].append(current)
        results = None
        if snippets is not None:
            results = tuple(_snippet(snippets[str(d)]) for d in last_docids.get(run, ()) if str(d) in snippets)
        context = {"current_reasoning": current, "prior_queries": _unique(asked[run]), "prior_results": results}
        failed = obj.get("valid") is False
        for query in queries:
            counters[qid] += 1
            yield TraceStep(qid, counters[qid], "\n\n".join(thoughts[run]), query, failed=failed,
                            source=f"{path}:{lineno}", **context)
        asked[run].extend(queries)
        docids = obj.get("retrieved_docids")
        last_docids[run] = docids if isinstance(docids, list) else []


def _call_queries(arguments, path: Path, lineno: int) -> list[str]:
    args = parse_nested(arguments, path, lineno, "'arguments' of a search call", strict=False)
    if isinstance(args, str):  # a bare query string
        return [args]
    if not isinstance(args, dict):
        return [""]
    query = args.get("query", args.get("queries", args.get("q")))
    if isinstance(query, str):
        return [query]
    if isinstance(query, list) and all(isinstance(q, str) for q in query):
        return query or [""]
    return [""]


def _browsecomp_record(qid: str, items: list, path: Path, lineno: int, counters) -> Iterator[TraceStep]:
    thoughts: list[str] = []        # every reasoning item so far
    current: list[str] = []         # those since the last tool call
    asked: list[str] = []
    results: tuple[dict, ...] = ()  # the last tool call's output
    for item in items:
        item = parse_nested(item, path, lineno, "a 'result' item")
        if not isinstance(item, dict) or "type" not in item:
            raise FormatError(path, lineno, "'result' items to be objects with a 'type'", repr(item))
        kind = item["type"]
        if kind == "reasoning":
            text = _text(parse_nested(item.get("output"), path, lineno, "a reasoning 'output'"), path,
                         lineno, "a reasoning 'output'").strip()
            if text:
                thoughts.append(text)
                current.append(text)
        elif kind == "tool_call":
            output = item.get("output")
            if is_search_tool(item.get("tool_name")):
                failed = isinstance(output, str) and output.lstrip().lower().startswith("error")
                queries = [q.strip() for q in _call_queries(item.get("arguments"), path, lineno)]
                context = {"current_reasoning": "\n\n".join(current), "prior_queries": _unique(asked),
                           "prior_results": results}
                for query in queries:
                    counters[qid] += 1
                    yield TraceStep(qid, counters[qid], "\n\n".join(thoughts), query, failed=failed,
                                    source=f"{path}:{lineno}", **context)
                asked.extend(queries)
            current, results = [], _output_results(output)


def read_browsecomp(records, path: Path) -> Iterator[TraceStep]:
    expected = "a BrowseComp-Plus run record {query_id, result: [...]}"
    counters: dict[str, int] = defaultdict(int)
    first_line: dict[str, int] = {}   # a run file holds one record per question: a second one is a duplicate
    for lineno, obj in records:
        qid = _question_id(obj, ("query_id", "qid", "question_id"), path, lineno, expected)
        if qid in first_line:
            raise FormatError(path, lineno, f"one run record per question; query_id {qid} was already read at "
                                            f"line {first_line[qid]}", "a second record")
        first_line[qid] = lineno
        items = parse_nested(obj.get("result"), path, lineno, "'result'")
        if not isinstance(items, list):
            raise FormatError(path, lineno, "'result' to be a list of reasoning / tool_call / output items",
                              type(items).__name__)
        yield from _browsecomp_record(qid, items, path, lineno, counters)


def _derived_context(obj: dict, path: Path, lineno: int, reasoning: str, earlier: list[tuple[str, str]]) -> dict:
    """The step's context fields: the file's own, else derived from the question's ``earlier`` steps
    (``(reasoning, query)`` pairs)."""
    given = parse_context_fields({k: obj.get(k) for k in ("current_reasoning", "prior_queries", "prior_results")},
                                 path, lineno)
    current = given["current_reasoning"]
    if current is None:
        before = earlier[-1][0] if earlier else ""
        if not before:
            current = reasoning
        elif reasoning.startswith(before):
            current = reasoning[len(before):].strip()
    queries = given["prior_queries"]
    if queries is None:
        queries = _unique(q for _, q in earlier)
    return {"current_reasoning": current if current is None else current.strip(), "prior_queries": queries,
            "prior_results": given["prior_results"]}


def read_generic(records, path: Path) -> Iterator[TraceStep]:
    expected = "a trace step {question_id, reasoning, query} (optional step, gold_docids)"
    counters: dict[str, int] = defaultdict(int)
    earlier: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for lineno, obj in records:
        qid = _question_id(obj, ("question_id", "qid", "query_id"), path, lineno, expected)
        query = obj.get("query", obj.get("search_query"))
        if not isinstance(query, str):
            raise FormatError(path, lineno, expected + " with a string 'query'", f"keys {sorted(obj)[:10]}")
        reasoning = _text(obj.get("reasoning"), path, lineno, "'reasoning'").strip()
        counters[qid] += 1
        step = _step_number(obj["step"], path, lineno) if obj.get("step") is not None else counters[qid]
        gold = obj.get("gold_docids")
        if gold is not None:
            if not isinstance(gold, list) or not all(isinstance(d, (str, int)) for d in gold):
                raise FormatError(path, lineno, "'gold_docids' to be a list of document ids", repr(gold))
            gold = tuple(str(d) for d in gold)
        context = _derived_context(obj, path, lineno, reasoning, earlier[qid])
        earlier[qid].append((reasoning, query.strip()))
        yield TraceStep(qid, step, reasoning, query.strip(), gold_docids=gold, source=f"{path}:{lineno}", **context)


READERS = {"ircot": read_ircot, "tongyi": read_tongyi, "browsecomp": read_browsecomp,
           "generic": read_generic, "world": read_generic}


def detect_format(obj: dict) -> str | None:
    """The format a first record looks like, or None."""
    if "cumulative_cot" in obj and "new_sentence" in obj:
        return "ircot"
    if "search_query" in obj and ("query_id" in obj or "qid" in obj) and "query" not in obj:
        return "tongyi"
    if "result" in obj and ("query_id" in obj or "qid" in obj):
        return "browsecomp"
    if "gold_docids" in obj and "query" in obj:
        return "world"
    if "query" in obj and any(k in obj for k in ("question_id", "qid", "query_id")):
        return "generic"
    return None


#: the generic trace format's keys, in the order :func:`trace_line` writes them
TRACE_KEYS = ("question_id", "step", "reasoning", "query", "current_reasoning", "prior_queries", "prior_results",
              "gold_docids")
_ABSENT = object()


def trace_line(question_id: str, step: int, reasoning: str, query: str, current_reasoning=_ABSENT,
               prior_queries=_ABSENT, prior_results=_ABSENT, gold_docids=_ABSENT) -> str:
    """One step of the generic format (what :func:`read_generic` reads) as a JSON line ending in a newline:
    keys in :data:`TRACE_KEYS` order, non-ASCII kept. A field left out is not written (a None is written as
    null); tuples are written as lists."""
    row = {"question_id": question_id, "step": step, "reasoning": reasoning, "query": query}
    given = {"current_reasoning": current_reasoning, "prior_queries": prior_queries, "prior_results": prior_results,
             "gold_docids": gold_docids}
    row.update((k, list(v) if isinstance(v, tuple) else v) for k, v in given.items() if v is not _ABSENT)
    return json.dumps(row, ensure_ascii=False) + "\n"


def write_trace_file(path, steps: Iterable[dict]) -> int:
    """Atomically write ``steps`` (mappings of :func:`trace_line`'s arguments) as a generic trace file;
    returns the number of steps."""
    n = 0
    with atomic_write(path) as fh:
        for step in steps:
            fh.write(trace_line(**step))
            n += 1
    return n
