"""Search-time reader of a multi-vector index (``mv/``, built by :mod:`hopscotch.retriever.index.multi_vector.build`).

Candidate generation follows PLAID's first two stages, on the compressed index only:

1. **probe**: each query token's ``nprobe`` best centroids; the candidates are the documents of their inverted
   lists (``ivf.npy``);
2. **centroid interaction**: each candidate is scored by MaxSim with every document token replaced by its
   centroid (``sum_q max_t <q, c(t)>``, from the ``[query tokens, centroids]`` score matrix and the token codes
   alone), and the best ``candidates`` are kept;

then the caller scores those exactly on the decompressed token vectors (:meth:`MultiVectorStore.document_vectors`),
e.g. with :meth:`hopscotch.retriever.searchers.rerank.MultiVectorReranker.scores`. Codes and residuals are memory-
mapped; the per-document token offsets (8 bytes a document), each document's distinct centroids (4 bytes each) and
the inverted file are held in RAM.

Example (not run: it needs a multi-vector index folder)::

    store = MultiVectorStore("index_dir")
    rows, approx = store.candidates(query_tokens, nprobe=4, candidates=256)
    vectors = store.document_vectors(rows)              # [float32 tensor (n_tokens, dim)] per row
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.index.layout import IndexMeta, shard_file
from hopscotch.retriever.index.multi_vector.build import IVF_FILE, IVF_OFFSETS_FILE, MV_DIR, mv_file
from hopscotch.retriever.index.multi_vector.codec import ResidualCodec
from hopscotch.retriever.index.multi_vector.files import check_ivf, check_shard, load_array


TOKEN_BLOCK = 4_000_000   # query tokens x distinct centroids scored per block


def _ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The concatenation of ``arange(s, e)`` for each pair, vectorised."""
    lens = ends - starts
    total = int(lens.sum())
    if not total:
        return np.zeros(0, dtype=np.int64)
    shift = np.repeat(starts - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens)
    return np.arange(total, dtype=np.int64) + shift


