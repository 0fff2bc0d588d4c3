"""The searchers' argparse edge: the rerank stage's options from flags, ``SearcherClass(args)`` through the
registered backends' metaclass, and no wiring at import (the interface imports nothing that builds)."""

from __future__ import annotations

import argparse
from abc import ABCMeta

import pytest

from hopscotch.retriever.errors import UsageError


def _parsed(*argv):
    from hopscotch.retriever.searchers import add_searcher_arguments

    parser = argparse.ArgumentParser()
    add_searcher_arguments(parser)
    return parser.parse_args([str(a) for a in argv])


def test_rerank_options_come_from_the_rerank_flags():
    from hopscotch.retriever.searchers.adapter.build import rerank_options
    from hopscotch.retriever.searchers.rerank import RerankOptions

    assert rerank_options(_parsed("--bm25", "b")) is None
    got = rerank_options(_parsed("--bm25", "b", "--rerank-model", "m", "--rerank-depth", 7, "--rerank-late-fusion",
                                 0.5, "--query-input", "reasoning"))
    assert got == RerankOptions(model="m", depth=7, late_fusion=0.5, query_input="reasoning")
    with pytest.raises(UsageError, match="^--rerank-windows needs --rerank-model$"):
        rerank_options(_parsed("--bm25", "b", "--rerank-windows", 2))
    # a hand-built namespace (a harness's) is read as it is
    assert rerank_options(argparse.Namespace(rerank_model="m", rerank_cache="c")).cache_dir == "c"


def test_only_the_registered_backends_are_built_from_a_namespace():
    from hopscotch.retriever.searchers import SEARCHERS, BaseSearcher
    from hopscotch.retriever.searchers.adapter.build import BuiltFromNamespace
    from hopscotch.retriever.searchers.rerank import RerankedSearcher

    assert type(BaseSearcher) is ABCMeta and type(RerankedSearcher) is ABCMeta
    assert all(type(cls) is BuiltFromNamespace for cls in SEARCHERS.values())
    with pytest.raises(UsageError, match="needs a BM25 index folder"):
        SEARCHERS["bm25"](argparse.Namespace(bm25=None))  # the namespace path: from_args's checks


def test_no_searcher_module_wires_another_at_import():
    """No module of the searchers sets another's state when imported: no ``global`` statement, and no bare call
    at module level (what ``set_flag_builder(...)`` in the reranker's module was)."""
    import ast
    from pathlib import Path

    import hopscotch.retriever.searchers as package

    for path in Path(package.__file__).parent.rglob("*.py"):
        tree = ast.parse(path.read_text())
        assert not any(isinstance(node, ast.Global) for node in ast.walk(tree)), path
        calls = [node for node in tree.body if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)]
        assert not calls, f"{path}: {ast.unparse(calls[0])}"
