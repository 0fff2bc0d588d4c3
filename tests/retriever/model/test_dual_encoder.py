"""The dual encoder: pooling, length-sorted sub-batches, left-truncated reasoning, and saved folders that
sentence-transformers loads to the same vectors (shared towers, separate towers, LoRA merged)."""

from __future__ import annotations

import pytest
import torch

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.model.config import EncoderConfig
from hopscotch.retriever.model.dual_encoder import DualEncoder, pool
from hopscotch.retriever.model.query_template import format_query_truncated

PASSAGES = [("Gummo", "Gummo is a 1997 American experimental drama film written and directed by Harmony Korine."),
            ("", "short"), ("Xenia", "Xenia, Ohio " * 30)]
QUERIES = ["who directed Gummo", "where is Xenia"]
REASONINGS = ["The film was shot in Nashville. " * 20 + "It was set in Xenia.", None]


def load(path, **kw) -> DualEncoder:
    model = DualEncoder.from_pretrained(path, EncoderConfig(query_max_len=48, passage_max_len=64, **kw))
    return model.eval()


def test_pooling_modes_with_both_padding_sides():
    hidden = torch.arange(2 * 4 * 1, dtype=torch.float32).reshape(2, 4, 1)
    right = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
    left = torch.tensor([[0, 1, 1, 1], [0, 0, 1, 1]])
    assert pool(hidden, right, "cls").flatten().tolist() == [0.0, 4.0]
    assert pool(hidden, right, "mean").flatten().tolist() == [1.0, 4.5]
    assert pool(hidden, right, "last").flatten().tolist() == [2.0, 5.0]
    assert pool(hidden, left, "last").flatten().tolist() == [3.0, 7.0]
    assert pool(hidden, left, "mean").flatten().tolist() == [2.0, 6.5]


def test_bad_config_names_the_key():
    with pytest.raises(UsageError, match="model.pooling"):
        EncoderConfig(pooling="max")
    with pytest.raises(UsageError, match="temperature"):
        EncoderConfig(temperature=0)


def test_length_sorted_sub_batches_give_the_same_embeddings_and_gradients(tiny_bert_dir):
    model = load(tiny_bert_dir)
    features = model.tokenize_passages(PASSAGES)
    weight = model.passage_backbone.embeddings.word_embeddings.weight
    grads = []
    for chunk in (None, 1):
        emb = model.encode(features, "passage", chunk_size=chunk)
        (g,) = torch.autograd.grad(emb.sum() + (emb[0] * emb[2]).sum(), weight)
        grads.append((emb.detach(), g))
    assert torch.allclose(grads[0][0], grads[1][0], atol=1e-6)
    assert torch.allclose(grads[0][1], grads[1][1], atol=1e-6)


def test_length_chunks_are_longest_first_and_cover_every_row_once():
    from hopscotch.retriever.model.dual_encoder import length_chunks

    lengths = torch.tensor([5, 9, 5, 2, 9, 7, 1])
    chunks = length_chunks(lengths, 3)
    assert [c.tolist() for c in chunks] == [[1, 4, 5], [0, 2, 3], [6]]  # stable: ties keep their order
    assert sorted(torch.cat(chunks).tolist()) == list(range(7))
    assert [c.tolist() for c in length_chunks(lengths, 10)] == [[1, 4, 5, 0, 2, 3, 6]]


def test_reasoning_is_cut_from_the_left_so_query_survives(tiny_bert_dir):
    model = load(tiny_bert_dir)
    tok = model.tokenizer
    text = format_query_truncated(tok, 48, "who directed Gummo", REASONINGS[0])
    assert len(tok(text)["input_ids"]) <= 48
    assert text.endswith("It was set in Xenia.\n\nQuery: who directed Gummo")
    assert text.startswith("Reasoning: ")
    short = format_query_truncated(tok, 48, "q", "brief reasoning")
    assert short == "Reasoning: brief reasoning\n\nQuery: q"
    assert format_query_truncated(tok, 48, "q", None) == "Reasoning: Empty\n\nQuery: q"
    assert format_query_truncated(tok, 48, "q", "r", reasoning_aware=False) == "q"
    from transformers import BertTokenizer

    slow = BertTokenizer.from_pretrained(str(tiny_bert_dir))  # no offsets: cut at word starts
    text = format_query_truncated(slow, 48, "who directed Gummo", REASONINGS[0])
    assert len(slow(text)["input_ids"]) <= 48 and text.endswith("It was set in Xenia.\n\nQuery: who directed Gummo")
    features = model.tokenize_queries(QUERIES, REASONINGS)
    assert features["input_ids"].shape[1] <= 48
    last_real = features["attention_mask"][0].sum() - 2  # the token before [SEP]
    assert tok.decode(features["input_ids"][0, last_real]) == "##mo"  # "...gum ##mo": the query's end


