"""One backend from a parsed namespace: the rerank stage's options from flags, ``SearcherClass(args)`` through the
metaclass the searcher interface declares at the harness edge (the backends import none of the adapter)."""

from __future__ import annotations

import argparse
import pytest

from hopscotch.retriever.errors import UsageError


def _parsed(*argv):
    from hopscotch.retriever.searchers import add_searcher_arguments

    parser = argparse.ArgumentParser()
    add_searcher_arguments(parser)
    return parser.parse_args([str(a) for a in argv])


def test_rerank_options_come_from_the_rerank_flags():
    from hopscotch.retriever.searchers.adapter.namespace import rerank_options
    from hopscotch.retriever.searchers.rerank import RerankOptions

    assert rerank_options(_parsed("--bm25", "b")) is None
    got = rerank_options(_parsed("--bm25", "b", "--rerank-model", "m", "--rerank-depth", 7, "--rerank-late-fusion",
                                 0.5, "--query-input", "reasoning"))
    assert got == RerankOptions(model="m", depth=7, late_fusion=0.5, query_input="reasoning")
    with pytest.raises(UsageError, match="^--rerank-windows needs --rerank-model$"):
        rerank_options(_parsed("--bm25", "b", "--rerank-windows", 2))
    # a hand-built namespace (a harness's) is read as it is
    assert rerank_options(argparse.Namespace(rerank_model="m", rerank_cache="c")).cache_dir == "c"


def test_every_searcher_is_built_from_a_namespace_through_the_metaclass_it_declares():
    from hopscotch.retriever.searchers import SEARCHERS, BaseSearcher
    from hopscotch.retriever.searchers.harness import HarnessConstructor
    from hopscotch.retriever.searchers.rerank import RerankedSearcher

    # declared once, by the interface's class statement: every searcher inherits it, none has it swapped in
    assert type(BaseSearcher) is HarnessConstructor and type(RerankedSearcher) is HarnessConstructor
    assert "metaclass" not in str(SEARCHERS["bm25"].__dict__) and all(type(cls) is HarnessConstructor
                                                                      for cls in SEARCHERS.values())
    with pytest.raises(UsageError, match="needs a BM25 index folder"):
        SEARCHERS["bm25"](argparse.Namespace(bm25=None))  # the namespace path: from_args's checks
    with pytest.raises(UsageError, match="needs a BM25 index folder"):
        SEARCHERS["bm25"].from_args(argparse.Namespace(bm25=None))


def test_no_backend_module_imports_the_namespace_half_of_the_adapter():
    """The backends take flags' values and options: the metaclass, ``searcher_from_namespace`` and the namespace
    readers of :mod:`~hopscotch.retriever.searchers.adapter.flags` (``flag``, ``given_flags``) are not theirs."""
    import ast
    from pathlib import Path

    import hopscotch.retriever.searchers as package
    from hopscotch.retriever.searchers.registry import BACKEND_MODULES

    folder = Path(package.__file__).parent
    for module in (*BACKEND_MODULES, "base"):
        tree = ast.parse((folder / f"{module}.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and ".adapter" in node.module:
                names = {alias.name for alias in node.names}
                assert node.module.endswith("adapter.flags"), (module, node.module)
                assert not names & {"flag", "given_flags"}, (module, names)
