"""Hopscotch retriever: formats, BM25 and dense search, training, indexing, evaluation, serving."""

__version__ = "0.1.0"
