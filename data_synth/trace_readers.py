"""One reader per agent-trace format; each yields :class:`~hopscotch.data_synth.traces.TraceStep` records.

* ``ircot``: IRCoT chain-of-thought steps ``{qid, step, cumulative_cot, new_sentence}``. The new
  sentence is the query; the chain of thought before it is the reasoning.
* ``tongyi``: Tongyi-DeepResearch search steps ``{query_id, reasoning, search_query, valid}``; a list
  of parallel queries becomes one step per query, all sharing the reasoning. ``search_query: null``
  (a call without a query) yields a step with an empty query, so it is counted and then dropped.
* ``browsecomp``: BrowseComp-Plus run records ``{query_id, result: [{type, tool_name, arguments,
  output}]}``; the reasoning of a search call is the last ``reasoning`` item before it. Nested fields
  may be JSON objects, JSON strings or Python-repr strings.
* ``generic`` (also the embedded world's ``traces.jsonl``): ``{question_id, step?, reasoning, query,
  gold_docids?}``; ``qid`` / ``query_id`` are accepted for the id and ``search_query`` for the query.

Steps without an explicit number are numbered 1, 2, ... per question in file order.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

from hopscotch.data_synth.trace_step import TraceStep
from hopscotch.retriever.errors import FormatError
from hopscotch.retriever.io.agent_runs import is_search_tool
from hopscotch.retriever.io.common import parse_nested as _parse_nested


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


def read_ircot(records, path: Path) -> Iterator[TraceStep]:
    expected = "an IRCoT step {qid, step, cumulative_cot, new_sentence}"
    previous: dict[str, list[str]] = defaultdict(list)
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
        previous[qid].append(sentence)
        yield TraceStep(qid, step, reasoning, sentence, source=f"{path}:{lineno}")


def read_tongyi(records, path: Path) -> Iterator[TraceStep]:
    expected = "a Tongyi search step {query_id, reasoning, search_query}"
    counters: dict[str, int] = defaultdict(int)
    for lineno, obj in records:
        qid = _question_id(obj, ("query_id", "qid", "question_id"), path, lineno, expected)
        if "search_query" not in obj:
            raise FormatError(path, lineno, expected, f"keys {sorted(obj)[:10]}")
        reasoning = _text(obj.get("reasoning"), path, lineno, "'reasoning'").strip()
        queries = parse_nested(obj["search_query"], path, lineno, "'search_query'", strict=False)
        if queries is None:
            queries = [""]
        elif isinstance(queries, str):
            queries = [queries]
        if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
            raise FormatError(path, lineno, "'search_query' to be a string, a list of strings or null",
                              repr(obj["search_query"]))
        failed = obj.get("valid") is False
        for query in queries or [""]:
            counters[qid] += 1
            yield TraceStep(qid, counters[qid], reasoning, query.strip(), failed=failed, source=f"{path}:{lineno}")


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


def read_browsecomp(records, path: Path) -> Iterator[TraceStep]:
    expected = "a BrowseComp-Plus run record {query_id, result: [...]}"
    counters: dict[str, int] = defaultdict(int)
    for lineno, obj in records:
        qid = _question_id(obj, ("query_id", "qid", "question_id"), path, lineno, expected)
        items = parse_nested(obj.get("result"), path, lineno, "'result'")
        if not isinstance(items, list):
            raise FormatError(path, lineno, "'result' to be a list of reasoning / tool_call / output items",
                              type(items).__name__)
        reasoning = ""
        for item in items:
            item = parse_nested(item, path, lineno, "a 'result' item")
            if not isinstance(item, dict) or "type" not in item:
                raise FormatError(path, lineno, "'result' items to be objects with a 'type'", repr(item))
            kind = item["type"]
            if kind == "reasoning":
                text = _text(parse_nested(item.get("output"), path, lineno, "a reasoning 'output'"), path,
                             lineno, "a reasoning 'output'").strip()
                if text:
                    reasoning = text
            elif kind == "tool_call" and is_search_tool(item.get("tool_name")):
                output = item.get("output")
                failed = isinstance(output, str) and output.lstrip().lower().startswith("error")
                for query in _call_queries(item.get("arguments"), path, lineno):
                    counters[qid] += 1
                    yield TraceStep(qid, counters[qid], reasoning, query.strip(), failed=failed,
                                    source=f"{path}:{lineno}")


def read_generic(records, path: Path) -> Iterator[TraceStep]:
    expected = "a trace step {question_id, reasoning, query} (optional step, gold_docids)"
    counters: dict[str, int] = defaultdict(int)
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
        yield TraceStep(qid, step, reasoning, query.strip(), gold_docids=gold, source=f"{path}:{lineno}")


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
