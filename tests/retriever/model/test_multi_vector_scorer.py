"""The late-interaction scorer the MaxSim reranker and the multi-vector index share: query encodings under the
query mix, per-query weights, MaxSim of each document's best window."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(scope="module")
def model(tiny_bert_dir):
    from hopscotch.retriever.model.multi_vector import build_multi_vector_model

    return build_multi_vector_model(tiny_bert_dir, dim=16, query_max_len=48, passage_max_len=32,
                                    query_augmentation=8, seed=0, device="cpu", late_fusion=0.25)


QUERIES = ["who directed Gummo", "capital of Peru"]
REASONINGS = ["The film came out in 1997 and I need its director.", None]


def _docs(model):
    return [[d] for d in model.encode_documents([(None, "Harmony Korine directed Gummo."), (None, "Lima, Peru.")])]


def test_the_recorded_weight_mixes_normalised_scores_of_every_query(model):
    from hopscotch.retriever.model.multi_vector import late_fusion_scores
    from hopscotch.retriever.model.multi_vector_scorer import MultiVectorScorer

    scorer = MultiVectorScorer(model, query_input="current_reasoning")  # a variant chosen keeps the model's mix
    assert scorer.late_fusion == 0.25
    pairs = scorer.query_vectors(QUERIES, REASONINGS, [True, False])
    assert pairs[0][1] is not pairs[0][0] and pairs[1][1] is pairs[1][0]   # a plain query: one encoding
    assert scorer.query_weights(REASONINGS, pairs) == [0.25, 0.25]          # mixed with itself (mix_plain)
    docs = _docs(model)
    flat = [d for ws in docs for d in ws]
    for (main, plain), w in zip(pairs, scorer.query_weights(REASONINGS, pairs)):
        assert scorer.scores(main, plain, docs, w) == late_fusion_scores(main, plain, flat, w).tolist()


def test_without_a_mix_a_query_scores_plain_maxsim_of_its_best_window(model):
    from hopscotch.retriever.model.multi_vector import maxsim
    from hopscotch.retriever.model.multi_vector_scorer import MultiVectorScorer
    from hopscotch.retriever.model.query_mix import QueryMix

    off = MultiVectorScorer(model)
    off.query_mix = QueryMix()  # as a model without a recorded weight
    (main, plain), = off.query_vectors(QUERIES[:1], REASONINGS[:1], [True])
    assert plain is None
    a, b = (w for ws in _docs(model) for w in ws)
    assert off.scores(main, None, [[a, b]]) == [pytest.approx(float(torch.max(maxsim(main, [a, b]))))]
    zero = MultiVectorScorer(model, mix=QueryMix(0.0))
    pairs = zero.query_vectors(QUERIES, REASONINGS, [True, True])
    assert zero.query_weights(REASONINGS, pairs) == [0.0, 0.0]

