"""Reasoning perturbation audit: does a "reasoning-aware" searcher use the reasoning?

The same search calls (reasoning-aware, as ``hopscotch search --reasoning``) are run under five conditions of
each query's reasoning:

* ``given``: as it is (the query's reasoning, its other context fields included);
* ``dropped``: none (the template says ``Reasoning: Empty``; the other context fields go too);
* ``truncated``: its last ``N`` words (default: the last half of its words, rounded up);
* ``shuffled``: its sentences in a seeded random order, one per line (split after ``.``, ``!``, ``?`` and at line
  breaks);
* ``swapped``: the whole context of a query of *another question*: questions (a query id's part before
  ``_turn<N>``, or a ``question_id`` field) are put in a seeded random cycle and each takes its successor's
  reasonings, so no query keeps its own question's reasoning (a derangement over questions).

Truncation and shuffling change ``reasoning`` and ``current_reasoning`` and keep ``prior_queries`` and
``prior_results``. Each condition's run is scored (``ndcg@10`` by default, with its 95% CI) and compared with
``given`` by a paired randomisation test (:func:`~hopscotch.retriever.evaluation.metrics.compare_runs`).

Verdict: when swapping the reasoning does not lower the metric significantly (delta >= 0 or p >= ``alpha``),
the report says the model ignores the reasoning (``warning``); otherwise ``ok``.

Example (not run: it needs an index and labelled queries)::

    searcher = build_searcher("dense", index="idx", model="out/final")
    report = audit_perturbation(searcher, list(read_queries("q.jsonl")), read_qrels("qrels.tsv"))
    report.details["conditions"]["swapped"]["delta"]
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import replace

from hopscotch.retriever.audit.report import AuditReport
from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.evaluation.metrics import compare_runs, evaluate, parse_metric
from hopscotch.retriever.io.queries import Query
from hopscotch.retriever.model.query_input import as_context

CONDITIONS = ("given", "dropped", "truncated", "shuffled", "swapped")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\s*\n+\s*")
_TURN = re.compile(r"_turn\d+$")


def question_key(query) -> str:
    """The question a query belongs to: its ``question_id`` field, else its id without a ``_turn<N>`` tail."""
    given = (getattr(query, "extra", None) or {}).get("question_id")
    return str(given) if given is not None else _TURN.sub("", query.qid)


def last_words(text: str | None, n: int | None) -> str | None:
    """The last ``n`` words of ``text`` (``n`` None: the last half, rounded up)."""
    if not text:
        return text
    words = text.split()
    keep = math.ceil(len(words) / 2) if n is None else n
    return " ".join(words[-keep:]) if keep else ""


def sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE_END.split(text) if s.strip()]


def shuffled_sentences(text: str | None, rng: random.Random) -> str | None:
    """``text``'s sentences in a random order, one per line (one sentence: unchanged)."""
    if not text:
        return text
    parts = sentences(text)
    if len(parts) < 2:
        return text
    rng.shuffle(parts)
    return "\n".join(parts)


def _edited(query: Query, edit: Callable[[str | None], str | None]) -> Query:
    """``query`` searched reasoning-aware with ``edit`` applied to its reasoning and current reasoning."""
    return replace(query, reasoning=edit(query.reasoning), current_reasoning=edit(query.current_reasoning),
                   reasoning_aware=True)


def _with_context_of(query: Query, donor: Query) -> Query:
    """``query`` searched reasoning-aware with ``donor``'s whole context."""
    return replace(query, reasoning=donor.reasoning, current_reasoning=donor.current_reasoning,
                   prior_queries=donor.prior_queries, prior_results=donor.prior_results, reasoning_aware=True)


def swap_partners(queries: Sequence, seed: int) -> list[int]:
    """For each query, the index of the query whose context it takes under ``swapped``: questions in a seeded
    random cycle, each query of a question taking one of the next question's queries (in turn). Needs two questions."""
    groups: dict[str, list[int]] = {}
    for i, q in enumerate(queries):
        groups.setdefault(question_key(q), []).append(i)
    if len(groups) < 2:
        raise UsageError("the swapped condition needs queries of at least two questions")
    order = list(groups)
    random.Random(f"{seed}:swap").shuffle(order)
    partner = [0] * len(queries)
    for g, name in enumerate(order):
        donors = groups[order[(g + 1) % len(order)]]
        for j, i in enumerate(groups[name]):
            partner[i] = donors[j % len(donors)]
    return partner


def perturbed_queries(queries: Sequence[Query], condition: str, seed: int = 13, truncate_words: int | None = None
                      ) -> list[Query]:
    """Each query as it is searched (reasoning-aware) under ``condition``: its text with the context the condition
    gives it."""
    if condition == "given":
        return [q.with_reasoning() for q in queries]
    if condition == "dropped":
        return [Query(q.text, qid=q.qid, extra=q.extra, reasoning_aware=True) for q in queries]
    if condition == "truncated":
        return [_edited(q, lambda t: last_words(t, truncate_words)) for q in queries]
    if condition == "shuffled":
        return [_edited(q, lambda t, q=q: shuffled_sentences(t, random.Random(f"{seed}:{q.qid}"))) for q in queries]
    if condition == "swapped":
        return [_with_context_of(q, queries[j]) for q, j in zip(queries, swap_partners(queries, seed))]
    raise ValueError(f"unknown condition {condition!r}: use one of {CONDITIONS}")


def search_condition(searcher, queries: Sequence[Query], k: int, batch_size: int = 64) -> dict[str, dict[str, float]]:
    """A run ``{qid: {docid: score}}`` of the (perturbed) queries, ``batch_size`` a ``search_batch`` call."""
    run: dict[str, dict[str, float]] = {}
    for start in range(0, len(queries), batch_size):
        chunk = queries[start:start + batch_size]
        run.update({q.qid: dict(h) for q, h in zip(chunk, searcher.search_batch(chunk, k))})
    return run


