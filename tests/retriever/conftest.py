"""Fixtures shared by the retriever tests of several folders."""

from __future__ import annotations

import json

import pytest


@pytest.fixture(scope="module")
def mv_world(small_world, tiny_bert_dir, tmp_path_factory):
    """A tiny multi-vector model (dim 16) built from the tiny BERT, and what it indexes: ``small_world``'s corpus
    as a token index (shards of 64, 8-bit residuals, 64 centroids), its BM25 index, and 8 queries (every other
    one with a reasoning). Built once per test module."""
    from hopscotch.retriever.cli import main
    from hopscotch.retriever.model.multi_vector import build_multi_vector_model

    root = tmp_path_factory.mktemp("mv_index")
    build_multi_vector_model(tiny_bert_dir, dim=16, query_max_len=32, passage_max_len=48, query_augmentation=8,
                             seed=0, device="cpu").save(root / "mv")
    corpus = small_world / "corpus.jsonl"
    assert main(["bm25-index", "--corpus", str(corpus), "--out", str(root / "bm25")]) == 0
    assert main(["index", "--corpus", str(corpus), "--model", str(root / "mv"), "--out", str(root / "idx"),
                 "--shard-size", "64", "--nbits", "8", "--mv-centroids", "64"]) == 0
    rows = [json.loads(line) for line in (small_world / "queries.jsonl").read_text().splitlines()][:8]
    for i, row in enumerate(rows):
        if i % 2:
            row["reasoning"] = f"The agent first checked {row['text'].split()[0]} and now wants the rest."
    (root / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return {"root": root, "corpus": corpus, "mv": root / "mv", "idx": root / "idx", "bm25": root / "bm25",
            "queries": root / "queries.jsonl", "rows": rows}
