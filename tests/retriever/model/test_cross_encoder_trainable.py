"""The cross-encoder as the trainer sees it: pair features group after group (each query's side with its own
passages, in the collator's order), scores that do not depend on ``chunk_size`` (length-sorted sub-batches), and the
trainer's ``forward`` shape: ``(None, one logit per passage, temperature)``."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(scope="module")
def trainable(tiny_cross_encoder_dir):
    from hopscotch.retriever.model.config import EncoderConfig
    from hopscotch.retriever.model.cross_encoder import load_cross_encoder_model
    from hopscotch.retriever.model.cross_encoder_trainable import TrainableCrossEncoder

    model = TrainableCrossEncoder(load_cross_encoder_model(tiny_cross_encoder_dir, device="cpu"),
                                  EncoderConfig(temperature=1.0))
    return model.eval()


def test_pairs_come_group_after_group_in_the_collators_order(trainable):
    groups = [[("Gummo", "Gummo is a 1997 film."), ("Kids", "Kids is a 1995 film.")],
              [("", "Paris is the capital of France."), ("", "Lyon is a city."), ("", "Nice.")]]
    features = trainable.tokenize_groups(["who directed Gummo", "capital of France"], ["It came out in 1997.", None],
                                         groups)
    assert features["input_ids"].shape[0] == 5 and set(features) >= {"input_ids", "attention_mask"}
    ce = trainable.cross_encoder
    sides = ce.format_queries(["who directed Gummo", "capital of France"], ["It came out in 1997.", None])
    docs = ce.format_documents([d for g in groups for d in g])
    q, scores, t = trainable(queries=features)
    assert q is None and float(t) == pytest.approx(1.0) and scores.shape == (5,)
    want = ce.score([sides[0]] * 2 + [sides[1]] * 3, docs)
    assert scores.tolist() == pytest.approx(want, abs=1e-5)
    # the collator's mixture: one variant per query (None: the model's own)
    plain = trainable.tokenize_groups(["who directed Gummo"], ["It came out in 1997."], groups[:1], ["query", None][:1])
    text = trainable.tokenizer.decode(plain["input_ids"][0], skip_special_tokens=True)
    assert "reasoning" not in text and text.startswith("who directed gummo")


def test_chunked_scoring_equals_one_forward(trainable):
    rng = torch.Generator().manual_seed(0)
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa".split()
    docs = [" ".join(words[int(i)] for i in torch.randint(0, 10, (int(n),), generator=rng))
            for n in torch.randint(2, 30, (9,), generator=rng)]
    features = trainable.cross_encoder.features(["alpha beta"] * 9, docs)
    with torch.no_grad():
        whole = trainable.score(features)
        chunked = trainable.score(features, chunk_size=2)
    assert chunked.tolist() == pytest.approx(whole.tolist(), abs=1e-5)
    with pytest.raises(ValueError, match="passages= must be empty"):
        trainable(queries=features, passages=features)
