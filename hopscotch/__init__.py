"""Hopscotch: reasoning-aware retrieval for deep-research agents. The Python front door.

The handful of objects a user needs, under one flat name each (``from hopscotch import build_searcher``):

* data: :func:`build_world` / :func:`write_world` (the embedded synthetic world), :func:`read_corpus`,
  :func:`read_queries`, :func:`read_qrels`, :func:`read_run`, :func:`write_run`;
* indexing: :class:`BM25Index`, :func:`encode_corpus` with :class:`EncodeOptions` (a sharded dense index),
  :func:`build_faiss_index` (a FAISS index over it);
* search: :func:`build_searcher` (``"bm25"``, ``"dense"``, ``"hybrid"``, ``"remote"`` from index folders), whose
  searchers answer ``search_batch(queries, k)`` for :class:`Query` records (a query with its reasoning),
  :class:`DenseEncoder`, :func:`format_query` (the reasoning-aware query text), :func:`reciprocal_rank_fusion`;
* training: :func:`train` (from a recipe), :func:`load_recipe`;
* DR-Synth: :func:`synthesize` with :class:`SynthInputs` and :class:`SynthConfig`;
* evaluation: :func:`evaluate`, :func:`compare_runs`;
* the loss kernels: :func:`infonce_loss` (fused Triton) and :func:`reference_infonce_loss` (PyTorch).

Each is loaded when first used, so ``import hopscotch`` imports neither torch nor the rest of the package.
docs/python.md walks through them, every example a doctest that the test suite runs; the folders behind
them stay importable as ``hopscotch.retriever``, ``hopscotch.kernels`` and ``hopscotch.data_synth``.

>>> import hopscotch
>>> hopscotch.BM25Index.__module__
'hopscotch.retriever.index.bm25.memory'
>>> "build_searcher" in dir(hopscotch)
True
"""

from __future__ import annotations

import importlib

from hopscotch.retriever import __version__

#: public name -> the module that defines it (imported on first use)
_EXPORTS = {
    # data
    "build_world": "hopscotch.data_synth.world",
    "write_world": "hopscotch.data_synth.world",
    "read_corpus": "hopscotch.retriever.io.corpus",
    "read_queries": "hopscotch.retriever.io.queries",
    "Query": "hopscotch.retriever.io.queries",
    "read_qrels": "hopscotch.retriever.io.qrels",
    "read_run": "hopscotch.retriever.io.runs",
    "write_run": "hopscotch.retriever.io.runs",
    # indexing
    "BM25Index": "hopscotch.retriever.index.bm25",
    "EncodeOptions": "hopscotch.retriever.index.encode",
    "encode_corpus": "hopscotch.retriever.index.encode",
    "build_faiss_index": "hopscotch.retriever.index.faiss_index",
    # search
    "build_searcher": "hopscotch.retriever.searchers",
    "DenseEncoder": "hopscotch.retriever.model.dense_encoder",
    "format_query": "hopscotch.retriever.model.query_template",
    "reciprocal_rank_fusion": "hopscotch.retriever.searchers.fusion",
    # training
    "train": "hopscotch.retriever.training.trainer",
    "load_recipe": "hopscotch.retriever.training.recipe",
    # DR-Synth
    "synthesize": "hopscotch.data_synth.pipeline",
    "SynthInputs": "hopscotch.data_synth.pipeline",
    "SynthConfig": "hopscotch.data_synth.config",
    # evaluation
    "evaluate": "hopscotch.retriever.evaluation.metrics",
    "compare_runs": "hopscotch.retriever.evaluation.metrics",
    # the loss kernels
    "infonce_loss": "hopscotch.kernels",
    "reference_infonce_loss": "hopscotch.kernels",
}

__all__ = ["__version__", *sorted(_EXPORTS)]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'hopscotch' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next lookup skips this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