class MultiVectorStore:
    """The compressed token vectors, their codec and the inverted file of one index folder."""

    def __init__(self, index_dir: str | os.PathLike, meta: IndexMeta | None = None):
        self.index_dir = Path(index_dir)
        self.meta = meta or IndexMeta.load(index_dir)
        if not self.meta.multi_vector:
            raise UsageError(f"{index_dir}: not a multi-vector index (its model is single-vector, or the build "
                             "stopped before the token codec: rerun 'hopscotch index' with the same flags)")
        folder = self.index_dir / MV_DIR
        self.codec = ResidualCodec.load(folder)
        n_cent, dim = self.codec.centroids.shape
        # every file through the one validated reader (multi_vector.files): sizes, dtypes, ranges, finiteness
        self.ivf = load_array(folder / IVF_FILE, mmap=True)
        self.ivf_offsets = load_array(folder / IVF_OFFSETS_FILE)
        self.codes, self.residuals, self.token_offsets = [], [], []
        doc_cents, doc_counts = [], []
        num_docs = 0
        for shard in range(self.meta.num_shards):
            files = {kind: mv_file(index_dir, shard, f"{kind}.npy")
                     for kind in ("codes", "residuals", "doc_centroids", "doc_centroid_counts")}
            files["doclens"] = shard_file(index_dir, shard, "doclens.npy")
            arrays = {kind: load_array(path, mmap=kind in ("codes", "residuals")) for kind, path in files.items()}
            check_shard(files, arrays, n_cent, dim, self.codec.nbits)
            self.codes.append(arrays["codes"])
            self.residuals.append(arrays["residuals"])
            doclens = np.asarray(arrays["doclens"], dtype=np.int64)
            num_docs += len(doclens)
            offsets = np.zeros(len(doclens) + 1, dtype=np.int64)
            np.cumsum(doclens, out=offsets[1:])
            self.token_offsets.append(offsets)   # document i's tokens: codes[offsets[i]:offsets[i + 1]]
            doc_cents.append(arrays["doc_centroids"])
            doc_counts.append(arrays["doc_centroid_counts"])
        check_ivf(folder / IVF_FILE, folder / IVF_OFFSETS_FILE, self.ivf, self.ivf_offsets, n_cent, num_docs)
        # each document's distinct centroids (CSR over global rows, built with the inverted file): what centroid
        # interaction scores
        self.doc_centroids = np.concatenate(doc_cents) if doc_cents else np.zeros(0, np.int32)
        counts = np.concatenate(doc_counts) if doc_counts else np.zeros(0, np.int64)
        self.doc_centroid_offsets = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(counts, out=self.doc_centroid_offsets[1:])

    @property
    def dim(self) -> int:
        return self.codec.dim

    def _query_centroid_scores(self, query: np.ndarray) -> np.ndarray:
        """``float32 [query tokens, centroids]``: what probing and centroid interaction both read."""
        return np.asarray(query, dtype=np.float32) @ self.codec.centroids.T

    def probe(self, query: np.ndarray, nprobe: int, *, _scores: np.ndarray | None = None) -> np.ndarray:
        """Sorted unique rows of the documents in the inverted lists of each query token's ``nprobe`` best
        centroids."""
        scores = self._query_centroid_scores(query) if _scores is None else _scores
        nprobe = min(nprobe, scores.shape[1])
        best = np.argpartition(-scores, nprobe - 1, axis=1)[:, :nprobe]
        lists = [self.ivf[self.ivf_offsets[c]:self.ivf_offsets[c + 1]] for c in np.unique(best)]
        return np.unique(np.concatenate(lists)) if lists else np.zeros(0, np.int64)

    def centroid_scores(self, query: np.ndarray, rows: np.ndarray, *, _scores: np.ndarray | None = None) -> np.ndarray:
        """PLAID's centroid interaction: MaxSim of ``query`` against each document's distinct token centroids.

        Per block of documents: the ``[query tokens, centroids]`` scores of their centroids, gathered in CSR order
        (``[query tokens, entries]``), reduced to each document's maximum per query token along the contiguous
        axis (``np.maximum.reduceat``), then summed over the query tokens (a document without centroids
        scores 0)."""
        import torch

        scores = self._query_centroid_scores(query) if _scores is None else _scores     # [q, C]
        num_q = scores.shape[0]
        rows = np.asarray(rows, dtype=np.int64)
        out = np.zeros(len(rows), dtype=np.float32)
        per_block = max(1, TOKEN_BLOCK // max(num_q, 1))
        start = 0
        while start < len(rows):
            starts = self.doc_centroid_offsets[rows[start:]]
            ends = self.doc_centroid_offsets[rows[start:] + 1]
            stop = start + max(1, int(np.searchsorted(np.cumsum(ends - starts), per_block, side="right")))
            starts, ends = starts[:stop - start], ends[:stop - start]
            cents = self.doc_centroids[_ranges(starts, ends)]
            if len(cents) and num_q:
                lens = ends - starts
                filled = np.flatnonzero(lens)
                firsts = (np.cumsum(lens) - lens)[filled]            # where each non-empty document's run begins
                best = np.full((num_q, stop - start), -np.inf, dtype=np.float32)
                best[:, filled] = np.maximum.reduceat(np.take(scores, cents, axis=1), firsts, axis=1)
                best_t = torch.from_numpy(best)                      # [q, docs]: the sum as it always was
                out[start:stop] = torch.where(torch.isinf(best_t), 0.0, best_t).sum(dim=0).numpy()
            start = stop
        return out

    def candidates(self, query: np.ndarray, nprobe: int = 4, candidates: int = 256,
                   plain: np.ndarray | None = None, weight: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
        """The best ``candidates`` rows by centroid interaction and their approximate scores, best first. When the
        ``nprobe`` best centroids of the query tokens list fewer than ``candidates`` documents, more centroids are
        probed (twice as many each time, up to all of them), so a search of ``k <= candidates`` answers ``k`` hits
        whenever the index holds ``k`` documents with tokens (a small index, or few tokens a centroid: dim 7 at 1 bit).

        With ``plain`` (the query-only encoding under the query mix) both encodings probe, and the approximate
        score is ``weight * cs(query) / |query| + (1 - weight) * cs(plain) / |plain|`` as the exact one is."""
        scores = self._query_centroid_scores(query)       # once for probing and centroid interaction
        plain_scores = None if plain is None else self._query_centroid_scores(plain)
        reachable = min(candidates, len(self.doc_centroid_offsets) - 1)
        while True:
            rows = self.probe(query, nprobe, _scores=scores)
            if plain is not None:
                rows = np.union1d(rows, self.probe(plain, nprobe, _scores=plain_scores))
            if len(rows) >= reachable or nprobe >= scores.shape[1]:
                break
            nprobe *= 2
        if not len(rows):
            return rows, np.zeros(0, dtype=np.float32)
        approx = self.centroid_scores(query, rows, _scores=scores)
        if plain is not None:
            approx = (weight * approx / max(len(query), 1)
                      + (1 - weight) * self.centroid_scores(plain, rows, _scores=plain_scores) / max(len(plain), 1))
        keep = np.argsort(-approx, kind="stable")[:candidates]
        return rows[keep], approx[keep]

    def document_vectors(self, rows) -> list:
        """The decompressed token vectors of each row, float32 tensors ``(n_tokens, dim)`` (one decompression per
        shard for all the rows in it)."""
        import torch

        rows = np.asarray(rows, dtype=np.int64)
        out: list = [None] * len(rows)
        shards, local = np.divmod(rows, self.meta.shard_size)
        for shard in np.unique(shards):
            where = np.flatnonzero(shards == shard)
            offsets = self.token_offsets[shard]
            starts, ends = offsets[local[where]], offsets[local[where] + 1]
            tokens = _ranges(starts, ends)
            vectors = torch.from_numpy(self.codec.decompress(self.codes[shard][tokens], self.residuals[shard][tokens]))
            for i, part in zip(where, torch.split(vectors, (ends - starts).tolist())):
                out[i] = part
        return out

    def nbytes(self) -> dict[str, int]:
        """Bytes on disk of the compressed index (codes, residuals, inverted file, centroids) and of the raw
        float16 token vectors kept beside it in ``shards/``."""
        compressed = sum(f.stat().st_size for f in (self.index_dir / MV_DIR).iterdir() if f.is_file())
        raw = sum(p.stat().st_size for p in (self.index_dir / "shards").glob("*.tok.npy"))
        return {"compressed": compressed, "raw_tokens": raw}
