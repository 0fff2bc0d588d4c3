"""Exact late-interaction top-k over a whole multi-vector index: the reference the compressed (PLAID-style) search of
:mod:`hopscotch.retriever.index.multi_vector.store` is measured against in the cost-curve benchmark.

Every document's score is MaxSim (``sum over query tokens of the best inner product with a document token``) on the
float16 token vectors the shards keep (``shards/shard_XXXXX.tok.npy``), all queries at once: the query tokens are
stacked into one ``[Q, dim]`` matrix and each block of about ``block_tokens`` document tokens costs one product
``[Q, block]``, a per-document ``maximum.reduceat`` and a per-query ``add.reduceat``. Memory: ``4 * Q * block_tokens``
bytes (200 queries of 32 tokens, 8,192 tokens a block: 210 MB).

Example::

    rows = exact_maxsim_top("index_dir", [q_tokens_0, q_tokens_1], k=100)   # int64 [2, 100], -1 padded
"""

from __future__ import annotations

import os

import numpy as np

from hopscotch.retriever.index.layout import IndexMeta
from hopscotch.retriever.index.multi_vector.build import shard_tokens


def _merge(best_s: np.ndarray, best_r: np.ndarray, scores: np.ndarray, rows: np.ndarray, k: int):
    """Each query's top ``k`` of the kept ``(best_s, best_r)`` and a new block ``(scores [n, m], rows [m])``."""
    s = np.concatenate([best_s, scores], axis=1)
    r = np.concatenate([best_r, np.broadcast_to(rows, scores.shape)], axis=1)
    if s.shape[1] > k:
        keep = np.argpartition(-s, k - 1, axis=1)[:, :k]
        s, r = np.take_along_axis(s, keep, 1), np.take_along_axis(r, keep, 1)
    return s, r


def exact_maxsim_top(index_dir: str | os.PathLike, queries: list[np.ndarray], k: int,
                     block_tokens: int = 8192) -> np.ndarray:
    """Global rows ``[len(queries), k]`` (``-1`` padded) of the exact MaxSim top ``k`` of each query (``[tokens,
    dim]`` arrays), best first; documents without tokens are never ranked."""
    meta = IndexMeta.load(index_dir)
    q = np.concatenate([np.asarray(x, dtype=np.float32) for x in queries])
    q_starts = np.concatenate([[0], np.cumsum([len(x) for x in queries])[:-1]]).astype(np.int64)
    best_s = np.full((len(queries), 0), -np.inf, dtype=np.float32)
    best_r = np.zeros((len(queries), 0), dtype=np.int64)
    for shard in range(meta.num_shards):
        tokens, doclens = shard_tokens(index_dir, shard)
        offsets = np.concatenate([[0], np.cumsum(doclens)]).astype(np.int64)
        doc = 0
        while doc < len(doclens):
            stop = max(doc + 1, int(np.searchsorted(offsets, offsets[doc] + block_tokens, side="right")) - 1)
            stop = min(stop, len(doclens))
            live = np.flatnonzero(doclens[doc:stop] > 0) + doc
            if len(live):
                block = np.asarray(tokens[offsets[doc]:offsets[stop]], dtype=np.float32)
                sims = q @ block.T                                                        # [Q, block]
                per_doc = np.maximum.reduceat(sims, offsets[live] - offsets[doc], axis=1)  # [Q, live docs]
                scores = np.add.reduceat(per_doc, q_starts, axis=0)                       # [queries, live docs]
                best_s, best_r = _merge(best_s, best_r, scores, live + shard * meta.shard_size, k)
            doc = stop
    order = np.argsort(-best_s, axis=1, kind="stable")
    rows = np.take_along_axis(best_r, order, 1)
    if rows.shape[1] < k:
        rows = np.pad(rows, ((0, 0), (0, k - rows.shape[1])), constant_values=-1)
    return rows
