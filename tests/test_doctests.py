"""Every doctest runs: the ``>>>`` examples of the package's docstrings (the front door ``hopscotch`` included) and
of the pages written as doctests (docs/python.md, the README's Python quickstart), each in an empty folder.

An example in a docstring is either a doctest (``>>>``, run here) or marked as one that is not run
(``Example (not run)::``: it needs a trained model, an index or a GPU). ``Example::`` alone is what the modules
of :data:`UNMARKED_LEFT` still have (shrink-only: files other work is changing now).
"""

from __future__ import annotations

import ast
import doctest
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: the installed package's folders -> their import names (pyproject.toml's package-dir)
PACKAGES = {"hopscotch": "hopscotch", "retriever": "hopscotch.retriever", "kernels": "hopscotch.kernels",
            "data_synth": "hopscotch.data_synth"}
#: pages that are doctests from top to bottom, each one test with its state flowing from example to example
PAGES = [ROOT / "docs" / "python.md", ROOT / "README.md"]
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
#: at least this many doctests run (the front door's page, the README and the docstrings)
MIN_DOCTESTS = 10
#: files whose docstrings still say ``Example::`` without saying whether it runs (shrink-only)
UNMARKED_LEFT = {
    "data_synth/candidates.py", "data_synth/config.py", "data_synth/false_negative_audit.py", "data_synth/labels.py",
    "data_synth/oracles/cross_encoder.py", "data_synth/oracles/dense.py", "data_synth/oracles/lexical.py",
    "data_synth/oracles/llm.py", "data_synth/oracles/llm_client.py", "data_synth/passage_cache.py",
    "data_synth/pipeline.py", "data_synth/qa.py", "data_synth/traces.py", "data_synth/trajectory_use.py",
    "data_synth/utility_labels.py", "retriever/index/bm25/__init__.py", "retriever/index/bm25/analyzer.py",
    "retriever/index/bm25/memory.py", "retriever/index/bm25/plan.py", "retriever/searchers/__init__.py",
    "retriever/searchers/arg_types.py", "retriever/searchers/fusion.py",
    "retriever/searchers/fusion_tuning.py", "retriever/searchers/multi_vector_index.py",
    "retriever/searchers/registry.py", "retriever/searchers/rerank.py", "retriever/training/evaluation.py",
    "retriever/training/loss.py",
}


def _module_name(path: Path) -> str:
    folder = path.relative_to(ROOT).parts[0]
    parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([PACKAGES[folder], *parts])


def _source_files() -> list[Path]:
    return sorted(p for folder in PACKAGES for p in (ROOT / folder).rglob("*.py") if "egg-info" not in str(p))


def _doctest_names(path: Path) -> list[str]:
    """The names :class:`doctest.DocTestFinder` gives the docstrings of ``path`` that hold examples: the module's,
    its functions' and classes' and their methods' (``module.Class.method``)."""
    module = _module_name(path)
    tree = ast.parse(path.read_text())
    names = [module] if ">>>" in (ast.get_docstring(tree) or "") else []

    def visit(body, prefix):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if ">>>" in (ast.get_docstring(node) or ""):
                    names.append(f"{prefix}.{node.name}")
                if isinstance(node, ast.ClassDef):
                    visit(node.body, f"{prefix}.{node.name}")

    visit(tree.body, module)
    return names


DOCSTRING_TESTS = [(name, path) for path in _source_files() if ">>>" in path.read_text()
                   for name in _doctest_names(path)]
PAGE_TESTS = [page for page in PAGES if re.search(r"^\s*>>> ", page.read_text(), re.MULTILINE)]


def _run(test: doctest.DocTest) -> None:
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    report: list[str] = []
    runner.run(test, out=report.append)
    result = runner.summarize(verbose=False)
    assert result.attempted > 0, f"{test.name}: no example ran"
    assert result.failed == 0, "".join(report)


@pytest.mark.parametrize(("name", "path"), DOCSTRING_TESTS, ids=[n for n, _ in DOCSTRING_TESTS])
def test_docstring_examples_run(name, path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    module = importlib.import_module(_module_name(path))
    found = {t.name: t for t in doctest.DocTestFinder(exclude_empty=True).find(module)}
    assert name in found, f"{name}: doctest does not find it (found {sorted(found)})"
    _run(found[name])


@pytest.mark.parametrize("page", PAGE_TESTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_page_examples_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    test = doctest.DocTestParser().get_doctest(page.read_text(), {"__name__": page.stem}, page.name, str(page), 0)
    _run(test)


def test_enough_doctests_run():
    assert len(DOCSTRING_TESTS) + len(PAGE_TESTS) >= MIN_DOCTESTS, (DOCSTRING_TESTS, PAGE_TESTS)
    assert ROOT / "docs" / "python.md" in PAGE_TESTS and ROOT / "README.md" in PAGE_TESTS
    assert "hopscotch" in {name for name, _ in DOCSTRING_TESTS}


def unmarked_examples(source: str) -> list[int]:
    """Lines of ``source`` that open a literal example block without saying whether it runs (``Example::``)."""
    return [n for n, line in enumerate(source.splitlines(), 1) if re.search(r"\bExamples?::\s*$", line)]


def test_every_example_runs_or_says_it_does_not():
    unmarked = {p.relative_to(ROOT).as_posix() for p in _source_files() if unmarked_examples(p.read_text())}
    assert not unmarked - UNMARKED_LEFT, ("write these examples as doctests (>>>), or mark them "
                                          f"'Example (not run)::': {sorted(unmarked - UNMARKED_LEFT)}")
    assert not UNMARKED_LEFT - unmarked, f"done, drop from UNMARKED_LEFT: {sorted(UNMARKED_LEFT - unmarked)}"


def test_the_example_rule_sees_an_unmarked_block():
    assert unmarked_examples('"""A thing.\n\nExample::\n\n    f(1)\n"""') == [3]
    assert unmarked_examples('"""Examples::\n"""') == [1]
    assert unmarked_examples('"""Example (not run)::\n\n    f(1)\n\n>>> f(1)\n2\n"""') == []
