"""Metrics on hand-computed cases, confidence intervals and paired comparisons."""

from __future__ import annotations

import math

import pytest

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.evaluation.metrics import compare_runs, evaluate, parse_metric


def test_hand_computed_ndcg_recall_mrr():
    # q1: relevant d1 (grade 1) and d3 (grade 2); ranking d2, d1, d3, d4
    qrels = {"q1": {"d1": 1, "d3": 2}}
    run = {"q1": {"d2": 4.0, "d1": 3.0, "d3": 2.0, "d4": 1.0}}
    r = evaluate(run, qrels, ["ndcg@10", "ndcg@2", "recall@2", "recall@10", "mrr@10", "mrr@1"])
    dcg = 1 / math.log2(3) + 3 / math.log2(4)          # gains 2^rel - 1 (trec_eval uses rel directly: 1, 2)
    dcg_trec = 1 / math.log2(3) + 2 / math.log2(4)
    idcg_trec = 2 / math.log2(2) + 1 / math.log2(3)
    assert r.mean["ndcg@10"] == pytest.approx(dcg_trec / idcg_trec, abs=1e-6)
    assert r.mean["ndcg@10"] != pytest.approx(dcg / (3 + 1 / math.log2(3)), abs=1e-3)
    assert r.mean["ndcg@2"] == pytest.approx((1 / math.log2(3)) / idcg_trec, abs=1e-6)
    assert r.mean["recall@2"] == pytest.approx(0.5)
    assert r.mean["recall@10"] == pytest.approx(1.0)
    assert r.mean["mrr@10"] == pytest.approx(0.5)
    assert r.mean["mrr@1"] == pytest.approx(0.0)


def test_missing_query_scores_zero_and_unjudged_query_ignored():
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 0}}
    run = {"q1": {"a": 1.0}, "q9": {"z": 1.0}}
    r = evaluate(run, qrels, ["recall@10"])
    assert set(r.per_query) == {"q1", "q2"}
    assert r.mean["recall@10"] == pytest.approx(0.5)


def test_ci95_half_width():
    qrels = {f"q{i}": {"a": 1} for i in range(4)}
    run = {"q0": {"a": 1.0}, "q1": {"a": 1.0}, "q2": {"b": 1.0}, "q3": {"b": 1.0}}
    r = evaluate(run, qrels, ["recall@10"])
    from scipy import stats

    assert r.ci95["recall@10"] == pytest.approx(stats.t.ppf(0.975, 3) * 0.5773502691896258 / 2, rel=1e-6)


def test_paired_comparison_detects_a_consistent_gain():
    qrels = {f"q{i}": {"a": 1} for i in range(30)}
    worse = {q: {"x": 2.0, "a": 1.0} for q in qrels}      # relevant at rank 2
    better = {q: {"a": 2.0, "x": 1.0} for q in qrels}     # relevant at rank 1
    a, b = evaluate(worse, qrels, ["mrr@10"]), evaluate(better, qrels, ["mrr@10"])
    c = compare_runs(a, b, "mrr@10")
    assert c.delta == pytest.approx(0.5) and c.p_randomization < 0.001 and c.p_ttest < 0.001
    same = compare_runs(a, a, "mrr@10")
    assert same.delta == 0 and same.p_randomization == 1.0 and same.p_ttest == 1.0


def test_cross_check_with_ir_measures_style_definition():
    """Recall@k and MRR@k recomputed by hand over many random queries equal pytrec_eval's."""
    import random

    rng = random.Random(0)
    qrels, run = {}, {}
    for i in range(50):
        docs = [f"d{j}" for j in range(20)]
        rel = set(rng.sample(docs, rng.randint(1, 4)))
        qrels[f"q{i}"] = {d: 1 for d in rel}
        run[f"q{i}"] = {d: rng.random() for d in docs}
    r = evaluate(run, qrels, ["recall@5", "mrr@10"])
    for q, docs in run.items():
        ranking = [d for d, _ in sorted(docs.items(), key=lambda kv: -kv[1])]
        rel = qrels[q]
        assert r.per_query[q]["recall@5"] == pytest.approx(len(set(ranking[:5]) & set(rel)) / len(rel))
        rr = next((1 / (i + 1) for i, d in enumerate(ranking[:10]) if d in rel), 0.0)
        assert r.per_query[q]["mrr@10"] == pytest.approx(rr)


def test_bad_metric_name():
    with pytest.raises(UsageError, match="unknown metric"):
        parse_metric("bleu@4")
