"""The multi-vector (ColBERT-style) model: a real sentence-transformers MultiVectorEncoder whose saved folder
loads unchanged and encodes as Hopscotch does; projection, normalisation, markers, skiplist, [MASK]
augmentation, left-cut reasoning, MaxSim and its late fusion."""

from __future__ import annotations

import json

import pytest
import torch

from hopscotch.retriever.errors import UsageError

QUERIES = ["who directed Gummo?", "where is Xenia", "q"]
REASONINGS = ["The film was shot in Nashville. " * 20 + "It was set in Xenia, Ohio.", None, "short, (really) short."]
DOCS = [("Gummo", "Gummo is a 1997 American experimental drama film, written and directed by Harmony Korine."),
        ("", "short!"), "Xenia, Ohio; a city -- in Greene County... " * 12]


@pytest.fixture(scope="module")
def saved(tiny_bert_dir, tmp_path_factory):
    """A tiny multi-vector model (dim 16, queries 48 tokens padded to 16, documents 64) and its saved folder."""
    from hopscotch.retriever.model.multi_vector import build_multi_vector_model

    model = build_multi_vector_model(tiny_bert_dir, dim=16, query_max_len=48, passage_max_len=64,
                                     query_augmentation=16, instruction="Find: ", late_fusion=0.25, device="cpu")
    path = tmp_path_factory.mktemp("mv") / "model"
    model.save(path)
    return model, path


def st_load(path):
    from sentence_transformers import MultiVectorEncoder

    return MultiVectorEncoder(str(path), device="cpu", local_files_only=True)


def assert_same(ours, theirs):
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape
        assert torch.allclose(a, b.float().cpu(), atol=1e-5)


def test_saved_folder_loads_in_sentence_transformers_with_equal_vectors(saved):
    from hopscotch.retriever.model.multi_vector import load_multi_vector_model

    model, path = saved
    st = st_load(path)
    assert st.prompts["query"] == "[Q] Find: " and st.prompts["document"] == "[D] "
    ours_q = model.encode_queries(QUERIES, REASONINGS)
    ours_d = model.encode_documents(DOCS)
    # sentence-transformers adds the prompts itself; it is given Hopscotch's query text (reasoning already cut)
    assert_same(ours_q, st.encode_query(model.format_queries(QUERIES, REASONINGS)))
    assert_same(ours_d, st.encode_document(model.format_documents(DOCS)))
    reloaded = load_multi_vector_model(path, device="cpu")
    assert_same(ours_q, reloaded.encode_queries(QUERIES, REASONINGS))
    assert_same(ours_d, reloaded.encode_documents(DOCS))
    assert reloaded.config == model.config and reloaded.fingerprint == model.fingerprint


def test_folder_records_kind_and_settings_and_single_vector_readers_refuse_it(saved, tiny_bert_dir):
    from hopscotch.retriever.model.config import read_saved_config, saved_model_kind
    from hopscotch.retriever.model.multi_vector import PUNCTUATION, load_multi_vector_model

    _, path = saved
    recorded = json.loads((path / "hopscotch_config.json").read_text())
    assert recorded["kind"] == "multi_vector" and recorded["dim"] == 16
    assert (recorded["query_marker"], recorded["document_marker"]) == ("[Q]", "[D]")
    assert recorded["skiplist"] == PUNCTUATION and recorded["query_augmentation"] == 16
    assert recorded["query_input"] == "reasoning" and recorded["late_fusion"] == 0.25
    assert saved_model_kind(path) == "multi_vector" and saved_model_kind(tiny_bert_dir) == "single_vector"
    with pytest.raises(UsageError, match="multi-vector"):
        read_saved_config(path)
    with pytest.raises(UsageError, match="not a multi-vector"):
        load_multi_vector_model(tiny_bert_dir)


def test_projection_dim_normalisation_and_single_token_markers(saved):
    model, _ = saved
    for emb in model.encode_queries(QUERIES, REASONINGS) + model.encode_documents(DOCS):
        assert emb.shape[1] == 16 == model.dim
        assert torch.allclose(emb.norm(dim=1), torch.ones(emb.shape[0]), atol=1e-5)
    assert model.tokenizer.tokenize("[Q] who [D] what") == ["[Q]", "who", "[D]", "what"]
    projection = model.st[1].linear
    assert projection.bias is None and tuple(projection.weight.shape) == (16, 32)


