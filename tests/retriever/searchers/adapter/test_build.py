"""The searchers' argparse edge as a whole: no wiring at import (the interface imports nothing that builds)."""

from __future__ import annotations


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
