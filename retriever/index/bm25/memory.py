"""The bm25s BM25 backend (:class:`BM25Index`: the whole sparse score matrix in RAM, every posting of a query's
terms scored and all documents selected over: fastest on small corpora) and the BM25 index folder's manifest,
which names the backend a folder holds (read and checked by :func:`~.manifest.read_meta`): :func:`load_bm25_index` (and :meth:`BM25Index.load`),
which opens either backend by what ``hopscotch_bm25.json`` says, and :func:`auto_backend`, the rule ``bm25-index
--backend auto`` builds by. The package (:mod:`hopscotch.retriever.index.bm25`) re-exports all of them.

Example::

    from hopscotch.retriever.index.bm25 import BM25Index
    index = BM25Index.build(read_corpus("corpus.jsonl"))
    index.save("bm25/")
    hits = BM25Index.load("bm25/").search(["who directed Gummo"], k=10)  # [[(docid, score), ...]]
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.index.array_checks import check_file
from hopscotch.retriever.index.bm25.analyzer import Analyzer
from hopscotch.retriever.index.bm25.checks import check_bm25s_folder
from hopscotch.retriever.index.bm25.disk import DiskBM25Index
from hopscotch.retriever.index.bm25.manifest import BACKENDS, LAYOUT, META_FILE, REBUILD, read_meta
from hopscotch.retriever.index.bm25.term_stats import TermStats
from hopscotch.retriever.io.common import atomic_write
from hopscotch.retriever.io.corpus import Document
from hopscotch.retriever.io.progress import live_bars, progress
from hopscotch.retriever.model.query_template import format_document

DOCIDS_FILE = "docids.txt"
#: ``--backend auto`` builds bm25s below this many documents and disk from it on (docs/benchmarks.md, "BM25
#: backends"): in process the disk backend is faster from 10,000 documents, but a one-off ``search`` command also
#: pays numba's import (about half a second), and whole-process it passes bm25s between 20,000 and 100,000
AUTO_DISK_DOCS = 100_000


def auto_backend(num_docs: int) -> str:
    """The backend ``--backend auto`` builds for a corpus of ``num_docs`` documents."""
    return "disk" if num_docs >= AUTO_DISK_DOCS else "bm25s"


def load_bm25_index(folder: str | os.PathLike, mmap: bool = False, threads: int | None = None):
    """The index in ``folder``, of the backend its manifest names: a :class:`BM25Index` (bm25s) or a
    :class:`~hopscotch.retriever.index.bm25.disk.DiskBM25Index`; both answer ``search``, ``search_weighted``,
    ``score_documents``, ``corpus_scores``, ``row`` and ``docids`` alike (``threads``: the disk backend's threads
    for a batch of queries)."""
    meta = read_meta(folder)
    if meta["backend"] == "disk":
        return DiskBM25Index(folder, meta, threads=threads)
    return BM25Index._load_bm25s(Path(folder), meta, mmap=mmap)


def _stemmer(language: str | None):
    if not language:
        return None
    import Stemmer

    return Stemmer.Stemmer(language)


class BM25Index:
    """A bm25s index plus the docids of its rows and the tokenizer settings it was built with."""

    backend = "bm25s"
    thread_safe = False  # bm25s retrieval is not documented as thread-safe

    def __init__(self, model, docids: list[str], k1: float, b: float, stemmer: str | None, stopwords: str | None):
        self.model = model
        self.docids = docids
        self.k1, self.b = k1, b
        self.stemmer_language, self.stopwords = stemmer, stopwords
        self._stemmer = _stemmer(stemmer)
        self.analyzer = Analyzer(stemmer, stopwords)
        self._rows: dict[str, int] | None = None
        self.fingerprint: str | None = None

    # -- building ---------------------------------------------------------------------------------
    @classmethod
    def build(cls, docs: Iterable[Document], k1: float = 1.5, b: float = 0.75, stemmer: str | None = "english",
              stopwords: str | None = "en", chunk_size: int = 50_000, show_progress: bool = True) -> BM25Index:
        """Index documents (``title + " " + text``); the corpus is tokenized in chunks, never held as text."""
        import bm25s
        from bm25s.tokenization import Tokenizer

        tokenizer = Tokenizer(stopwords=stopwords or [], stemmer=_stemmer(stemmer))
        ids: list[list[int]] = []
        docids: list[str] = []
        chunk: list[str] = []
        bar = progress(desc="bm25 tokenize", unit="doc", show=show_progress)

        def flush():
            if chunk:
                ids.extend(tokenizer.tokenize(chunk, update_vocab=True, return_as="ids", show_progress=False))
                bar.update(len(chunk))
                chunk.clear()

        for doc in docs:
            docids.append(doc.docid)
            chunk.append(format_document(doc.title, doc.text))
            if len(chunk) >= chunk_size:
                flush()
        flush()
        bar.close()
        if not docids:
            raise UsageError("cannot build a BM25 index over an empty corpus")
        model = bm25s.BM25(k1=k1, b=b)
        vocab = tokenizer.get_vocab_dict()
        model.index((ids, vocab), show_progress=live_bars(show_progress))  # bm25s bars: a terminal only
        return cls(model, docids, k1, b, stemmer, stopwords)

    # -- persistence ------------------------------------------------------------------------------
    def save(self, folder: str | os.PathLike) -> None:
        """Write the index to ``folder`` atomically (built in a temp folder, then renamed)."""
        folder = Path(folder)
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", suffix=".tmp", dir=folder.parent))
        try:
            self.model.save(str(tmp), show_progress=False)
            with atomic_write(tmp / DOCIDS_FILE) as fh:
                fh.writelines(d + "\n" for d in self.docids)
            meta = {"backend": "bm25s", "layout": LAYOUT, "k1": self.k1, "b": self.b, "stemmer": self.stemmer_language,
                    "stopwords": self.stopwords, "num_docs": len(self.docids)}
            if self.fingerprint:
                meta["fingerprint"] = self.fingerprint
            (tmp / META_FILE).write_text(json.dumps(meta, indent=2))
            if folder.exists():
                shutil.rmtree(folder)
            os.replace(tmp, folder)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    @classmethod
    def load(cls, folder: str | os.PathLike, mmap: bool = False):
        """The index in ``folder`` of either backend (:func:`load_bm25_index`: a disk folder opens as a
        :class:`~hopscotch.retriever.index.bm25.disk.DiskBM25Index`)."""
        return load_bm25_index(folder, mmap=mmap)

    @classmethod
    def _load_bm25s(cls, folder: Path, meta: dict, mmap: bool = False) -> BM25Index:
        import bm25s

        check_bm25s_folder(folder, meta)  # one line naming a damaged file, before bm25s reads any
        try:
            model = bm25s.BM25.load(str(folder), mmap=mmap, show_progress=False)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"{folder}: bm25s cannot read it ({type(exc).__name__}: {str(exc)[:120]}); "
                             f"{REBUILD}") from None
        path = folder / DOCIDS_FILE
        check_file(path, REBUILD)
        try:
            docids = path.read_text(encoding="utf-8").split("\n")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"{path}: unreadable ({exc}); {REBUILD}") from None
        if docids and docids[-1] == "":
            docids.pop()
        if len(docids) != meta["num_docs"]:
            raise UsageError(f"{path}: {len(docids):,} docids for the {meta['num_docs']:,} documents of the index "
                             f"(one a line); {REBUILD}")
        index = cls(model, docids, meta["k1"], meta["b"], meta["stemmer"], meta["stopwords"])
        index.fingerprint = meta.get("fingerprint")
        return index

    # -- search -----------------------------------------------------------------------------------
    def tokenize_queries(self, queries: Sequence[str]) -> list[list[str]]:
        """Each query's terms (:class:`~hopscotch.retriever.index.bm25.analyzer.Analyzer`: bm25s's tokenizer,
        term for term, without its per-call set-up)."""
        return [self.analyzer.terms(q) for q in queries]

    def search(self, queries: Sequence[str], k: int = 100, show_progress: bool = False, threads: int | None = None
               ) -> list[list[tuple[str, float]]]:
        """Top-``k`` ``(docid, score)`` per query, best first; documents scoring 0 are left out. ``threads``:
        bm25s's ``n_threads`` (None or 0: this thread)."""
        if not queries:
            return []
        k = min(k, len(self.docids))
        tokens = self.tokenize_queries(queries)
        # bm25s rejects a query with no known token; give such queries an empty result instead
        vocab = self.model.vocab_dict
        known = [[t for t in q if t in vocab] for q in tokens]
        out: list[list[tuple[str, float]]] = [[] for _ in queries]
        live = [i for i, q in enumerate(known) if q]
        if not live:
            return out
        idx, scores = self.model.retrieve([known[i] for i in live], k=k, show_progress=show_progress,
                                          n_threads=threads or 0)
        docids = self.docids
        for i, rows, values in zip(live, idx.tolist(), scores.tolist()):  # Python lists: no numpy scalar a hit
            out[i] = [(docids[j], s) for j, s in zip(rows, values) if s > 0]
        return out

    def term_weights(self, parts: Sequence[tuple[str, float]]) -> dict[int, float]:
        """``{token id: weight}`` of a weighted bag of texts: each text tokenized by the index's analyzer, each
        occurrence of a known token adding the text's weight (a text repeated n times = weight n)."""
        weights: dict[int, float] = {}
        vocab = self.model.vocab_dict
        tokens = self.tokenize_queries([text for text, _ in parts])
        for (_, weight), toks in zip(parts, tokens):
            for t in toks:
                i = vocab.get(t)
                if i is not None:
                    weights[i] = weights.get(i, 0.0) + weight
        return weights

    def weighted_scores(self, weights: dict[int, float]) -> np.ndarray:
        """Every document's BM25 score for a weighted query: ``sum_t weight_t * bm25(t, d)`` from the index's
        stored per-term scores (each distinct term's postings read once, however long the query)."""
        scores = self.model.scores
        data, indices, indptr = scores["data"], scores["indices"], scores["indptr"]
        ids = np.fromiter(weights, dtype=np.int64, count=len(weights))
        w = np.fromiter(weights.values(), dtype=np.float64, count=len(weights))
        starts, ends = indptr[ids], indptr[ids + 1]
        lengths = (ends - starts).astype(np.int64)
        out = np.zeros(len(self.docids))
        if lengths.sum():
            rows = np.concatenate([indices[a:b] for a, b in zip(starts, ends)])
            vals = np.concatenate([data[a:b] for a, b in zip(starts, ends)]) * np.repeat(w, lengths)
            out = np.bincount(rows, weights=vals, minlength=len(self.docids))
        nonoccurrence = getattr(self.model, "nonoccurrence_array", None)
        if nonoccurrence is not None:  # BM25L / BM25+ (bm25s adds a score for absent terms)
            out = out + float((nonoccurrence[ids] * w).sum())
        return out

    def search_weighted(self, queries: Sequence[Sequence[tuple[str, float]]], k: int = 100,
                        threads: int | None = None) -> list[list[tuple[str, float]]]:
        """:meth:`search` for weighted queries, each a sequence of ``(text, weight)`` (the reasoning-aware BM25
        query of :mod:`hopscotch.retriever.searchers.bm25_expansion`): top-``k`` ``(docid, score)``, best first
        (ties by row), documents scoring 0 left out."""
        return self._top_weighted([self.term_weights(parts) for parts in queries], k)

    def _top_weighted(self, queries: Sequence[dict[int, float]], k: int) -> list[list[tuple[str, float]]]:
        k = min(k, len(self.docids))
        out = []
        for weights in queries:
            if not weights or k <= 0:
                out.append([])
                continue
            scores = self.weighted_scores(weights)
            top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
            top = top[np.lexsort((top, -scores[top]))]
            out.append([(self.docids[j], float(scores[j])) for j in top if scores[j] > 0])
        return out

    def search_terms(self, queries: Sequence[Mapping[str, float]], k: int = 100, threads: int | None = None
                     ) -> list[list[tuple[str, float]]]:
        """:meth:`search_weighted` for queries given as analysed terms and their weights (``{term: weight}``, the
        expansion's :class:`~hopscotch.retriever.searchers.bm25_expansion.TermQuery` weights); unknown terms and
        weights <= 0 are left out."""
        vocab = self.model.vocab_dict
        weights = [getattr(q, "weights", q) for q in queries]
        return self._top_weighted([{vocab[t]: float(w) for t, w in q.items() if w > 0 and t in vocab}
                                   for q in weights], k)

    @property
    def num_docs(self) -> int:
        return len(self.docids)

    def term_stats(self):
        """What the reasoning-aware expansion reads of this index (analyser, document frequencies, size)."""
        return TermStats(self.analyzer, self.document_frequencies, self.num_docs)

    def document_frequencies(self, terms: Sequence[str]) -> list[int]:
        """How many documents hold each term (0 for a term the index lacks)."""
        vocab, indptr = self.model.vocab_dict, self.model.scores["indptr"]
        out = []
        for t in terms:
            i = vocab.get(t)
            out.append(0 if i is None else int(indptr[i + 1] - indptr[i]))
        return out

    def row(self, docid: str) -> int | None:
        """The index row of ``docid`` (None for a document not in the index)."""
        if self._rows is None:
            self._rows = {d: i for i, d in enumerate(self.docids)}
        return self._rows.get(docid)

    def corpus_scores(self, query: str) -> np.ndarray | None:
        """BM25 scores of ``query`` against every row (None when no query token is in the vocabulary)."""
        tokens = [t for t in self.tokenize_queries([query])[0] if t in self.model.vocab_dict]
        return self.model.get_scores(tokens) if tokens else None

    def score_documents(self, query: str, docids: Sequence[str]) -> np.ndarray:
        """BM25 scores of ``query`` against the given documents (0 for unknown ones)."""
        all_scores = self.corpus_scores(query)
        if all_scores is None:
            return np.zeros(len(docids), dtype=np.float32)
        rows = [self.row(d) for d in docids]
        return np.array([0.0 if r is None else all_scores[r] for r in rows], dtype=np.float32)
