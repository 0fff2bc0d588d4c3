"""BM25 index folders and their two backends, which score alike: bm25s (:mod:`.memory`: the whole sparse score
matrix in RAM, every posting of a query's terms scored and all documents selected over: fastest on small corpora)
and disk (:mod:`.disk`: the same impacts in memory-mapped postings, built by a streaming, resumable build,
:mod:`.disk_build` then :mod:`.disk_merge`, answered top-k with block-max MaxScore, :mod:`.kernel`, which skips
what cannot reach the top k; its docid table: :mod:`.docids`). Both index the terms of
:class:`~.analyzer.Analyzer` (English stemming and stopwords by default) over ``title + " " + text`` with bm25s's
Lucene scoring (``k1`` 1.5, ``b`` 0.75 by default); :func:`load_bm25_index` (and :meth:`BM25Index.load`) opens
either by what ``hopscotch_bm25.json`` says (:mod:`.manifest`; every file checked on open: :mod:`.checks`), and :func:`auto_backend` is the rule ``bm25-index --backend auto``
builds by. ``bm25-index --plan``'s sizes: :mod:`.plan`.

Example::

    from hopscotch.retriever.index.bm25 import BM25Index
    index = BM25Index.build(read_corpus("corpus.jsonl"))
    index.save("bm25/")
    hits = BM25Index.load("bm25/").search(["who directed Gummo"], k=10)  # [[(docid, score), ...]]
"""

from __future__ import annotations

from hopscotch.retriever.index.bm25.manifest import BACKENDS, META_FILE, read_meta
from hopscotch.retriever.index.bm25.memory import AUTO_DISK_DOCS, DOCIDS_FILE, BM25Index, auto_backend, load_bm25_index

__all__ = ["AUTO_DISK_DOCS", "BACKENDS", "DOCIDS_FILE", "META_FILE", "BM25Index", "auto_backend", "load_bm25_index",
           "read_meta"]
