"""Dense searcher over a local sharded index folder (``hopscotch index``): encoder + FAISS + docstore."""

from __future__ import annotations

import os
import sys
from typing import Any, Sequence

from hopscotch.retriever.searchers.base import BaseSearcher, Ranked, per_query
from hopscotch.retriever.searchers.bm25 import document_dict


class DenseSearcher(BaseSearcher):
    """:param index_dir: a finished index folder
    :param model: encoder for queries; default the model recorded in the index
    :param faiss_name: which built FAISS index to use (default: the folder's default, else exact Flat)
    :param nprobe, ef_search, refine: query-time FAISS parameters (see :mod:`hopscotch.retriever.index.faiss_index`)
    :param instruction: prefix of every encoded query (None: the trained model's own instruction, else "")
    :param encoder: an already-loaded :class:`~hopscotch.retriever.model.dense_encoder.DenseEncoder` (shares a model in-process)

    Reasoning-aware queries follow :func:`~hopscotch.retriever.model.query_template.format_query_truncated`: when the
    reasoning does not fit the query length (a trained model's ``query_max_len``, else the encoder's max
    length) its *earliest* words are dropped, so the query itself is never cut. A trained model with
    separate towers encodes queries with its ``query_encoder/``.
    """

    name = "dense"

    def __init__(self, index_dir: str | os.PathLike, model: str | os.PathLike | None = None,
                 faiss_name: str | None = None, nprobe: int | None = None, ef_search: int | None = None,
                 refine: int = 1, instruction: str | None = None, batch_size: int = 64, device: str | None = None,
                 encoder=None, use_gpu: bool | None = None):
        from hopscotch.retriever.index.faiss_index import ShardedFaissIndex
        from hopscotch.retriever.index.layout import IndexMeta, ShardIds
        from hopscotch.retriever.model.config import model_settings
        from hopscotch.retriever.model.dense_encoder import DenseEncoder

        self.meta = IndexMeta.load(index_dir)
        self.index_dir = index_dir
        model = model or self.meta.model_path
        self.settings = model_settings(model)
        if encoder is None:
            tower = self.settings.query_tower or model
            encoder = DenseEncoder(tower, max_length=self.meta.max_length, batch_size=batch_size, device=device)
        self.encoder = encoder
        self.query_max_len = self.settings.query_max_len or self.encoder.model.max_seq_length
        if self.encoder.dim != self.meta.dim:
            from hopscotch.retriever.errors import UsageError
            raise UsageError(f"model {model} encodes {self.encoder.dim}-d vectors but {index_dir} holds "
                             f"{self.meta.dim}-d ones (built with {self.meta.model})")
        self.index = ShardedFaissIndex.load(index_dir, name=faiss_name, use_gpu=use_gpu, meta=self.meta)
        self.ids = ShardIds(index_dir, self.meta)
        self.nprobe, self.ef_search, self.refine = nprobe, ef_search, refine
        self.instruction = self.settings.instruction if instruction is None else instruction
        self._docstore = None

    @property
    def docstore(self):
        if self._docstore is None and self.meta.docstore:
            from hopscotch.retriever.index.docstore import DocStore
            self._docstore = DocStore(self.index_dir, self.meta)
        return self._docstore

    def query_texts(self, queries: Sequence[str], reasonings=None, reasoning_aware=False) -> list[str]:
        from hopscotch.retriever.model.query_template import format_queries

        reasonings = per_query(reasonings, len(queries), "reasonings")
        aware = per_query(reasoning_aware, len(queries), "reasoning_aware")
        return format_queries(self.encoder.model.tokenizer, self.query_max_len, queries, reasonings,
                              instruction=self.instruction, reasoning_aware=aware)

    def search_batch(self, queries: Sequence[str], k: int = 10, reasonings: Sequence[str | None] | None = None,
                     reasoning_aware: bool | Sequence[bool] = False, show_progress: bool = False) -> list[Ranked]:
        if not queries:
            return []
        texts = self.query_texts(queries, reasonings, reasoning_aware)
        emb = self.encoder.encode_texts(texts, show_progress=show_progress, desc="encode queries")
        scores, rows = self.index.search(emb, k, nprobe=self.nprobe, ef_search=self.ef_search, refine=self.refine)
        out = []
        for srow, rrow in zip(scores, rows):
            out.append([(self.ids.docid(r), float(s)) for s, r in zip(srow, rrow) if r >= 0])
        return out

    def get_document(self, docid: str) -> dict[str, Any] | None:
        store = self.docstore
        if store is None:
            print(f"warning: {self.index_dir} has no docstore", file=sys.stderr)
            return None
        return document_dict(store.get(docid))
