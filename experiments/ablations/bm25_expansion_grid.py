"""Choosing reasoning-aware BM25's defaults (the expansion: ``--bm25-reasoning``, ``--bm25-query-weight``,
``--bm25-terms``, ``--bm25-reasoning-weight``, ``--bm25-k3``) by the selection rule
(:func:`hopscotch.retriever.evaluation.selection.select_default`).

Every setting of the grid is searched on every dev set (the objective sets, the guards and, reported only, the
call-level sets) through :class:`~hopscotch.retriever.searchers.bm25.BM25Searcher`, what ``hopscotch search --bm25
--reasoning`` with the setting's flags runs, over the BM25 indexes the agent ablation caches. The baseline of every
guard is plain BM25 (the query alone). Sets over one corpus whose calls carry the same query and reasoning share
their searches (the Tongyi label variants). Per-query nDCG@10 of each setting is cached under
``WORK/grid/bm25/`` (delete it to redo). Test questions are only reported: the pick and the runner-up against
plain BM25 on every set, paired randomisation tests.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from pathlib import Path

from hopscotch_experiments.ablations.ablation_runs import build_indexes, evaluate_ndcg
from hopscotch_experiments.agent_data.eval_sets import CALL_LEVEL, GUARDS, OBJECTIVE, SET_NAMES, build_sets
from hopscotch.retriever.evaluation.metrics import compare_per_query
from hopscotch.retriever.evaluation.selection import select_default
from hopscotch.retriever.io.common import write_json
from hopscotch.retriever.io.queries import read_queries
from hopscotch.retriever.searchers.base import search_run
from hopscotch.retriever.searchers.bm25 import BM25Searcher
from hopscotch.retriever.searchers.bm25_expansion import DEFAULT_BM25_EXPANSION, BM25Expansion

#: the raw bags (query x W + every occurrence of the text's terms): the earlier default (the last 16 words x7), the
#: query-focused 256 words, the whole reasoning
RAW_BAGS = (("reasoning_tail:16", 7.0), *(("reasoning_focus:256", w) for w in (5.0, 8.0, 10.0, 15.0, 20.0)),
            *(("reasoning", w) for w in (3.0, 5.0, 10.0)))
#: the reasoning as a feedback document (RM3-style): its top-m terms by saturated tf x idf, their weights scaled to
#: R times the query's total weight (BM25's k3 saturation or none)
TERMS = (10, 20, 40, 80)
REASONING_WEIGHTS = (1.0, 2.0, 3.0, 4.0, 6.0)
K3 = (None, 1.2, 5.0)
#: the same selection without the scaling (each kept term counts its saturated frequency) beside a query weight W
TERMS_UNSCALED = (20, 40, 80)
QUERY_WEIGHTS = (1.0, 2.0, 3.0, 5.0)


def grid() -> dict[str, BM25Expansion | None]:
    """``{label: expansion}``; ``plain`` (None) is BM25 without the reasoning."""
    expansions = [BM25Expansion.parse(v, w) for v, w in RAW_BAGS]
    expansions += [BM25Expansion.parse("reasoning", 1.0, terms=m, weight=r, k3=k3)
                   for m in TERMS for r in REASONING_WEIGHTS for k3 in K3]
    expansions += [BM25Expansion.parse("reasoning", w, terms=m, k3=k3)
                   for m in TERMS_UNSCALED for k3 in K3[1:] for w in QUERY_WEIGHTS]
    # saturation alone (every term kept), and the focused text scaled against the query
    expansions += [BM25Expansion.parse("reasoning", w, k3=k3) for k3 in K3[1:] for w in QUERY_WEIGHTS]
    expansions += [BM25Expansion.parse(v, 1.0, weight=r, k3=k3) for v in ("reasoning_focus:256", "reasoning_focus:128")
                   for r, k3 in ((1.0, None), (1.5, None), (2.0, None), (3.0, None), (1.5, 5.0), (2.0, 5.0),
                                 (3.0, 5.0))]
    expansions += [BM25Expansion.parse("reasoning_focus:256", 1.0, terms=m, weight=r, k3=5.0) for m in (40, 80)
                   for r in (2.0, 3.0)]
    out: dict[str, BM25Expansion | None] = {"plain": None}
    for e in expansions:
        out[label(e)] = e
    return out


def label(e: BM25Expansion | None) -> str:
    """A setting's flags, as ``hopscotch search --bm25 --reasoning`` takes them."""
    if e is None:
        return "plain"
    out = f"--bm25-reasoning {e.reasoning} --bm25-query-weight {e.query_weight:g}"
    for flag, value in (("--bm25-terms", e.terms), ("--bm25-reasoning-weight", e.weight), ("--bm25-k3", e.k3)):
        if value is not None:
            out += f" {flag} {value:g}"
    return out


def _key(q) -> str:
    return hashlib.sha1(json.dumps([q.qid, q.text, q.reasoning, q.current_reasoning]).encode()).hexdigest()[:16]


