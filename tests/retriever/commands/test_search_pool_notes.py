"""``--k`` above a candidate pool (``--rerank-depth``, a hybrid's ``--depth``, ``--mv-candidates``) widens the pool,
which can change the top of the list: ``search`` and ``replay`` say so in one note (the documented behaviour),
and say nothing when ``--k`` fits."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("flags, note", [
    (["--bm25", "BM25", "--index", "SV", "--depth", "5"], "--k 20 > --depth 5: each list gives 20 candidates"),
    (["--index", "MV", "--mv-candidates", "5"], "--k 20 > --mv-candidates 5: 20 documents are scored"),
    (["--bm25", "BM25", "--corpus", "CORPUS", "--rerank-model", "MVMODEL", "--rerank-depth", "5"],
     "--k 20 > --rerank-depth 5: the top 20 first-stage candidates are reranked"),
], ids=["hybrid-depth", "mv-candidates", "rerank-depth"])
def test_k_above_a_pool_is_noted(mv_world, small_world_index, tmp_path, cli, flags, note):
    names = {"BM25": mv_world["bm25"], "SV": small_world_index, "MV": mv_world["idx"], "CORPUS": mv_world["corpus"],
             "MVMODEL": mv_world["mv"]}
    argv = [names.get(f, f) for f in flags]
    code, _, err = cli("search", "--queries", mv_world["queries"], "--out", tmp_path / "wide.trec", "--k", "20", *argv)
    assert code == 0 and f"hopscotch search: note: {note}" in err, err
    code, _, err = cli("search", "--queries", mv_world["queries"], "--out", tmp_path / "narrow.trec", "--k", "5", *argv)
    assert code == 0 and "note: --k" not in err, err
