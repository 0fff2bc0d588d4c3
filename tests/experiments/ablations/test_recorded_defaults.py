"""Every recorded reasoning default names the rule, the sets and the split it was chosen on, and they are today's:
the BM25 expansion's record, the fusion's record, the agent recipe's (and a trained model's) query-input record."""

from __future__ import annotations

from hopscotch.retriever.evaluation.selection import RULE
from hopscotch_experiments.agent_data.eval_sets import GUARDS, OBJECTIVE
from hopscotch_experiments.ablations.bm25_expansion_grid import grid, label

TODAY = RULE.format(metric="ndcg@10", objective=", ".join(OBJECTIVE), alpha=0.05, max_loss=0.01)


def _names_the_rule(record: dict) -> None:
    assert record["rule"] == TODAY
    assert record["objective_sets"] == list(OBJECTIVE) and record["guard_sets"] == list(GUARDS)
    assert record["split"] == "tune" and record["pick"] and record["runner_up"]


def test_the_bm25_expansion_default_is_its_records_pick():
    from hopscotch.retriever.searchers.bm25_expansion import DEFAULT_BM25_EXPANSION, DEFAULT_BM25_EXPANSION_CHOSEN

    _names_the_rule(DEFAULT_BM25_EXPANSION_CHOSEN)
    assert DEFAULT_BM25_EXPANSION_CHOSEN["pick"] == label(DEFAULT_BM25_EXPANSION)
    candidates = grid()
    assert DEFAULT_BM25_EXPANSION_CHOSEN["candidates"] == len(candidates)
    assert {DEFAULT_BM25_EXPANSION_CHOSEN["pick"], DEFAULT_BM25_EXPANSION_CHOSEN["runner_up"]} <= set(candidates)
