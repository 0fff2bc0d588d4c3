"""Reasoning-aware BM25's speed against plain BM25 on one index and the same queries (``scripts/
bench_bm25_expansion.py``): the dev sets' small indexes, or any index folder (the 1M-document cost-curve corpus's
disk index) searched with real Tongyi-DeepResearch calls and their thinking.

Each setting searches every query at k = 100 through :class:`~hopscotch.retriever.searchers.bm25.BM25Searcher` (what
``hopscotch search --bm25 [--reasoning FLAGS]`` runs: query analysis, the expansion, the search, docid lookup), the
settings in turn, ``repeats`` rounds after one warm-up round; the median q/s of each is reported, with its ratio to
plain BM25 measured in the same rounds.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import time
from pathlib import Path

from hopscotch_experiments.agent_data.tongyi_sets import trajectory_history, turn_record

from hopscotch.data_synth.traces import read_traces
from hopscotch.retriever.io.common import read_jsonl
from hopscotch.retriever.io.queries import Query
from hopscotch.retriever.searchers.bm25 import BM25Searcher, add_expansion_options, expansion_of
from hopscotch.retriever.searchers.bm25_expansion import DEFAULT_BM25_EXPANSION

#: the settings every run measures: plain, the default, and the earlier documented ones
SETTINGS = {"plain": None, "default": "",
            "focus 256 x15 (raw bag)": "--bm25-reasoning reasoning_focus:256 --bm25-query-weight 15",
            "whole reasoning x10 (raw bag)": "--bm25-reasoning reasoning --bm25-query-weight 10"}


def expansion_from_flags(flags: str):
    """The expansion ``hopscotch search --bm25 --reasoning FLAGS`` builds (its expansion flags only)."""
    parser = argparse.ArgumentParser(add_help=False)
    add_expansion_options(parser)
    return expansion_of(vars(parser.parse_args(shlex.split(flags))))


def tongyi_calls(steps: Path, count: int, shape: str = "accumulated") -> list[Query]:
    """The first ``count`` calls of a Tongyi steps file that returned documents (file order), with all the thinking
    so far (``accumulated``) or the call's own turn (``turn``, none after a rejected call) as reasoning."""
    rows = dict(read_jsonl(steps, "a Tongyi search step"))
    history = trajectory_history(str(steps)) if shape == "turn" else {}
    out = []
    for step in read_traces([steps], "tongyi"):
        raw = rows[int(step.source.rsplit(":", 1)[1])]
        if step.failed or not raw.get("retrieved_docids") or not step.query.strip():
            continue
        reasoning = step.reasoning
        if shape == "turn":
            reasoning = turn_record({"_id": step.query_id, "text": step.query,
                                     "current_reasoning": step.current_reasoning}, history[step.query_id][0])["reasoning"]
        out.append(Query(step.query, reasoning, qid=step.query_id))
        if len(out) == count:
            break
    return out


def measure(index, queries: list[Query], settings: dict[str, str | None], repeats: int = 5, k: int = 100) -> dict:
    """``{label: {"qps", "ratio", "describe"}}``: the median q/s of each setting over ``repeats`` rounds (after one
    warm-up round), and its ratio to ``plain``'s, round by round."""
    base = BM25Searcher(index)
    searchers = {}
    for label, flags in settings.items():
        searchers[label] = base if flags is None else BM25Searcher(base.index, expansion=expansion_from_flags(flags))
    aware = [q.with_reasoning() for q in queries]
    times: dict[str, list[float]] = {label: [] for label in settings}
    for round_ in range(repeats + 1):
        for label, searcher in searchers.items():
            t0 = time.perf_counter()
            searcher.search_batch(aware if settings[label] is not None else queries, k)
            if round_:
                times[label].append(time.perf_counter() - t0)
    plain = times.get("plain")
    out = {}
    for label, t in times.items():
        ratio = statistics.median(p / x for p, x in zip(plain, t)) if plain else None
        out[label] = {"qps": len(queries) / statistics.median(t), "ratio": ratio,
                      "describe": "plain BM25" if settings[label] is None else searchers[label].expansion.describe()}
    return out


def table(results: dict, queries: list[Query], docs: int) -> list[str]:
    words = sum(len((q.reasoning or "").split()) for q in queries) / max(len(queries), 1)
    out = [f"{len(queries)} calls, reasoning {words:,.0f} words on average, {docs:,} documents, k = 100; the default "
           f"is {DEFAULT_BM25_EXPANSION.describe()}",
           "| setting | expansion | q/s | against plain (same rounds) |", "|---|---|---|---|"]
    for label, r in results.items():
        out.append(f"| {label} | {r['describe']} | {r['qps']:,.1f} | "
                   f"{'-' if r['ratio'] is None else format(r['ratio'], '.2f')} |")
    return out
