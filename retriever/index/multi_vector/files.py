"""The one validated reader of a multi-vector index's files: every array is loaded here and checked for
its dtype, shape, size against the others, value ranges and finiteness, so that a damaged or hand-edited index
fails at load with one line naming the file, never later with an IndexError inside a search.

Checks: ``codec.json`` (``nbits`` one of :data:`~.codec.NBITS`, ``cutoffs`` / ``values`` of
``2**nbits - 1`` / ``2**nbits`` finite numbers), ``centroids.npy`` (finite float ``[C, dim]``), each shard's
``codes.npy`` (integers in ``[0, C)``, one per token), ``residuals.npy`` (``uint8 [T, ceil(dim * nbits / 8)]``), its
``doclens.npy`` (non-negative, summing to the shard's tokens), ``doc_centroids.npy`` / ``doc_centroid_counts.npy``
(ids in ``[0, C)``, one count per document, summing to the ids), and the inverted file (``ivf_offsets.npy`` of
``C + 1`` non-decreasing offsets ending at ``len(ivf.npy)``, rows in ``[0, documents)``). Value ranges are
checked as :mod:`hopscotch.retriever.index.array_checks` checks them: whole up to its ``FULL_CHECK`` elements, on
evenly spaced blocks beyond (a web-scale index is not read whole at load).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from hopscotch.retriever.index import array_checks
from hopscotch.retriever.index.array_checks import damaged

NBITS = (1, 2, 4, 8)   # residual bits per dimension the codec supports
_REBUILD = "rebuild the index ('hopscotch index ... --overwrite')"


def bad(path: Path, what: str):
    return damaged(path, what, _REBUILD)


def load_array(path: Path, mmap: bool = False) -> np.ndarray:
    """``np.load`` of one index file; a missing, truncated or non-NumPy file is a one-line UsageError naming it."""
    return array_checks.load_array(path, _REBUILD, mmap=mmap)


def check_range(path: Path, a: np.ndarray, low: int, high: int, what: str) -> None:
    """Integers of ``a`` in ``[low, high)`` (:func:`~hopscotch.retriever.index.array_checks.check_range`)."""
    array_checks.check_range(path, a, low, high, what, _REBUILD)


def check_finite(path: Path, a: np.ndarray, what: str) -> None:
    array_checks.check_finite(path, a, what, _REBUILD)


def read_codec(folder: Path, codec_file: str, centroids_file: str) -> tuple[np.ndarray, int, np.ndarray, np.ndarray]:
    """``(centroids float32 [C, dim], nbits, cutoffs, values)`` of ``codec.json`` and ``centroids.npy``, checked."""
    path = folder / codec_file
    try:
        about = json.loads(path.read_text())
    except FileNotFoundError:
        raise bad(path, "missing") from None
    except (OSError, ValueError) as exc:
        raise bad(path, f"not readable JSON ({str(exc)[:120]})") from None
    if not isinstance(about, dict):
        raise bad(path, "expected a JSON object {nbits, cutoffs, values}")
    nbits = about.get("nbits")
    if isinstance(nbits, bool) or not isinstance(nbits, int) or nbits not in NBITS:
        raise bad(path, f"'nbits' must be one of {', '.join(map(str, NBITS))}, got {nbits!r}")
    arrays = {}
    for key, size in (("cutoffs", 2 ** nbits - 1), ("values", 2 ** nbits)):
        value = about.get(key)
        try:
            arr = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            raise bad(path, f"'{key}' must be a list of numbers") from None
        if arr.ndim != 1 or len(arr) != size:
            raise bad(path, f"'{key}' must hold {size} numbers for nbits {nbits}, got {np.shape(value)}")
        if not np.isfinite(arr).all():
            raise bad(path, f"'{key}' holds NaN or infinite values")
        arrays[key] = arr.astype(np.float32)
    cpath = folder / centroids_file
    centroids = load_array(cpath)
    if centroids.ndim != 2 or not len(centroids) or centroids.shape[1] < 1:
        raise bad(cpath, f"expected centroids [C, dim], got shape {centroids.shape}")
    check_finite(cpath, centroids, "centroids")
    return centroids.astype(np.float32), nbits, arrays["cutoffs"], arrays["values"]


def check_shard(files: dict[str, Path], arrays: dict[str, np.ndarray], num_centroids: int, dim: int,
                nbits: int) -> None:
    """One shard's ``codes``, ``residuals``, ``doclens``, ``doc_centroids`` and ``doc_centroid_counts``, checked
    against each other and the codec."""
    codes, residuals, doclens = arrays["codes"], arrays["residuals"], arrays["doclens"]
    cents, counts = arrays["doc_centroids"], arrays["doc_centroid_counts"]
    if doclens.ndim != 1:
        raise bad(files["doclens"], f"expected one token count per document, got shape {doclens.shape}")
    check_range(files["doclens"], doclens, 0, 1 << 62, "document lengths")
    tokens = int(np.asarray(doclens, dtype=np.int64).sum())
    if codes.ndim != 1 or len(codes) != tokens:
        raise bad(files["codes"], f"expected {tokens:,} token codes (the sum of the document lengths in "
                                  f"{files['doclens']}), got shape {codes.shape}")
    check_range(files["codes"], codes, 0, num_centroids, "token codes")
    width = -(-dim * nbits // 8)  # the last byte padded (packbits)
    if residuals.dtype != np.uint8 or residuals.shape != (tokens, width):
        raise bad(files["residuals"], f"expected uint8 residuals [{tokens:,}, {width}], got {residuals.dtype} "
                                      f"{residuals.shape}")
    if counts.ndim != 1 or len(counts) != len(doclens):
        raise bad(files["doc_centroid_counts"], f"expected {len(doclens):,} counts (one per document), got shape "
                                                f"{counts.shape}")
    check_range(files["doc_centroid_counts"], counts, 0, 1 << 62, "counts")
    if cents.ndim != 1 or len(cents) != int(np.asarray(counts, dtype=np.int64).sum()):
        raise bad(files["doc_centroids"], f"expected {int(np.asarray(counts).sum()):,} centroid ids (the sum of "
                                          f"the counts), got shape {cents.shape}")
    check_range(files["doc_centroids"], cents, 0, num_centroids, "centroid ids")


def check_ivf(ivf_path: Path, offsets_path: Path, ivf: np.ndarray, offsets: np.ndarray, num_centroids: int,
              num_docs: int) -> None:
    """The inverted file: ``C + 1`` non-decreasing offsets from 0 to ``len(ivf)``, rows in ``[0, num_docs)``."""
    if offsets.ndim != 1 or len(offsets) != num_centroids + 1:
        raise bad(offsets_path, f"expected {num_centroids + 1} offsets (centroids + 1), got shape {offsets.shape}")
    check_range(offsets_path, offsets, 0, len(ivf) + 1, "offsets")
    if int(offsets[0]) != 0 or int(offsets[-1]) != len(ivf) or (np.diff(offsets) < 0).any():
        raise bad(offsets_path, f"offsets must rise from 0 to {len(ivf):,} (the inverted file's length)")
    if ivf.ndim != 1:
        raise bad(ivf_path, f"expected a 1-D list of document rows, got shape {ivf.shape}")
    check_range(ivf_path, ivf, 0, num_docs, "document rows")
