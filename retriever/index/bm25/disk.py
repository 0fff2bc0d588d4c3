"""The disk BM25 backend: memory-mapped impact postings, answered top-k with block-max MaxScore.

The same scores as the bm25s backend (:mod:`.memory`): the same terms (:class:`~.analyzer.Analyzer`), and each
posting's impact computed by bm25s's formula (Lucene's BM25: ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))`` times
``tf / (tf + k1 (1 - b + b dl / avgdl))``, exact document lengths, any ``k1``/``b``), in float32 as bm25s stores
them; a query's score is the sum of its terms' impacts (weighted: ``sum_t w_t impact``), added in float64. What
differs is how the top k is found: bm25s scores every posting of every query term and selects over all documents in
RAM; here the postings stay on disk (memory-mapped, so only what queries touch is read) and
:func:`~.kernel.top_k` skips the postings that cannot reach the top k, exactly. The folder is written by
:func:`~.disk_build.build_disk_index` (streaming, resumable)::

    hopscotch_bm25.json                 backend "disk", k1, b, analyzer, num_docs, num_terms, num_postings, avgdl
    terms.hashes.npy                    uint64 [T]: the terms' hashes (:func:`~.analyzer.term_hashes`), sorted:
                                        a term's id is its place here
    terms.txt, terms.offsets            the terms themselves in id order (one a line; uint64 byte offsets, T + 1)
    terms.max.npy                       float32 [T]: each term's largest impact
    postings.indptr.npy                 int64 [T + 1]: term t's postings are [indptr[t], indptr[t + 1])
    postings.rows.npy                   uint32 [P]: corpus rows, ascending within a term
    postings.impacts.npy                float32 [P]
    blocks.ptr.npy, blocks.max.npy      each term's blocks of ``block`` postings and their largest impact
    doclens.npy                         uint32 [N]: each document's length in terms (bm25s counts an empty one as 1)
    docids.*, lookup_*                  rows <-> docids (:mod:`.docids`)
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.index.bm25.analyzer import Analyzer, term_hashes
from hopscotch.retriever.index.bm25.checks import check_disk_folder
from hopscotch.retriever.index.bm25.docids import DocidTable
from hopscotch.retriever.index.bm25.manifest import REBUILD, TERMS_OFFSETS, TERMS_TEXT
from hopscotch.retriever.index.bm25.term_stats import TermStats

#: rows a search window spans (:mod:`.kernel`)
WINDOW = 8192
#: terms whose document frequency an index remembers (:meth:`DiskBM25Index.document_frequencies`)
DF_MEMO_TERMS = 1_000_000


def default_threads() -> int:
    """Threads a batch of queries is searched on by default: the CPUs this process may use, at most 8."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(8, cpus))


