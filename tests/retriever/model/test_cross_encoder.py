"""The cross-encoder model kind (``model.kind: cross_encoder``): a folder sentence-transformers' ``CrossEncoder(path)``
loads with Hopscotch's scores (its saved activation is the identity, so ``predict`` gives the very logits), the pair's
recorded cut (the reasoning from the left to ``query_max_len``, the document from the right to the rest of the pair,
exactly what sentence-transformers' own ``longest_first`` truncation does to such a pair), length-sorted scoring that
does not depend on the batch, and the folder refused where an encoder is expected."""

from __future__ import annotations

import json

import pytest

QUERY = "who directed Gummo"
LONG_REASONING = " ".join(f"step{i} the film came out in 1997 and I need its director" for i in range(40))
LONG_DOC = " ".join(f"word{i} Gummo is a film by Harmony Korine" for i in range(60))


@pytest.fixture(scope="module")
def model(tiny_cross_encoder_dir):
    from hopscotch.retriever.model.cross_encoder import load_cross_encoder_model

    return load_cross_encoder_model(tiny_cross_encoder_dir, device="cpu")


def _pairs(model):
    sides = model.format_queries([QUERY, QUERY, "capital of France", QUERY],
                                 [LONG_REASONING, "It came out in 1997.", None, None], reasoning_aware=[True, True, True, False])
    docs = [LONG_DOC, "Gummo is a 1997 film.", "Paris is the capital of France.", LONG_DOC[:300]]
    return sides, docs


def test_crossencoder_loads_the_folder_with_our_scores(tiny_cross_encoder_dir, model):
    import torch
    from sentence_transformers import CrossEncoder

    st = CrossEncoder(str(tiny_cross_encoder_dir), device="cpu")
    assert st.num_labels == 1 and isinstance(st.activation_fn, torch.nn.Identity)
    sides, docs = _pairs(model)
    ours = model.score(sides, docs)
    theirs = st.predict(list(zip(sides, docs)), batch_size=3)
    assert ours == pytest.approx([float(x) for x in theirs], abs=1e-5)
    # the documented activation: a sigmoid of the same logits (sentence-transformers' default for one label)
    probs = st.predict(list(zip(sides, docs)), activation_fn=torch.nn.Sigmoid())
    assert [float(p) for p in probs] == pytest.approx(torch.sigmoid(torch.tensor(ours)).tolist(), abs=1e-5)


def test_the_cut_keeps_the_query_the_reasoning_tail_and_the_document_head(model):
    tok, c = model.tokenizer, model.config
    sides, docs = _pairs(model)
    long_side = sides[0]
    assert long_side.startswith("Reasoning: ") and long_side.endswith(f"\n\nQuery: {QUERY}")
    assert "step39" in long_side and "step0 " not in long_side  # the tail survives, the start is cut
    assert len(tok(long_side)["input_ids"]) <= c.query_max_len
    assert sides[1] == f"Reasoning: It came out in 1997.\n\nQuery: {QUERY}"  # fits: the template itself
    assert sides[2] == f"Reasoning: Empty\n\nQuery: capital of France" and sides[3] == QUERY
    # sentence-transformers' longest_first on (query side, whole document) cuts only the document, from the right
    ids = tok(long_side, LONG_DOC, truncation="longest_first", max_length=c.max_length)["input_ids"]
    side_ids = tok(long_side)["input_ids"]
    doc_ids = tok(LONG_DOC, add_special_tokens=False)["input_ids"]
    assert len(ids) == c.max_length and ids[:len(side_ids)] == side_ids
    assert ids[len(side_ids):-1] == doc_ids[:c.max_length - len(side_ids) - 1]
    assert model.pair_lengths(sides, docs)[0] == c.max_length


def test_the_folder_records_the_pair_and_refuses_a_query_side_over_half(tiny_cross_encoder_dir):
    from hopscotch.retriever.errors import UsageError
    from hopscotch.retriever.model.config import saved_model_kind
    from hopscotch.retriever.model.cross_encoder import CrossEncoderConfig, is_cross_encoder_folder

    saved = json.loads((tiny_cross_encoder_dir / "hopscotch_config.json").read_text())
    assert saved == {"query_max_len": 24, "passage_max_len": 40, "instruction": "", "query_input": "reasoning",
                     "truncation": "reasoning_left_document_right", "kind": "cross_encoder"}
    about = json.loads((tiny_cross_encoder_dir / "config_sentence_transformers.json").read_text())
    assert about["activation_fn"] == "torch.nn.modules.linear.Identity" and about["model_type"] == "CrossEncoder"
    assert len(json.loads((tiny_cross_encoder_dir / "config.json").read_text())["id2label"]) == 1  # num_labels 1
    assert saved_model_kind(tiny_cross_encoder_dir) == "cross_encoder" and is_cross_encoder_folder(tiny_cross_encoder_dir)
    with pytest.raises(UsageError, match="query_max_len=300 exceeds model.passage_max_len=200"):
        CrossEncoderConfig(query_max_len=300, passage_max_len=200)


def test_scores_do_not_depend_on_the_batch(model):
    sides, docs = _pairs(model)
    one = model.score(sides, docs, batch_size=1)
    assert model.score(sides, docs, batch_size=32) == pytest.approx(one, abs=1e-5)
    assert model.score(sides[::-1], docs[::-1], batch_size=2) == pytest.approx(one[::-1], abs=1e-5)
    assert model.score([], []) == []


def test_a_plain_crossencoder_folder_reads_queries_alone(tiny_cross_encoder_dir, tmp_path):
    import shutil

    from hopscotch.retriever.model.cross_encoder import load_cross_encoder_model

    plain = tmp_path / "plain"
    shutil.copytree(tiny_cross_encoder_dir, plain)
    (plain / "hopscotch_config.json").unlink()
    loaded = load_cross_encoder_model(plain, device="cpu")
    assert loaded.config.query_input == "query" and loaded.config.max_length == 64
    assert loaded.format_queries([QUERY], [LONG_REASONING]) == [QUERY]


def test_a_cross_encoder_is_not_an_encoder(tiny_cross_encoder_dir, tiny_bert_dir):
    from hopscotch.retriever.errors import UsageError
    from hopscotch.retriever.model.config import model_settings, read_saved_config, refuse_multi_vector
    from hopscotch.retriever.model.cross_encoder import load_cross_encoder_model

    for check in (refuse_multi_vector, read_saved_config, model_settings):
        with pytest.raises(UsageError, match="a cross-encoder .reranker. model, not an encoder"):
            check(tiny_cross_encoder_dir)
    with pytest.raises(UsageError, match="not a cross-encoder"):
        load_cross_encoder_model(tiny_bert_dir)
