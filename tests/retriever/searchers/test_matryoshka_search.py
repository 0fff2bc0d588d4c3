"""``hopscotch index --dim D`` + ``hopscotch search --dim D``: documents and queries cut to their first D
dimensions and renormalised rank as numpy does on truncated vectors; the manifest records the truncation; the
refusals (wider than the model, another --dim than the index's) and the untrained-prefix warning; --plan at D."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from hopscotch.retriever.io.queries import read_queries
from hopscotch.retriever.io.runs import read_run


@pytest.fixture(scope="module")
def trained(tiny_bert_dir, tmp_path_factory):
    """The tiny BERT (32-d) as a folder recording Matryoshka training on [32, 16, 8]."""
    folder = tmp_path_factory.mktemp("matryoshka") / "model"
    shutil.copytree(tiny_bert_dir, folder)
    (folder / "hopscotch_config.json").write_text(json.dumps({"query_input": "query", "query_max_len": 64,
                                                              "passage_max_len": 64, "matryoshka_dims": [32, 16, 8]}))
    return folder


@pytest.fixture(scope="module")
def built(small_world, trained, tmp_path_factory):
    from hopscotch.retriever.cli import main

    out = tmp_path_factory.mktemp("matryoshka_index") / "dense16"
    assert main(["index", "--corpus", str(small_world / "corpus.jsonl"), "--model", str(trained), "--out", str(out),
                 "--shard-size", "64", "--batch-size", "32", "--dim", "16"]) == 0
    return out


def numpy_run(small_world, model, texts, dim: int, k: int) -> list[list[tuple[str, float]]]:
    """The top k of each query by inner product of whole-vector encodings cut to ``dim`` and renormalised in
    numpy (documents rounded to float16 as the shards store them)."""
    from hopscotch.retriever.io.corpus import read_corpus
    from hopscotch.retriever.model.dense_encoder import DenseEncoder
    from hopscotch.retriever.model.query_template import format_document

    docs = list(read_corpus(small_world / "corpus.jsonl"))
    encoder = DenseEncoder(model, max_length=64)
    assert encoder.dim == 32

    def cut(x):
        x = x[:, :dim].astype(np.float64)
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    d = cut(encoder.encode_texts([format_document(doc.title, doc.text) for doc in docs]))
    d = d.astype(np.float16).astype(np.float64)
    scores = cut(encoder.encode_texts(texts)) @ d.T
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return [[(docs[j].docid, float(scores[i, j])) for j in row] for i, row in enumerate(order)]


def ranked(run, qid):
    return sorted(run[qid].items(), key=lambda item: -item[1])


def test_index_and_search_at_a_prefix_rank_as_numpy_does(cli, built, small_world, trained, tmp_path):
    from hopscotch.retriever.index.layout import IndexMeta, load_shard_embeddings

    meta = IndexMeta.load(built)
    assert (meta.dim, meta.truncate_dim) == (16, 16)
    assert json.loads((built / "encode_config.json").read_text())["truncate_dim"] == 16
    shard = np.asarray(load_shard_embeddings(built, 0), np.float32)
    assert shard.shape[1] == 16 and np.allclose(np.linalg.norm(shard, axis=1), 1.0, atol=2e-3)
    queries = small_world / "queries.jsonl"
    code, _, err = cli("search", "--queries", queries, "--index", built, "--dim", 16, "--k", 10,
                       "--out", tmp_path / "at16.trec")
    assert code == 0, err
    assert "warning" not in err  # 16 is a trained prefix
    code, _, err = cli("search", "--queries", queries, "--index", built, "--k", 10, "--out", tmp_path / "default.trec")
    assert code == 0, err
    run = read_run(tmp_path / "at16.trec")
    assert read_run(tmp_path / "default.trec") == run  # the index's recorded dim is the default
    qs = list(read_queries(queries))
    expected = numpy_run(small_world, trained, [q.text for q in qs], 16, 10)
    for q, exp in zip(qs, expected):
        got = ranked(run, q.qid)
        assert [d for d, _ in got] == [d for d, _ in exp], q.qid
        assert [s for _, s in got] == pytest.approx([s for _, s in exp], abs=2e-4)  # float16 rounding of one value


def test_a_shared_whole_vector_encoder_is_cut_to_the_index(built, small_world, trained):
    from hopscotch.retriever.model.dense_encoder import DenseEncoder
    from hopscotch.retriever.searchers.dense import DenseSearcher

    whole = DenseEncoder(trained, max_length=64)
    searcher = DenseSearcher(built, encoder=whole)
    assert (searcher.encoder.dim, whole.dim) == (16, 32) and searcher.encoder.model is whole.model
    texts = [q.text for q in read_queries(small_world / "queries.jsonl")][:5]
    expected = numpy_run(small_world, trained, texts, 16, 5)
    assert [[d for d, _ in r] for r in searcher.search_batch(texts, k=5)] == [[d for d, _ in r] for r in expected]


def test_refusals_name_the_dimensions(cli, built, small_world, trained, small_world_index, tmp_path):
    corpus, queries = small_world / "corpus.jsonl", small_world / "queries.jsonl"
    code, _, err = cli("index", "--corpus", corpus, "--model", trained, "--out", tmp_path / "wide", "--dim", 64)
    assert code == 2 and "--dim 64" in err and "32-d vectors" in err and not (tmp_path / "wide").exists()
    code, _, err = cli("search", "--queries", queries, "--index", built, "--dim", 8, "--out", tmp_path / "r.trec")
    assert code == 2 and "holds the first 16 dimensions" in err and "--dim 16" in err
    code, _, err = cli("search", "--queries", queries, "--index", small_world_index, "--dim", 16,
                       "--out", tmp_path / "r.trec")
    assert code == 2 and "holds whole 32-d vectors" in err and "hopscotch index --dim 16" in err
    # a rerun into the folder with another --dim would mix widths: refused, the difference named
    code, _, err = cli("index", "--corpus", corpus, "--model", trained, "--out", built, "--dim", 8,
                       "--shard-size", 64, "--batch-size", 32)
    assert code == 2 and "truncate_dim" in err
    code, _, err = cli("index", "--plan", "--docs", 1000, "--dim", 64, "--model", trained)
    assert code == 2 and "--dim 64" in err


def test_an_untrained_prefix_warns_once(cli, small_world, tiny_bert_dir, trained, tmp_path):
    code, out, err = cli("index", "--corpus", small_world / "corpus.jsonl", "--model", tiny_bert_dir,
                         "--out", tmp_path / "dense12", "--shard-size", 128, "--dim", 12)
    assert code == 0, err
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "--dim 12" in warnings[0] and "not trained with Matryoshka" in warnings[0]
    code, _, err = cli("search", "--queries", small_world / "queries.jsonl", "--index", tmp_path / "dense12",
                       "--out", tmp_path / "r.trec")
    assert code == 0 and sum(line.startswith("warning: --dim 12") for line in err.splitlines()) == 1
    code, out, err = cli("index", "--plan", "--docs", 1000, "--dim", 12, "--model", trained)
    assert code == 0 and "trained on the prefixes [32, 16, 8]" in err
    assert "dim 12" in out and "float16 shard embeddings" in out and "23.4 KiB" in out  # 2 bytes x 12 x 1000