def _top(run: dict, qid: str, n: int) -> list[str]:
    return [d for d, _ in sorted(run.get(qid, {}).items(), key=lambda kv: (-kv[1], kv[0]))[:n]]


def searcher_settings(searcher) -> dict:
    """What decides whether the searcher reads the reasoning: its query input variant and query mix."""
    first = getattr(searcher, "first", searcher)
    dense = getattr(first, "dense", first)
    out = {"searcher": getattr(searcher, "name", type(searcher).__name__)}
    for name in ("query_input", "late_fusion", "late_fusion_max_words", "takes_reasoning"):
        value = getattr(dense, name, None)
        if value is not None:
            out[name] = value if isinstance(value, (bool, int, float)) else str(value)
    return out


def audit_perturbation(searcher, queries: Sequence, qrels: dict, *, metric: str = "ndcg@10", k: int | None = None,
                       seed: int = 13, truncate_words: int | None = None, alpha: float = 0.05,
                       permutations: int = 10_000, batch_size: int = 64,
                       log: Callable[[str], None] | None = None) -> AuditReport:
    """Run the five conditions over the judged ``queries`` and report (see the module doc)."""
    _, cutoff = parse_metric(metric)
    k = k or cutoff
    judged = {q: d for q, d in qrels.items() if any(g > 0 for g in d.values())}
    queries = [q for q in queries if q.qid in judged]
    if len(queries) < 2:
        raise UsageError(f"the perturbation audit needs at least two queries with relevant documents in the qrels "
                         f"({len(queries)} found)")
    qrels = {q.qid: judged[q.qid] for q in queries}
    with_reasoning = sum(bool(as_context(q).reasoning) for q in queries)
    if not with_reasoning:
        raise UsageError("no query has a 'reasoning' field: nothing to perturb")
    runs, results = {}, {}
    for condition in CONDITIONS:
        if log:
            log(f"searching {len(queries)} queries, reasoning {condition}")
        runs[condition] = search_condition(searcher, perturbed_queries(queries, condition, seed, truncate_words), k,
                                           batch_size)
        results[condition] = evaluate(runs[condition], qrels, [metric])
    rows = {}
    for condition in CONDITIONS:
        res = results[condition]
        row = {"mean": round(res.mean[metric], 4), "ci95": round(res.ci95[metric], 4),
               "changed_rankings": round(sum(_top(runs[condition], q.qid, cutoff) != _top(runs["given"], q.qid, cutoff)
                                             for q in queries) / len(queries), 4)}
        if condition != "given":
            cmp = compare_runs(results["given"], res, metric, permutations, seed)
            row.update(delta=round(cmp.delta, 4), p=round(cmp.p_randomization, 4), p_ttest=round(cmp.p_ttest, 4))
        rows[condition] = row
    settings = searcher_settings(searcher)
    swapped = rows["swapped"]
    ignores = swapped["delta"] >= 0 or swapped["p"] >= alpha
    summary = [f"{len(queries)} judged queries ({with_reasoning} with a reasoning), searcher {settings['searcher']}"
               + (f", query input {settings['query_input']}" if "query_input" in settings else "")
               + (f", query mix {settings['late_fusion']:g}" if isinstance(settings.get("late_fusion"), float) else ""),
               f"{'reasoning':<11}{metric:>9}{'95% CI':>9}{'delta':>9}{'p':>8}{'changed':>9}"]
    for condition, row in rows.items():
        delta = f"{row['delta']:>+9.4f}{row['p']:>8.4f}" if "delta" in row else f"{'':>9}{'':>8}"
        summary.append(f"{condition:<11}{row['mean']:>9.4f}{'±' + format(row['ci95'], '.4f'):>9}{delta}"
                       f"{row['changed_rankings']:>9.1%}")
    notes = []
    limit = settings.get("late_fusion_max_words")
    if isinstance(limit, int):
        longer = sum(len((q.reasoning or "").split()) > limit for q in queries)
        if longer:
            notes.append(f"{longer} of {len(queries)} reasonings are longer than the model's late_fusion_max_words "
                         f"({limit}): those queries are searched with the query alone")
    if ignores:
        notes.append(f"The model ignores the reasoning: swapping it for another question's reasoning does not lower "
                     f"{metric} significantly (delta {swapped['delta']:+.4f}, p {swapped['p']:.4f}).")
    else:
        notes.append(f"The model uses the reasoning: swapping it for another question's lowers {metric} by "
                     f"{-swapped['delta']:.4f} (p {swapped['p']:.4f}).")
    dropped = rows["dropped"]
    if dropped["delta"] > 0 and dropped["p"] < alpha:
        notes.append(f"Dropping the reasoning raises {metric} (+{dropped['delta']:.4f}): the reasoning hurts here.")
    if all(row["changed_rankings"] == 0 for row in rows.values()):
        notes.append("No perturbation changed any top-10 ranking: the reasoning never reaches the ranking.")
    details = {"settings": {**settings, "metric": metric, "k": k, "seed": seed, "alpha": alpha,
                            "truncate_words": truncate_words if truncate_words is not None else "half",
                            "queries": len(queries), "with_reasoning": with_reasoning},
               "conditions": rows, "ignores_reasoning": ignores, "notes": notes,
               "per_query": {c: {q: v[metric] for q, v in results[c].per_query.items()} for c in CONDITIONS}}
    return AuditReport("perturbation", "warning" if ignores else "ok", summary + notes, details)
