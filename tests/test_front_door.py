"""The front door, ``hopscotch/__init__.py``: every name it offers resolves to the object of the module it names,
``import hopscotch`` stays light (no torch), and what it does not offer is an AttributeError. Its examples run in
tests/test_doctests.py (its docstring and docs/python.md)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import hopscotch


@pytest.mark.parametrize("name", sorted(hopscotch._EXPORTS))
def test_every_name_resolves_to_its_module_object(name):
    module = importlib.import_module(hopscotch._EXPORTS[name])
    assert getattr(hopscotch, name) is getattr(module, name)
    assert name in hopscotch.__all__ and name in dir(hopscotch)


def test_the_jobs_a_user_needs_are_there():
    wanted = {"build_searcher", "BM25Index", "encode_corpus", "build_faiss_index", "train", "synthesize",
              "SynthInputs", "evaluate", "read_corpus", "build_world", "infonce_loss"}
    assert wanted <= set(hopscotch.__all__)
    assert hopscotch.__version__ == importlib.import_module("hopscotch.retriever").__version__


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'no_such_thing'"):
        hopscotch.no_such_thing  # noqa: B018
    with pytest.raises(ImportError):
        exec("from hopscotch import no_such_thing", {})


def test_import_hopscotch_is_light_and_the_names_import():
    """In a fresh interpreter: ``import hopscotch`` loads no torch and none of the package below it; then
    ``from hopscotch import ...`` works as the README writes it."""
    code = ("import sys, hopscotch\n"
            "heavy = sorted(m for m in ('torch', 'transformers', 'faiss', 'hopscotch.retriever.searchers') "
            "if m in sys.modules)\n"
            "assert not heavy, heavy\n"
            "from hopscotch import build_searcher, evaluate, synthesize, train\n"
            "print(build_searcher.__module__, train.__module__)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["hopscotch.retriever.searchers.adapter.build", "hopscotch.retriever.training.trainer"]
