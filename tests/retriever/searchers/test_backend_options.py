"""Each backend's options dataclass: ``build_searcher(options)`` builds the same searcher as its flags do, the
flags' values land in the fields of the same names, and a rerank stage comes from ``RerankOptions``."""

from __future__ import annotations

import argparse

import pytest

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.io.queries import queries_of

QUERIES = ["who directed the film", "capital city river"]


def _same(a, b):
    assert a.search_batch(queries_of(QUERIES, ["a reasoning about films", None], True), 5) == \
        b.search_batch(queries_of(QUERIES, ["a reasoning about films", None], True), 5)


def test_each_local_backend_builds_from_its_options(mv_world, small_world_index):
    from hopscotch.retriever.searchers import build_searcher
    from hopscotch.retriever.searchers.bm25 import BM25Options, BM25Searcher
    from hopscotch.retriever.searchers.dense import DenseOptions, DenseSearcher
    from hopscotch.retriever.searchers.hybrid import HybridOptions, HybridSearcher
    from hopscotch.retriever.searchers.multi_vector_index import MultiVectorIndexSearcher, MultiVectorSearchOptions

    bm25 = build_searcher(BM25Options(bm25=str(mv_world["bm25"]), corpus=str(mv_world["corpus"]),
                                      bm25_query_weight=2.0))
    assert type(bm25) is BM25Searcher and bm25.has_documents
    _same(bm25, build_searcher("bm25", bm25=str(mv_world["bm25"]), corpus=str(mv_world["corpus"]),
                               bm25_query_weight=2.0))
    dense = build_searcher(DenseOptions(index=str(small_world_index), late_fusion=0.5))
    assert type(dense) is DenseSearcher and dense.late_fusion == 0.5
    _same(dense, build_searcher("dense", index=str(small_world_index), late_fusion=0.5))
    mv = build_searcher(MultiVectorSearchOptions(index=str(mv_world["idx"]), mv_candidates=20))
    assert type(mv) is MultiVectorIndexSearcher and mv.candidates == 20
    _same(mv, build_searcher("multi_vector", index=str(mv_world["idx"]), mv_candidates=20))
    hybrid = build_searcher(HybridOptions(bm25=str(mv_world["bm25"]), vector=MultiVectorSearchOptions(
        index=str(mv_world["idx"]))))
    assert type(hybrid) is HybridSearcher and type(hybrid.dense) is MultiVectorIndexSearcher
    _same(hybrid, build_searcher("hybrid", bm25=str(mv_world["bm25"]), index=str(mv_world["idx"])))
    with pytest.raises(UsageError, match="is a multi-vector index"):
        build_searcher(DenseOptions(index=str(mv_world["idx"])))
    with pytest.raises(UsageError, match="needs a BM25 index folder"):
        build_searcher(HybridOptions(vector=DenseOptions(index=str(small_world_index))))


def test_rerank_options_rerank_a_searcher_built_from_options(mv_world):
    from hopscotch.retriever.searchers import build_searcher
    from hopscotch.retriever.searchers.bm25 import BM25Options
    from hopscotch.retriever.searchers.rerank import RerankedSearcher, RerankOptions

    first = BM25Options(bm25=str(mv_world["bm25"]), corpus=str(mv_world["corpus"]))
    searcher = build_searcher(first, rerank=RerankOptions(model=str(mv_world["mv"]), depth=10, first_weight=0.0))
    assert isinstance(searcher, RerankedSearcher) and searcher.rerank_stage.depth == 10
    _same(searcher, build_searcher("bm25", bm25=str(mv_world["bm25"]), corpus=str(mv_world["corpus"]),
                                   rerank_model=str(mv_world["mv"]), rerank_depth=10, rerank_first_weight=0.0))
    assert build_searcher(first, rerank=None).rerank_stage is None
    with pytest.raises(TypeError, match="no searcher backend's options"):
        build_searcher(RerankOptions(model="m"))
    with pytest.raises(TypeError):
        build_searcher(first, k=3)


def test_options_take_the_flags_of_their_names():
    from hopscotch.retriever.searchers import add_searcher_arguments
    from hopscotch.retriever.searchers.adapter.flags import FlagValues, options_of
    from hopscotch.retriever.searchers.remote import RemoteOptions

    parser = argparse.ArgumentParser()
    add_searcher_arguments(parser)
    args = parser.parse_args(["--url", "http://h:1", "--name", "wiki", "--remote-timeout", "5"])
    assert options_of(RemoteOptions, FlagValues.of(args)) == RemoteOptions(url="http://h:1", name="wiki", remote_timeout=5.0)
    # a hand-built namespace: only the named fields are read
    assert options_of(RemoteOptions, FlagValues.of(argparse.Namespace(url="u", k=3)), dests={"url"}) == \
        RemoteOptions(url="u")
