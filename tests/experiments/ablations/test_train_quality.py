"""The trainer's quality check (:mod:`hopscotch_experiments.ablations.train_quality`): its qrels and, on the shared
data, its split (the agent splits' HotpotQA/IRCoT questions) and step queries."""

from __future__ import annotations

import pytest

from hopscotch_experiments.ablations import train_quality


def test_qrels_for_gives_each_step_its_questions_gold_paragraphs():
    queries = [{"_id": "q1_step0", "question": "q1"}, {"_id": "q1_step1", "question": "q1"},
               {"_id": "q2_step0", "question": "q2"}]
    gold = {"q1": {"d1": 1, "d2": 1}, "q2": {"d3": 2}}
    assert train_quality.qrels_for(queries, gold) == (
        "query-id\tcorpus-id\tscore\nq1_step0\td1\t1\nq1_step0\td2\t1\nq1_step1\td1\t1\nq1_step1\td2\t1\n"
        "q2_step0\td3\t2\n")


@pytest.mark.shared_data
def test_split_and_step_queries_on_the_shared_data(shared_data, monkeypatch):
    monkeypatch.setenv("HOPSCOTCH_DATA", str(shared_data))
    train, dev, test = train_quality.split_questions()
    assert (len(train), len(dev), len(test)) == (380, 20, 100) and not set(train) & (set(dev) | set(test))
    steps = train_quality.step_queries(dev[:2])
    assert steps and {s["question"] for s in steps} <= set(dev[:2])
    assert all(s["reasoning"] is None or s["reasoning"].strip() for s in steps)
    assert all(s["_id"].startswith(f"{s['question']}_step") and s["text"] for s in steps)


def test_prefixes_are_evaluated_on_cut_and_renormalised_vectors():
    """``_at_prefixes`` (over ``_prefixes``) scores the full vectors under ``key`` and each prefix under ``(*key, dim)``: a query
    that matches its document only in the first 4 dimensions finds it at @4 as well as in full, and one that
    matches only past dimension 4 loses it at @4."""
    import numpy as np

    from hopscotch.retriever.io.corpus import Document

    docs = [Document(f"d{i}", "", "") for i in range(3)]
    doc_emb = np.zeros((3, 8), np.float32)
    doc_emb[0, 0] = doc_emb[1, 1] = 1.0
    doc_emb[2, :] = [0.1, 0.1, 0, 0, 1, 0, 0, 0]
    q_emb = np.zeros((2, 8), np.float32)
    q_emb[0, 0] = 1.0       # wants d0: its match lives in the first 4 dimensions
    q_emb[1, 1], q_emb[1, 4] = 0.3, 1.0   # wants d2: its match lives past dimension 4 (d1 wins at @4)
    queries = [{"_id": "a"}, {"_id": "b"}]
    qrels = {"a": {"d0": 1}, "b": {"d2": 1}}
    out = train_quality._at_prefixes(("steps", "reasoning"), train_quality._prefixes(q_emb, (4,)),
                                     train_quality._prefixes(doc_emb, (4,)), docs, queries, qrels)
    assert set(out) == {("steps", "reasoning"), ("steps", "reasoning", 4)}
    assert out[("steps", "reasoning")].per_query["a"]["ndcg@10"] == 1.0
    assert out[("steps", "reasoning")].per_query["b"]["ndcg@10"] == 1.0
    assert out[("steps", "reasoning", 4)].per_query["a"]["ndcg@10"] == 1.0
    assert out[("steps", "reasoning", 4)].per_query["b"]["ndcg@10"] < 1.0
