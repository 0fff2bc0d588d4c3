"""Retrieval evaluation against qrels: nDCG@k, Recall@k, MRR@k, confidence intervals, paired tests.

Metrics are computed by ``pytrec_eval`` (trec_eval's C code). Names are lower case: ``ndcg@10``,
``recall@100``, ``mrr@10``, ``map@100``, ``p@10``. A query that has relevant documents but no line in
the run scores 0 (trec_eval's ``-c``); queries without a relevant document are not evaluated.

Example::

    result = evaluate(read_run("run.trec"), read_qrels("qrels.tsv"), ["ndcg@10", "recall@100"])
    result.mean["ndcg@10"], result.per_query["q1"]["recall@100"], result.ci95["ndcg@10"]
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from hopscotch.retriever.errors import UsageError

DEFAULT_METRICS = ("ndcg@10", "recall@10", "recall@100")
_METRIC_RE = re.compile(r"^(ndcg|recall|mrr|map|p|precision)@(\d+)$")


def parse_metric(name: str) -> tuple[str, int]:
    m = _METRIC_RE.match(name.strip().lower())
    if not m:
        raise UsageError(f"unknown metric {name!r}: use ndcg@k, recall@k, mrr@k, map@k or p@k")
    kind = "p" if m.group(1) == "precision" else m.group(1)
    return kind, int(m.group(2))


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


def compare_runs(a: EvalResult, b: EvalResult, metric: str, permutations: int = 10_000,
                 seed: int = 0) -> PairedComparison:
    """Paired comparison of two evaluated runs on their shared queries.

    Two-sided p-values from a paired randomisation (sign-flip) test and a paired t-test.
    ``delta`` is ``mean_b - mean_a``.
    """
    from scipy import stats

    qids = sorted(set(a.per_query) & set(b.per_query))
    if not qids:
        raise UsageError("the two runs share no evaluated query")
    xa = np.array([a.per_query[q][metric] for q in qids])
    xb = np.array([b.per_query[q][metric] for q in qids])
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


def format_table(rows: list[tuple[str, EvalResult]], metrics) -> str:
    """A plain-text table: one row per system, ``mean ± ci95`` per metric."""
    header = ["system"] + list(metrics)
    body = [[name] + [f"{r.mean[m]:.4f} ± {r.ci95[m]:.4f}" for m in metrics] for name, r in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(header, *body)]

    def line(cells) -> str:
        return "  ".join(str(c).ljust(w) for c, w in zip(cells, widths))

    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in body])
