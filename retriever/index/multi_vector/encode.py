"""The encoder :func:`hopscotch.retriever.index.encode.encode_corpus` uses for a multi-vector model.

It has the single-vector encoder's interface (``encode_texts``, ``dim``, ``device``) and returns each document's
mean token vector, normalised (the shard's ``emb.npy``); the token vectors themselves and their counts are left in
:attr:`TokenShardEncoder.extra` (``{"tok.npy": float16 [T, dim], "doclens.npy": int32 [n]}``), which the encoder
writes beside the shard. Documents are formatted by the model itself (its ``[D]`` marker or prompt, the
punctuation skiplist, its ``passage_max_len``), as :class:`~hopscotch.retriever.model.multi_vector.MultiVectorModel`
encodes them everywhere else.
"""

from __future__ import annotations

import numpy as np


class TokenShardEncoder:
    """:param model: a :class:`~hopscotch.retriever.model.multi_vector.MultiVectorModel`."""

    def __init__(self, model, batch_size: int = 32):
        self.model, self.batch_size = model, batch_size
        self.extra: dict[str, np.ndarray] = {}

    @classmethod
    def load(cls, path, batch_size: int = 32, device: str | None = None) -> TokenShardEncoder:
        from hopscotch.retriever.model.multi_vector import load_multi_vector_model

        return cls(load_multi_vector_model(path, device=device), batch_size)

    @property
    def dim(self) -> int:
        return self.model.dim

    @property
    def device(self):
        return self.model.st.device

    def encode_texts(self, texts, batch_size: int | None = None, **_) -> np.ndarray:
        """Mean token vector per text (normalised, float32 ``[n, dim]``); the tokens go to :attr:`extra`."""
        vectors = self.model.encode_documents(list(texts), batch_size=batch_size or self.batch_size)
        doclens = np.array([v.shape[0] for v in vectors], dtype=np.int32)
        tokens = (np.concatenate([v.numpy() for v in vectors]) if vectors and doclens.sum()
                  else np.zeros((0, self.dim), dtype=np.float32))
        pooled = np.stack([v.numpy().mean(axis=0) if len(v) else np.zeros(self.dim, np.float32) for v in vectors])
        pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        self.extra = {"tok.npy": tokens.astype(np.float16), "doclens.npy": doclens}
        return pooled.astype(np.float32)
