"""Retrieval evaluation against qrels: nDCG@k, Recall@k, MRR@k, confidence intervals, paired tests.

Metrics are computed by ``pytrec_eval`` (trec_eval's C code). Names are lower case: ``ndcg@10``,
``recall@100``, ``mrr@10``, ``map@100``, ``p@10``. A query that has relevant documents but no line in
the run scores 0 (trec_eval's ``-c``); queries without a relevant document are not evaluated.

A run and qrels are what ``read_run("run.trec")`` and ``read_qrels("qrels.tsv")`` return:

>>> run = {"q1": {"d1": 2.0, "d2": 1.0}, "q2": {"d3": 1.0, "d4": 0.5}}
>>> qrels = {"q1": {"d1": 1}, "q2": {"d4": 1}}
>>> result = evaluate(run, qrels, ["ndcg@10", "recall@100"])
>>> round(result.mean["ndcg@10"], 4), result.per_query["q2"]["recall@100"], round(result.ci95["ndcg@10"], 4)
(0.8155, 1.0, 2.3447)
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from hopscotch.retriever.errors import UsageError

DEFAULT_METRICS = ("ndcg@10", "recall@10", "recall@100")
_METRIC_RE = re.compile(r"(ndcg|recall|mrr|map|p|precision)@([0-9]+)")
#: the largest cutoff: trec_eval keeps cutoffs in a C int
MAX_CUTOFF = 2**31 - 1


def parse_metric(name: str) -> tuple[str, int]:
    """``(kind, k)`` of a metric name such as ``ndcg@10`` (kinds ``ndcg``, ``recall``, ``mrr``, ``map``, ``p``
    with its alias ``precision``; case and surrounding spaces ignored); the cutoff ``k`` is a whole number
    from 1 to :data:`MAX_CUTOFF`. Anything else is a :class:`UsageError` (``ndcg@0`` would abort trec_eval)."""
    m = _METRIC_RE.fullmatch(str(name).strip().lower())
    if not m:
        raise UsageError(f"unknown metric {str(name)[:60]!r}: use ndcg@k, recall@k, mrr@k, map@k or p@k")
    k = int(m.group(2))
    if not 1 <= k <= MAX_CUTOFF:
        raise UsageError(f"metric {str(name).strip()!r}: the cutoff k must be a whole number from 1 to {MAX_CUTOFF:,}")
    kind = "p" if m.group(1) == "precision" else m.group(1)
    return kind, k


def parse_metric_list(text: str) -> list[str]:
    """A comma-separated list of metric names (``"ndcg@10, recall@100"``) as lower-case names, each checked by
    :func:`parse_metric`, empty items and repeats dropped; a list naming no metric is a :class:`UsageError`."""
    names = [part.strip().lower() for part in str(text).split(",") if part.strip()]
    if not names:
        raise UsageError(f"no metric named in {str(text)[:60]!r}: use e.g. ndcg@10,recall@100")
    for name in names:
        parse_metric(name)
    return list(dict.fromkeys(names))


def _truncate(run: dict[str, dict[str, float]], k: int) -> dict[str, dict[str, float]]:
    out = {}
    for qid, docs in run.items():
        top = sorted(docs.items(), key=lambda kv: (-kv[1], kv[0]))[:k]
        out[qid] = dict(top)
    return out


@dataclass
class EvalResult:
    """Per-query and mean metrics, with the half-width of a 95% t-interval around each mean."""

    metrics: list[str]
    per_query: dict[str, dict[str, float]]
    mean: dict[str, float]
    ci95: dict[str, float]

    def to_json(self) -> dict:
        return {"metrics": dict(self.mean), "ci95": dict(self.ci95), "num_queries": len(self.per_query),
                "per_query": self.per_query}


def _ci95(values: np.ndarray) -> float:
    if len(values) < 2:
        return 0.0
    from scipy import stats

    return float(stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / math.sqrt(len(values)))


def evaluate(run: dict[str, dict[str, float]], qrels: dict[str, dict[str, int]],
             metrics=DEFAULT_METRICS, relevance_level: int = 1) -> EvalResult:
    """Score ``run`` against ``qrels`` with pytrec_eval."""
    import pytrec_eval

    metrics = [m.strip().lower() for m in metrics]
    judged = {q: d for q, d in qrels.items() if any(g >= relevance_level for g in d.values())}
    if not judged:
        raise UsageError("the qrels hold no relevant document")
    per_query: dict[str, dict[str, float]] = {q: {} for q in judged}
    for name in metrics:
        kind, k = parse_metric(name)
        if kind == "ndcg":
            measure, key, sub = f"ndcg_cut.{k}", f"ndcg_cut_{k}", run
        elif kind == "recall":
            measure, key, sub = f"recall.{k}", f"recall_{k}", run
        elif kind == "p":
            measure, key, sub = f"P.{k}", f"P_{k}", run
        elif kind == "mrr":
            measure, key, sub = "recip_rank", "recip_rank", _truncate(run, k)
        else:  # map@k
            measure, key, sub = "map", "map", _truncate(run, k)
        evaluator = pytrec_eval.RelevanceEvaluator(judged, {measure}, relevance_level=relevance_level)
        scores = evaluator.evaluate({q: d for q, d in sub.items() if q in judged})
        for q in judged:
            per_query[q][name] = float(scores[q][key]) if q in scores else 0.0
    mean, ci = {}, {}
    for name in metrics:
        vals = np.array([per_query[q][name] for q in judged])
        mean[name] = float(vals.mean())
        ci[name] = _ci95(vals)
    return EvalResult(metrics, per_query, mean, ci)


@dataclass
class PairedComparison:
    metric: str
    mean_a: float
    mean_b: float
    delta: float
    p_randomization: float
    p_ttest: float
    num_queries: int


def compare_per_query(a: dict[str, dict[str, float]], b: dict[str, dict[str, float]], metric: str,
                      permutations: int = 10_000, seed: int = 0) -> PairedComparison:
    """Paired comparison of two ``{qid: {metric: value}}`` tables on the queries both hold.

    Two-sided p-values from a paired randomisation (sign-flip) test and a paired t-test;
    ``delta`` is ``mean_b - mean_a``. A shared query without ``metric`` is a :class:`UsageError`.
    """
    from scipy import stats

    qids = sorted(set(a) & set(b))
    if not qids:
        raise UsageError("the two results share no evaluated query")
    for name, table in (("first", a), ("second", b)):
        missing = [q for q in qids if not isinstance(table[q].get(metric), (int, float))]
        if missing:
            raise UsageError(f"the {name} result has no numeric {metric!r} for query {missing[0]!r} "
                             f"({len(missing)} queries)")
    xa = np.array([a[q][metric] for q in qids], dtype=float)
    xb = np.array([b[q][metric] for q in qids], dtype=float)
    diff = xb - xa
    observed = abs(diff.mean())
    rng = np.random.default_rng(seed)
    signs = rng.choice([-1.0, 1.0], size=(permutations, len(diff)))
    null = np.abs((signs * diff).mean(axis=1))
    p_rand = float((np.sum(null >= observed - 1e-12) + 1) / (permutations + 1))
    if np.allclose(diff, diff[0]):
        p_t = 1.0 if diff[0] == 0 else 0.0
    else:
        p_t = float(stats.ttest_rel(xb, xa).pvalue)
    return PairedComparison(metric, float(xa.mean()), float(xb.mean()), float(diff.mean()), p_rand, p_t,
                            len(qids))


def compare_runs(a: EvalResult, b: EvalResult, metric: str, permutations: int = 10_000,
                 seed: int = 0) -> PairedComparison:
    """Paired comparison of two evaluated runs on their shared queries (:func:`compare_per_query`)."""
    return compare_per_query(a.per_query, b.per_query, metric, permutations, seed)


MIN_QUERY_OVERLAP = 0.05
#: the least share of the judged queries a run must answer (``tune-fusion``, ``compare``: ``--min-coverage``)
MIN_COVERAGE = 0.9


def check_coverage(name: str, answered: int, judged: int, min_coverage: float = MIN_COVERAGE,
                   flag: str = "--min-coverage") -> float:
    """The one coverage rule: ``answered / judged`` (the share of the judged queries a run answers), or a
    :class:`UsageError` naming ``name`` when it is below ``min_coverage``: scores over queries a run never
    answered are zeros of a mix-up (another query set, a partial run), not of retrieval."""
    share = answered / judged if judged else 0.0
    if share < min_coverage:
        raise UsageError(f"{name}: answers {answered} of the {judged} judged queries (coverage {share:.2f} < "
                         f"{flag} {min_coverage:g}): a run of other queries or a partial run; lower {flag} to "
                         "score it anyway (a missing query scores 0)")
    return share


@dataclass
class RunCoverage:
    """How a run meets its qrels: shared queries, and whether its docids are those of the qrels at all.

    The docid check (:attr:`docids_disjoint`): of the *evaluated queries the run answers*, fewer than
    :data:`MIN_QUERY_OVERLAP` (5%) retrieved even one docid that occurs anywhere in the qrels (any
    query, any grade), or the run answers none of them. Counted per query, not per docid: a deep run
    over sparse qrels legitimately retrieves mostly unjudged documents (1,000 per query against one
    judged each), but a run in the qrels' docid space almost always reaches some judged document for
    most queries, while a second spelling of the docids or another corpus reaches none.
    """

    evaluated: int  # qrels queries with a relevant document
    missing_from_run: list[str]  # evaluated queries without a run line (they score 0)
    not_evaluated: list[str]  # run queries without a relevant document in the qrels (ignored)
    answered: int  # evaluated queries the run answers
    touching: int  # of those, queries that retrieved some docid known to the qrels
    retrieved: int  # distinct docids retrieved for the answered queries
    retrieved_judged: int  # of those, docids known to the qrels
    example_run_docid: str | None = None
    example_qrels_docid: str | None = None

    @property
    def docids_disjoint(self) -> bool:
        return self.evaluated > 0 and (self.answered == 0 or self.touching < MIN_QUERY_OVERLAP * self.answered)

    def check(self, name: str, min_coverage: float = MIN_COVERAGE, flag: str = "--min-coverage") -> float:
        """:func:`check_coverage` of this run: its share of the judged queries, or a UsageError below the minimum."""
        return check_coverage(name, self.answered, self.evaluated, min_coverage, flag)

    def overlap_message(self, name: str) -> str:
        return (f"{name}: only {self.touching} of the {self.answered} evaluated queries it answers retrieved any "
                f"docid of the qrels ({self.retrieved_judged} of {self.retrieved} distinct docids are judged; "
                f"run e.g. {self.example_run_docid!r}, qrels e.g. {self.example_qrels_docid!r}): the run and "
                "qrels likely use different docid spellings or corpora")

    def warnings(self, name: str) -> list[str]:
        """One line per problem: the docid overlap, then missing queries either side."""
        out = [self.overlap_message(name)] if self.docids_disjoint else []
        if self.missing_from_run:
            out.append(f"{name}: {len(self.missing_from_run)} of {self.evaluated} qrels queries have no line "
                       f"in the run (scored 0), e.g. {self.missing_from_run[:3]}")
        if self.not_evaluated:
            out.append(f"{name}: {len(self.not_evaluated)} run queries have no relevant document in the qrels "
                       f"(not evaluated), e.g. {self.not_evaluated[:3]}")
        return out


def run_coverage(run: dict[str, dict[str, float]], qrels: dict[str, dict[str, int]],
                 relevance_level: int = 1) -> RunCoverage:
    """Measure how ``run`` meets ``qrels`` (see :class:`RunCoverage`); the queries :func:`evaluate` scores."""
    judged = {q for q, d in qrels.items() if any(g >= relevance_level for g in d.values())}
    known = {d for docs in qrels.values() for d in docs}
    answered = [q for q in sorted(judged) if run.get(q)]
    retrieved = {d for q in answered for d in run[q]}
    return RunCoverage(
        evaluated=len(judged),
        missing_from_run=[q for q in sorted(judged) if not run.get(q)],
        not_evaluated=[q for q in sorted(run) if q not in judged],
        answered=len(answered),
        touching=sum(1 for q in answered if not known.isdisjoint(run[q])),
        retrieved=len(retrieved), retrieved_judged=len(retrieved & known),
        example_run_docid=min(retrieved) if retrieved else None,
        example_qrels_docid=min(known) if known else None)


def format_table(rows: list[tuple[str, EvalResult]], metrics) -> str:
    """A plain-text table: one row per system, ``mean ± ci95`` per metric."""
    header = ["system"] + list(metrics)
    body = [[name] + [f"{r.mean[m]:.4f} ± {r.ci95[m]:.4f}" for m in metrics] for name, r in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(header, *body)]

    def line(cells) -> str:
        return "  ".join(str(c).ljust(w) for c, w in zip(cells, widths))

    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in body])
