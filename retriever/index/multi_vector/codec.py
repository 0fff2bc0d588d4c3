"""The residual codec of a multi-vector (late-interaction) index, PLAID / ColBERTv2 style.

Every token vector ``v`` (unit length, ``dim`` floats) is stored as the id of its nearest centroid ``c`` (int32)
and its residual ``v - c`` quantised to ``nbits`` bits per dimension: each coordinate falls in one of
``2 ** nbits`` buckets whose cutoffs are quantiles of the training residuals and whose value is the mean
residual of that bucket. A token costs ``4 + dim * nbits / 8`` bytes (128-d, 2 bits: 36 bytes, against 256
as float16). :meth:`ResidualCodec.decompress` gives ``normalise(c + bucket_values)``, the vectors exact MaxSim
is computed on.

The centroids are FAISS k-means over a sample of the corpus's token vectors; their number defaults to
ColBERTv2's ``2 ** floor(log2(16 * sqrt(tokens)))`` (:func:`default_num_centroids`).

An index trains ``num_centroids=1024`` or more on its token vectors and saves the codec with it
(``codec.save("index_dir/mv")``, ``ResidualCodec.load("index_dir/mv")``); on 512 random unit vectors:

>>> import numpy as np
>>> sample = np.random.default_rng(0).standard_normal((512, 16)).astype("float32")
>>> sample /= np.linalg.norm(sample, axis=1, keepdims=True)
>>> codec = ResidualCodec.train(sample, num_centroids=8, nbits=2, seed=13)
>>> codes, packed = codec.compress(sample[:5])        # int32 [T], uint8 [T, ceil(dim * nbits / 8)]
>>> codes.shape, codes.dtype, packed.shape, packed.dtype
((5,), dtype('int32'), (5, 4), dtype('uint8'))
>>> approx = codec.decompress(codes, packed)          # float32 [T, dim], unit length
>>> approx.shape, bool(np.allclose(np.linalg.norm(approx, axis=1), 1, atol=1e-5))
((5, 16), True)
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.index.layout import save_npy
from hopscotch.retriever.index.multi_vector.files import NBITS, read_codec
from hopscotch.retriever.io.common import write_json

CODEC_FILE = "codec.json"
CENTROIDS_FILE = "centroids.npy"
#: tokens assigned to centroids per matrix product (bounds the [chunk, centroids] score block) ...
ASSIGN_CHUNK = 16_384
#: ... and the block's bytes: fewer tokens a product when there are many centroids (65,536 centroids x 16,384
#: tokens would be 4 GiB)
ASSIGN_BLOCK_BYTES = 256 * 2 ** 20
#: tokens compressed per call while building (float32 tokens and residuals, bucket bytes, unpacked bits)
COMPRESS_CHUNK = 65_536


def assign_chunk(num_centroids: int) -> int:
    """Tokens a matrix product of :meth:`ResidualCodec.assign`: :data:`ASSIGN_CHUNK`, fewer when the float32
    ``[chunk, centroids]`` block would pass :data:`ASSIGN_BLOCK_BYTES`."""
    return max(1, min(ASSIGN_CHUNK, ASSIGN_BLOCK_BYTES // (4 * max(num_centroids, 1))))


def default_num_centroids(num_tokens: int) -> int:
    """ColBERTv2's centroid count for ``num_tokens`` token vectors, at most one per 8 tokens and at least 1."""
    if num_tokens <= 0:
        return 1
    wanted = 2 ** int(math.floor(math.log2(16 * math.sqrt(num_tokens))))
    return max(1, min(wanted, num_tokens // 8 or 1))


def residual_bytes(dim: int, nbits: int) -> int:
    """Bytes of one token's packed residual: ``dim * nbits`` bits, the last byte padded (dim 7 at 1 bit: 1)."""
    return -(-dim * nbits // 8)


def token_bytes(dim: int, nbits: int) -> float:
    """Bytes one token costs in the compressed index: its centroid id and its packed residual."""
    return 4 + residual_bytes(dim, nbits)


def _normalised(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return (x / np.maximum(norms, 1e-12)).astype(np.float32)


@dataclass
class ResidualCodec:
    """Centroids ``float32 [C, dim]`` and the bucket ``cutoffs`` (``2**nbits - 1``) and ``values``
    (``2**nbits``) of the quantised residuals."""

    centroids: np.ndarray
    nbits: int
    cutoffs: np.ndarray
    values: np.ndarray

    @property
    def dim(self) -> int:
        return int(self.centroids.shape[1])

    @property
    def num_centroids(self) -> int:
        return int(self.centroids.shape[0])

    @classmethod
    def train(cls, sample: np.ndarray, num_centroids: int, nbits: int = 2, seed: int = 13, niter: int = 4,
              verbose: bool = False) -> ResidualCodec:
        """k-means centroids over ``sample`` (token vectors, ``[n, dim]``; ``niter`` iterations, ColBERTv2's 4 by
        default) and bucket cutoffs from its residuals."""
        import faiss

        if nbits not in NBITS:
            raise UsageError(f"--nbits {nbits}: use one of {', '.join(map(str, NBITS))}")
        sample = np.ascontiguousarray(sample, dtype=np.float32)
        n, dim = sample.shape
        k = max(1, min(int(num_centroids), n))
        kmeans = faiss.Kmeans(dim, k, niter=niter, seed=seed, spherical=True, verbose=verbose,
                              max_points_per_centroid=256)
        kmeans.train(sample)
        centroids = _normalised(kmeans.centroids)
        probe = cls(centroids, nbits, np.zeros(0, np.float32), np.zeros(0, np.float32))
        residuals = (sample - centroids[probe.assign(sample)]).ravel()
        levels = 2 ** nbits
        cutoffs = np.quantile(residuals, np.arange(1, levels) / levels).astype(np.float32)
        values = np.quantile(residuals, (np.arange(levels) + 0.5) / levels).astype(np.float32)
        return cls(centroids, nbits, cutoffs, values)

    def assign(self, vectors: np.ndarray) -> np.ndarray:
        """The nearest centroid (inner product) of each vector, int32."""
        out = np.empty(len(vectors), dtype=np.int32)
        chunk = assign_chunk(self.num_centroids)
        for start in range(0, len(vectors), chunk):
            block = np.asarray(vectors[start:start + chunk], dtype=np.float32)
            out[start:start + len(block)] = (block @ self.centroids.T).argmax(axis=1)
        return out

    def compress(self, vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(codes int32 [T], packed residuals uint8 [T, ceil(dim * nbits / 8)])``."""
        vectors = np.asarray(vectors, dtype=np.float32)
        codes = self.assign(vectors)
        buckets = np.searchsorted(self.cutoffs, vectors - self.centroids[codes]).astype(np.uint8)  # [T, dim]
        bits = np.unpackbits(buckets[:, :, None], axis=2)[:, :, 8 - self.nbits:]                   # [T, dim, nbits]
        return codes, np.packbits(bits.reshape(len(vectors), -1), axis=1)

    @property
    def byte_table(self) -> np.ndarray:
        """``float32 [256, 8 // nbits]``: the residual values of the dimensions one packed byte holds (most
        significant bits first, as :meth:`compress` packs them)."""
        if getattr(self, "_table", None) is None:
            per = 8 // self.nbits
            shifts = 8 - self.nbits * (np.arange(per) + 1)
            buckets = (np.arange(256)[:, None] >> shifts) & ((1 << self.nbits) - 1)
            self._table = self.values[buckets].astype(np.float32)
        return self._table

    def decompress(self, codes: np.ndarray, packed: np.ndarray) -> np.ndarray:
        """Unit-length float32 vectors ``[T, dim]``: centroid plus bucket values, renormalised."""
        codes = np.asarray(codes)
        if not len(codes):
            return np.zeros((0, self.dim), dtype=np.float32)
        residuals = self.byte_table[np.asarray(packed, dtype=np.uint8)].reshape(len(codes), -1)[:, :self.dim]
        return _normalised(self.centroids[codes] + residuals)

    def to_json(self) -> dict:
        return {"nbits": self.nbits, "num_centroids": self.num_centroids, "dim": self.dim,
                "cutoffs": [float(x) for x in self.cutoffs], "values": [float(x) for x in self.values]}

    def save(self, folder: str | os.PathLike, **about) -> None:
        """``centroids.npy`` then ``codec.json`` (atomically, in that order: the json vouches for the array)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        save_npy(folder / CENTROIDS_FILE, self.centroids)
        write_json(folder / CODEC_FILE, {**self.to_json(), **about})

    @classmethod
    def load(cls, folder: str | os.PathLike) -> ResidualCodec:
        return cls(*read_codec(Path(folder), CODEC_FILE, CENTROIDS_FILE))   # checked: one line naming a bad file

    @staticmethod
    def saved(folder: str | os.PathLike) -> dict | None:
        """The saved ``codec.json`` (None when the codec is not written yet)."""
        try:
            return json.loads((Path(folder) / CODEC_FILE).read_text())
        except (OSError, ValueError):
            return None