class DiskBM25Index:
    """A finished disk BM25 folder (module doc), searched with the calls of
    :class:`~hopscotch.retriever.index.bm25.BM25Index` (``search``, ``search_weighted``, ``score_documents``,
    ``corpus_scores``, ``row``, ``docids``). Thread-safe; a batch of queries is spread over ``threads`` threads (the
    kernel runs without the GIL)."""

    backend = "disk"
    thread_safe = True

    def __init__(self, folder: str | os.PathLike, meta: dict, threads: int | None = None):
        self.folder = Path(folder)
        self.meta = meta
        self.k1, self.b = float(meta["k1"]), float(meta["b"])
        self.stemmer_language, self.stopwords = meta.get("stemmer"), meta.get("stopwords")
        # the stopwords as the build recorded them (folders from before that: bm25s's list of that name)
        self.analyzer = Analyzer(self.stemmer_language, self.stopwords,
                                 (meta.get("analyzer") or {}).get("stopword_list"))
        self.num_docs = int(meta["num_docs"])
        self.block = int(meta["block"])
        arrays, self._term_offsets = check_disk_folder(self.folder, meta)  # one line naming a damaged file
        self._hashes, self._term_max = arrays["terms.hashes"], arrays["terms.max"]
        self._indptr, self._rows = arrays["postings.indptr"], arrays["postings.rows"]
        self._impacts, self._bptr, self._bmax = arrays["postings.impacts"], arrays["blocks.ptr"], arrays["blocks.max"]
        self._terms_fh = open(self.folder / TERMS_TEXT, "rb")  # noqa: SIM115 - pread for the index's life
        self.docids = DocidTable(self.folder, self.num_docs)
        self.threads = default_threads() if threads is None else max(1, int(threads))
        self._df_memo: dict[str, int] = {}

    # -- terms ------------------------------------------------------------------------------------
    def _term(self, term_id: int) -> str:
        a, b = int(self._term_offsets[term_id]), int(self._term_offsets[term_id + 1])
        return os.pread(self._terms_fh.fileno(), b - a - 1, a).decode("utf-8", errors="replace")

    def term_ids(self, terms: Sequence[str]) -> np.ndarray:
        """Each term's id, -1 for a term the index does not hold."""
        if not terms:
            return np.zeros(0, dtype=np.int64)
        hashes = term_hashes(terms)
        pos = np.searchsorted(self._hashes, hashes)
        out = np.full(len(terms), -1, dtype=np.int64)
        for i, (p, h, t) in enumerate(zip(pos.tolist(), hashes.tolist(), terms)):
            if p < len(self._hashes) and int(self._hashes[p]) == h and self._term(p) == t:
                out[i] = p
        return out

    def term_weights(self, parts: Sequence[tuple[str, float]]) -> dict[str, float]:
        """``{term: weight}`` of a weighted bag of texts: every occurrence of a term adds its text's weight (the
        bm25s backend's rule)."""
        weights: dict[str, float] = {}
        for text, weight in parts:
            for term, n in self.analyzer.counts(text).items():
                weights[term] = weights.get(term, 0.0) + weight * n
        return weights

    def _query(self, weights: dict[str, float]) -> tuple[np.ndarray, np.ndarray]:
        """The known terms of a weighted query with a positive weight: ``(term ids, weights)``."""
        terms = [t for t, w in weights.items() if w > 0]
        ids = self.term_ids(terms)
        keep = ids >= 0
        return ids[keep], np.asarray([weights[t] for t in terms], dtype=np.float64)[keep]

    # -- top k ------------------------------------------------------------------------------------
    def _top(self, queries: list[tuple[np.ndarray, np.ndarray]], k: int) -> list[list[tuple[str, float]]]:
        from hopscotch.retriever.index.bm25.kernel import top_k_batch

        qptr = np.zeros(len(queries) + 1, dtype=np.int64)
        qptr[1:] = np.cumsum([len(ids) for ids, _ in queries])
        ids = np.concatenate([ids for ids, _ in queries]) if queries else np.zeros(0, dtype=np.int64)
        weights = np.concatenate([w for _, w in queries]) if queries else np.zeros(0)
        rows = np.zeros((len(queries), max(k, 1)), dtype=np.int64)
        scores = np.zeros((len(queries), max(k, 1)), dtype=np.float64)
        counts = np.zeros(len(queries), dtype=np.int64)
        top_k_batch(self._rows, self._impacts, self._bmax, self.block, qptr, self._indptr[ids],
                    self._indptr[ids + 1], self._bptr[ids], weights, k, WINDOW, rows, scores, counts)
        if (counts < 0).any():  # the kernel met a row that does not ascend within its term
            raise UsageError(f"{self.folder / 'postings.rows.npy'}: rows must ascend within each term; {REBUILD}")
        self._check_rows(np.concatenate([r[:n] for r, n in zip(rows, counts.tolist())]))
        out = []
        for r, s, n in zip(rows, scores, counts.tolist()):
            out.append(list(zip(self.docids.many(r[:n].tolist()), s[:n].tolist())))
        return out

    def _run(self, queries: list[tuple[np.ndarray, np.ndarray]], k: int, threads: int | None
             ) -> list[list[tuple[str, float]]]:
        k = min(k, self.num_docs)
        if k <= 0 or not queries:
            return [[] for _ in queries]
        threads = min(self.threads if threads is None else max(1, threads), len(queries))
        if threads == 1:
            return self._top(queries, k)
        step = -(-len(queries) // threads)
        chunks = [queries[i:i + step] for i in range(0, len(queries), step)]
        with ThreadPoolExecutor(max_workers=len(chunks)) as pool:
            return [hits for part in pool.map(lambda c: self._top(c, k), chunks) for hits in part]

    def search(self, queries: Sequence[str], k: int = 100, show_progress: bool = False, threads: int | None = None
               ) -> list[list[tuple[str, float]]]:
        """Top-``k`` ``(docid, score)`` per query, best first (ties by row); documents scoring 0 are left out. A
        term repeated in a query counts as often as it appears (as bm25s counts it)."""
        return self._run([self._query(self.analyzer.counts(q)) for q in queries], k, threads)

    def search_weighted(self, queries: Sequence[Sequence[tuple[str, float]]], k: int = 100,
                        threads: int | None = None) -> list[list[tuple[str, float]]]:
        """:meth:`search` for weighted queries (``(text, weight)`` parts: the reasoning-aware expansion)."""
        return self._run([self._query(self.term_weights(parts)) for parts in queries], k, threads)

    def search_terms(self, queries: Sequence[Mapping[str, float]], k: int = 100, threads: int | None = None
                     ) -> list[list[tuple[str, float]]]:
        """:meth:`search` for queries given as analysed terms and their weights (``{term: weight}``: the
        reasoning-aware expansion's term queries)."""
        return self._run([self._query(dict(getattr(q, "weights", q))) for q in queries], k, threads)

    def term_stats(self):
        """What the reasoning-aware expansion reads of this index (analyser, document frequencies, size)."""
        return TermStats(self.analyzer, self.document_frequencies, self.num_docs)

    def document_frequencies(self, terms: Sequence[str]) -> list[int]:
        """How many documents hold each term (0 for a term the index lacks): its postings' count. Found by the terms'
        64-bit hashes alone (a term of another spelling with the same hash is a 2^-64 chance; the search itself
        checks the spelling), and remembered for the index's life (an agent's thinking repeats itself)."""
        memo = self._df_memo   # shared by the search threads: read into a local table, never iterated
        known = {t: memo.get(t) for t in dict.fromkeys(terms)}
        todo = [t for t, df in known.items() if df is None]
        if todo:
            if len(memo) + len(todo) > DF_MEMO_TERMS:
                memo.clear()
            hashes = term_hashes(todo)
            pos = np.searchsorted(self._hashes, hashes).clip(max=max(len(self._hashes) - 1, 0))
            found = (np.asarray(self._hashes[pos]) == hashes) if len(self._hashes) else np.zeros(len(todo), bool)
            df = np.zeros(len(todo), dtype=np.int64)
            rows = pos[found]
            df[found] = np.asarray(self._indptr[rows + 1]) - np.asarray(self._indptr[rows])
            known.update(zip(todo, df.tolist()))
            memo.update(zip(todo, df.tolist()))
        return [known[t] for t in terms]

    # -- exact scores of given documents ----------------------------------------------------------
    def row(self, docid: str) -> int | None:
        return self.docids.row(docid)

    def _check_rows(self, rows: np.ndarray) -> None:
        """Rows read from the postings are documents of the index (the checks on open sample them on a large one)."""
        if len(rows) and int(rows.max()) >= self.num_docs:
            raise UsageError(f"{self.folder / 'postings.rows.npy'}: row {int(rows.max()):,} out of range (the index "
                             f"holds {self.num_docs:,} documents); {REBUILD}")

    def _postings(self, term_id: int) -> tuple[np.ndarray, np.ndarray]:
        a, b = int(self._indptr[term_id]), int(self._indptr[term_id + 1])
        rows = self._rows[a:b]
        self._check_rows(rows)
        return rows, self._impacts[a:b]

    def score_documents(self, query: str, docids: Sequence[str]) -> np.ndarray:
        """BM25 scores of ``query`` against the given documents (0 for unknown ones)."""
        out = np.zeros(len(docids), dtype=np.float64)
        rows = np.asarray([-1 if (r := self.row(d)) is None else r for d in docids], dtype=np.int64)
        ids, weights = self._query(self.analyzer.counts(query))
        for t, w in zip(ids.tolist(), weights.tolist()):
            post_rows, impacts = self._postings(t)
            pos = np.searchsorted(post_rows, rows.clip(min=0)).clip(max=max(len(post_rows) - 1, 0))
            hit = (rows >= 0) & (len(post_rows) > 0) & (np.asarray(post_rows[pos]) == rows)
            out[hit] += w * np.asarray(impacts[pos[hit]], dtype=np.float64)
        return out.astype(np.float32)

    def corpus_scores(self, query: str) -> np.ndarray | None:
        """BM25 scores of ``query`` against every row (None when no query term is in the index): reads every posting
        of its terms (for small corpora: DR-Synth's lexical oracle)."""
        ids, weights = self._query(self.analyzer.counts(query))
        if not len(ids):
            return None
        out = np.zeros(self.num_docs, dtype=np.float64)
        for t, w in zip(ids.tolist(), weights.tolist()):
            post_rows, impacts = self._postings(t)
            out[np.asarray(post_rows, dtype=np.int64)] += w * np.asarray(impacts, dtype=np.float64)
        return out