def encode_both(model, st_model):
    with torch.no_grad():
        ours_p = model.encode(model.tokenize_passages(PASSAGES), "passage")
        ours_q = model.encode(model.tokenize_queries(QUERIES, REASONINGS), "query")
    from hopscotch.retriever.model.query_template import format_document

    theirs_p = st_model.encode([format_document(t, x) for t, x in PASSAGES], convert_to_tensor=True)
    theirs_q = st_model.encode(model.format_queries(QUERIES, REASONINGS), convert_to_tensor=True)
    return ours_p, theirs_p, ours_q, theirs_q


@pytest.mark.parametrize("pooling,padding_side", [("mean", "right"), ("cls", "right"), ("last", "left")])
def test_saved_folder_reproduces_embeddings_in_sentence_transformers(tiny_bert_dir, tmp_path, pooling, padding_side):
    from sentence_transformers import SentenceTransformer

    model = load(tiny_bert_dir, pooling=pooling, padding_side=padding_side)
    model.save(tmp_path / "m")
    st_model = SentenceTransformer(str(tmp_path / "m"), device="cpu")
    ours_p, theirs_p, ours_q, theirs_q = encode_both(model, st_model)
    assert torch.allclose(ours_p, theirs_p, atol=1e-5)
    assert torch.allclose(ours_q, theirs_q, atol=1e-5)
    reloaded = DualEncoder.from_pretrained(tmp_path / "m").eval()
    assert reloaded.config.pooling == pooling and reloaded.config.query_max_len == 48
    assert reloaded.tokenizer.padding_side == padding_side
    with torch.no_grad():
        again = reloaded.encode(reloaded.tokenize_passages(PASSAGES), "passage")
    assert torch.allclose(ours_p, again, atol=1e-6)


def test_separate_towers_save_both(tiny_bert_dir, tmp_path):
    model = load(tiny_bert_dir, shared_towers=False)
    with torch.no_grad():
        model.separate_query_backbone.embeddings.word_embeddings.weight.mul_(2.0)
        q = model.encode(model.tokenize_queries(QUERIES), "query")
    assert model.query_backbone is not model.passage_backbone
    model.save(tmp_path / "m")
    assert (tmp_path / "m" / "query_encoder" / "modules.json").is_file()
    reloaded = DualEncoder.from_pretrained(tmp_path / "m").eval()
    assert not reloaded.config.shared_towers
    with torch.no_grad():
        assert torch.allclose(q, reloaded.encode(reloaded.tokenize_queries(QUERIES), "query"), atol=1e-6)


def test_lora_is_merged_into_the_saved_weights_without_touching_the_model(tiny_bert_dir, tmp_path):
    from sentence_transformers import SentenceTransformer

    lora = {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": ["query", "value", "dense"]}
    model = load(tiny_bert_dir, lora=lora)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.5)  # a trained adapter: non-zero delta
    before = {n: p.clone() for n, p in model.state_dict().items()}
    model.save(tmp_path / "m")
    assert all(torch.equal(before[n], p) for n, p in model.state_dict().items())
    ours_p, theirs_p, ours_q, theirs_q = encode_both(model, SentenceTransformer(str(tmp_path / "m"), device="cpu"))
    assert torch.allclose(ours_p, theirs_p, atol=1e-5) and torch.allclose(ours_q, theirs_q, atol=1e-5)
    plain = load(tiny_bert_dir)
    with torch.no_grad():
        base_p = plain.encode(plain.tokenize_passages(PASSAGES), "passage")
    assert not torch.allclose(base_p, ours_p, atol=1e-3)  # the adapter did change the vectors


def test_learnable_temperature_is_a_parameter(tiny_bert_dir):
    fixed = load(tiny_bert_dir, temperature=0.02)
    learn = load(tiny_bert_dir, temperature=0.02, learn_temperature=True)
    assert "log_temperature" not in dict(fixed.named_parameters())
    assert "log_temperature" in dict(learn.named_parameters())
    assert learn.temperature.item() == pytest.approx(0.02, rel=1e-6)
    q, p, t = learn(queries=learn.tokenize_queries(QUERIES))
    assert p is None and q.shape == (2, 32) and t.requires_grad
    assert torch.allclose(q.norm(dim=-1), torch.ones(2), atol=1e-5)