def token_ids(model, text: str) -> list[int]:
    return model.tokenizer(text)["input_ids"]


def test_skiplist_drops_punctuation_from_documents_only(saved):
    model, _ = saved
    text = "Xenia, Ohio; a city (in Greene County) -- founded in 1803, named for hospitality!"
    punct = set(model.tokenizer.convert_tokens_to_ids(list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")))
    doc_ids = token_ids(model, "[D] " + text)
    dropped = sum(i in punct for i in doc_ids)
    assert dropped >= 6
    assert model.encode_documents([text])[0].shape[0] == len(doc_ids) - dropped
    query_ids = token_ids(model, model.query_prompt + text)  # longer than the augmentation: no [MASK]
    assert len(query_ids) > 16
    assert model.encode_queries([text], query_input="query")[0].shape[0] == len(query_ids)


def test_query_augmentation_pads_short_queries_with_mask(saved, tiny_bert_dir):
    from hopscotch.retriever.model.multi_vector import build_multi_vector_model

    model, _ = saved
    short = model.format_queries(["q"], query_input="query")
    features = model.st.preprocess(short, prompt=model.query_prompt, task="query")
    ids = features["input_ids"][0].tolist()
    real = len(token_ids(model, model.query_prompt + "q"))
    assert len(ids) == 16 and ids[real:] == [model.tokenizer.mask_token_id] * (16 - real)
    assert features["attention_mask"][0].sum() == real  # the encoder does not attend to the [MASK]s ...
    assert model.encode_queries(["q"], query_input="query")[0].shape[0] == 16  # ... but they are scored
    long = model.encode_queries(QUERIES[:1], REASONINGS[:1])[0]
    assert 16 < long.shape[0] <= 48
    plain = build_multi_vector_model(tiny_bert_dir, dim=8, query_augmentation=None, device="cpu")
    assert plain.encode_queries(["q"], query_input="query")[0].shape[0] == len(token_ids(plain, "[Q] q")) == 4


def test_long_reasoning_is_cut_from_the_left_with_the_prompt_counted(saved):
    model, _ = saved
    text = model.format_queries(QUERIES[:1], REASONINGS[:1])[0]
    assert text.startswith("Reasoning: ") and text.endswith("Ohio.\n\nQuery: who directed Gummo?")
    assert len(token_ids(model, model.query_prompt + text)) <= 48
    assert model.format_queries(["q"], None, query_input="query") == ["q"]
    assert model.format_queries(["q"], ["r"], reasoning_aware=False) == ["q"]


def test_maxsim_equals_sentence_transformers_scoring():
    from sentence_transformers.util.similarity import maxsim as st_maxsim
    from sentence_transformers.util.similarity import mean_maxsim

    from hopscotch.retriever.model.multi_vector import late_fusion_scores, maxsim

    g = torch.Generator().manual_seed(0)
    unit = lambda n: torch.nn.functional.normalize(torch.randn(n, 8, generator=g), dim=1)  # noqa: E731
    q_r, q_q = unit(30), unit(5)
    docs = [unit(n) for n in (3, 17, 1, 40)]
    assert torch.allclose(maxsim(q_r, docs), st_maxsim([q_r], docs)[0], atol=1e-5)
    assert torch.allclose(maxsim(q_q, docs, normalize=True), mean_maxsim([q_q], docs)[0], atol=1e-6)
    fused = late_fusion_scores(q_r, q_q, docs, 0.3)
    expected = 0.3 * mean_maxsim([q_r], docs)[0] + 0.7 * mean_maxsim([q_q], docs)[0]
    assert torch.allclose(fused, expected, atol=1e-6)
    assert torch.allclose(late_fusion_scores(q_r, q_q, docs, 1.0), maxsim(q_r, docs) / 30, atol=1e-6)
    assert torch.allclose(late_fusion_scores(q_r, q_q, docs, 0.0), maxsim(q_q, docs) / 5, atol=1e-6)
    assert maxsim(q_q, []).shape == (0,)
    with pytest.raises(UsageError):
        late_fusion_scores(q_r, q_q, docs, 1.5)