def set_results(work: Path, names: list[str], settings: dict[str, BM25Expansion | None], k: int = 100
                ) -> tuple[dict, dict, dict]:
    """``(sets, {label: {set: per-query nDCG@10 (tune and test)}}, {label: q/s over every search})``."""
    sets = build_sets(work, names)
    groups: dict[str, dict] = {}   # index name -> {"index": folder, "queries": {key: Query}}
    keys: dict[str, dict[str, str]] = {}   # set -> {qid: key}
    for n, es in sets.items():
        paths = es.write(work / "sets" / n)
        index = es.index_name or n
        group = groups.setdefault(index, {"index": build_indexes(work, index, es.corpus, {})["bm25"], "queries": {}})
        keep = set(es.tune) | set(es.test)
        keys[n] = {}
        for q in read_queries(paths["queries"]):
            if q.qid in keep:
                keys[n][q.qid] = _key(q)
                group["queries"][keys[n][q.qid]] = q
    cache = work / "grid" / "bm25"
    cache.mkdir(parents=True, exist_ok=True)
    results, speed = {}, {}
    for lab, expansion in settings.items():
        digest = hashlib.sha1((lab + "|" + ",".join(sorted(names))).encode()).hexdigest()[:16]
        path = cache / f"{digest}.json"
        if path.is_file():
            saved = json.loads(path.read_text())
            results[lab], speed[lab] = saved["results"], saved["qps"]
            continue
        scores: dict[str, float] = {}
        seconds, count = 0.0, 0
        for group in groups.values():
            base = BM25Searcher(group["index"]) if "searcher" not in group else group["searcher"]
            group["searcher"] = base
            searcher = base if expansion is None else BM25Searcher(base.index, expansion=expansion)
            # one search per distinct call (a qid may stand in two shapes): the key is its id for the search
            queries = [dataclasses.replace(q, qid=key) for key, q in group["queries"].items()]
            t0 = time.perf_counter()
            run = search_run(searcher, queries, k, reasoning_aware=expansion is not None)
            seconds, count = seconds + time.perf_counter() - t0, count + len(queries)
            group["run"] = {q.qid: run.get(q.qid, {}) for q in queries}
        results[lab] = {}
        for n, es in sets.items():
            group = groups[es.index_name or n]
            run = {qid: group["run"][key] for qid, key in keys[n].items()}
            per = evaluate_ndcg(run, es.qrels, es.tune + es.test).per_query
            results[lab][n] = {q: {"ndcg@10": v["ndcg@10"]} for q, v in per.items()}
        speed[lab] = count / seconds if seconds else 0.0
        write_json(path, {"label": lab, "results": results[lab], "qps": speed[lab]})
    return sets, results, speed


def _split(table: dict, qids: list[str]) -> dict:
    return {q: table[q] for q in qids}


def report(work: Path, names=SET_NAMES, settings=None) -> tuple[list[str], dict]:
    """The printed lines (the rule's report on the tune questions, the leading settings, the pick and the runner-up
    on every set's test questions) and the record of the pick."""
    settings = grid() if settings is None else settings
    names = list(names)
    sets, results, speed = set_results(work, names, settings)
    objective = [n for n in OBJECTIVE if n in sets]
    guards = [n for n in GUARDS if n in sets]
    tune = {lab: {n: _split(by[n], sets[n].tune) for n in objective + guards} for lab, by in results.items()}
    selection = select_default(tune, tune["plain"], objective, guards)
    out = selection.lines()
    mean = {lab: {n: sum(v["ndcg@10"] for v in t.values()) / len(t) for n, t in by.items()}
            for lab, by in tune.items()}
    cols = objective + guards
    out += ["", "tune nDCG@10 (delta against plain BM25), best objective first; x: disqualified by a guard",
            "| setting | objective | " + " | ".join(cols) + " | q/s |", "|---" * (len(cols) + 3) + "|"]
    for j in list(selection.judged.values()):
        lab = j.name
        out.append(f"| {'x ' if j.disqualified else ''}{lab} | {j.objective:.4f} | "
                   + " | ".join(f"{mean[lab][n]:.3f} ({mean[lab][n] - mean['plain'][n]:+.3f})" for n in cols)
                   + f" | {speed[lab]:.0f} |")
    out += ["", "test questions (held out): plain -> pick / runner-up, delta and paired randomisation p"]
    picks = [selection.pick.name] + ([selection.runner_up.name] if selection.runner_up else [])
    for n in sets:
        cells = []
        for lab in picks:
            c = compare_per_query(_split(results["plain"][n], sets[n].test), _split(results[lab][n], sets[n].test),
                                  "ndcg@10")
            cells.append(f"{c.mean_b:.4f} ({c.delta:+.4f}, p = {c.p_randomization:.3f})")
        role = "objective" if n in objective else "call-level, reported" if n in CALL_LEVEL else "guard"
        plain = sum(v["ndcg@10"] for v in _split(results["plain"][n], sets[n].test).values()) / len(sets[n].test)
        out.append(f"  {n} ({role}): plain {plain:.4f} -> " + " / ".join(cells))
    pick = settings[selection.pick.name]
    record = selection.record(expansion=None if pick is None else {
        "reasoning": str(pick.reasoning), "query_weight": pick.query_weight, "terms": pick.terms,
        "weight": pick.weight, "k3": pick.k3}, previous_default=label(DEFAULT_BM25_EXPANSION))
    return out, record
