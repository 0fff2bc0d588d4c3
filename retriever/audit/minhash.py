"""MinHash signatures and LSH bands over the text rules' shingles: how the audits find near-duplicate candidates.

The rule, shared by ``audit contamination`` and ``audit near-duplicates`` (the normal form, the shingles and
their exact Jaccard are :mod:`hopscotch.retriever.text`'s, the same as ``hopscotch synth --near-duplicate``):

* **normal form**: :func:`hopscotch.retriever.text.normal_form.normalize_text` (Unicode accents stripped,
  lowercase, every run of characters other than ``a-z0-9`` one space, trimmed);
* **shingles**: :func:`hopscotch.retriever.text.shingles.shingles`, the word 3-grams of the normal form (a text
  of fewer than 3 words: its words);
* **MinHash**: ``datasketch.MinHash`` with :data:`NUM_PERM` = 128 permutations, seed 1 (datasketch's default
  ``affine32`` scheme: 32-bit values), over the UTF-8 bytes of the shingles joined by one space;
* **LSH bands**: ``b`` bands of ``r`` rows, ``b * r <= 128``, with the largest ``r`` for which a pair at
  exactly the Jaccard threshold becomes a candidate with probability >= 0.99 (:func:`band_params`:
  0.8 -> 21 bands of 6 rows); recall first, since every candidate is checked afterwards;
* **decision**: the *exact* Jaccard (:func:`hopscotch.retriever.text.shingles.jaccard`, 0 when a set is empty)
  of the two shingle sets >= the threshold (default 0.8); an estimate
  from the signatures (share of equal values) only prunes candidates first (:data:`ESTIMATE_SLACK`);
* **exact duplicates**: equal :func:`text_hash` (an 8-byte BLAKE2b of the normal form); a text whose normal
  form is empty (only punctuation) has no shingles and is nobody's duplicate.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

import numpy as np

from hopscotch.retriever.text.normal_form import normalize_text
from hopscotch.retriever.text.shingles import jaccard_of_sizes

NUM_PERM = 128
SEED = 1
DEFAULT_THRESHOLD = 0.8
MIN_CANDIDATE_PROBABILITY = 0.99
#: candidates whose MinHash estimate is below ``threshold - ESTIMATE_SLACK`` are dropped before the exact check
#: (the estimate's standard deviation at J = 0.8 with 128 permutations is about 0.035: 0.1 is about 3 of them)
ESTIMATE_SLACK = 0.1


def doc_text(title: str | None, text: str) -> str:
    """What a document is compared by: its title and text joined by a newline (the text alone without a title)."""
    return f"{title}\n{text}" if title else text


def shingle_array(shingle_set: Iterable[str]) -> np.ndarray:
    """A shingle set held compactly: the sorted 64-bit hashes of its shingles (Python's string hash, so only
    comparable within one process; a chance collision, about 2**-64 a pair, is the only difference from the set)."""
    return np.unique(np.fromiter((hash(s) for s in shingle_set), dtype=np.int64))


def array_jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """The Jaccard of two :func:`shingle_array` values (:func:`~hopscotch.retriever.text.shingles.jaccard`'s rule)."""
    if not len(a) or not len(b):
        return 0.0
    return jaccard_of_sizes(len(np.intersect1d(a, b, assume_unique=True)), len(a), len(b))


def text_hash(text: str, normalized: bool = False) -> int:
    """An unsigned 64-bit BLAKE2b hash of the normal form (exact duplicates share it)."""
    norm = text if normalized else normalize_text(text)
    return int.from_bytes(hashlib.blake2b(norm.encode("utf-8"), digest_size=8).digest(), "little")


def minhash(shingle_set: Iterable[str]):
    """The ``datasketch.MinHash`` of a shingle set (:data:`NUM_PERM` permutations, seed :data:`SEED`)."""
    from datasketch import MinHash

    m = MinHash(num_perm=NUM_PERM, seed=SEED)
    m.update_batch([s.encode("utf-8") for s in shingle_set])
    return m


def signatures(shingle_sets: Sequence[Iterable[str]]) -> np.ndarray:
    """MinHash signatures of many shingle sets as a ``uint32 [n, NUM_PERM]`` array (``datasketch.MinHash.bulk``);
    an empty set's row is all ``2**32 - 1`` (the empty MinHash)."""
    from datasketch import MinHash

    if not shingle_sets:
        return np.zeros((0, NUM_PERM), dtype=np.uint32)
    batches = [[s.encode("utf-8") for s in shingle_set] for shingle_set in shingle_sets]
    out = np.empty((len(batches), NUM_PERM), dtype=np.uint32)
    for i, m in enumerate(MinHash.bulk(batches, num_perm=NUM_PERM, seed=SEED)):
        out[i] = m.hashvalues
    return out


def lean_minhash(signature: np.ndarray):
    """A ``datasketch.LeanMinHash`` from a stored signature row (what ``MinHashLSH`` takes)."""
    from datasketch import LeanMinHash

    return LeanMinHash(seed=SEED, hashvalues=signature.astype(np.uint64), scheme="affine32")


def candidate_probability(jaccard_value: float, bands: int, rows: int) -> float:
    """The probability that a pair with this Jaccard shares at least one band: ``1 - (1 - J**r)**b``."""
    return 1.0 - (1.0 - jaccard_value ** rows) ** bands


def band_params(threshold: float = DEFAULT_THRESHOLD, num_perm: int = NUM_PERM) -> tuple[int, int]:
    """``(bands, rows)``: the largest ``rows`` whose ``num_perm // rows`` bands make a pair at ``threshold`` a
    candidate with probability >= :data:`MIN_CANDIDATE_PROBABILITY` (at least 1 row)."""
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"a Jaccard threshold must lie in (0, 1], got {threshold}")
    best = (num_perm, 1)
    for rows in range(1, num_perm + 1):
        bands = num_perm // rows
        if candidate_probability(threshold, bands, rows) >= MIN_CANDIDATE_PROBABILITY:
            best = (bands, rows)
    return best


def make_lsh(threshold: float = DEFAULT_THRESHOLD):
    """A ``datasketch.MinHashLSH`` with the bands of :func:`band_params` (for sets that fit in memory)."""
    from datasketch import MinHashLSH

    return MinHashLSH(num_perm=NUM_PERM, params=band_params(threshold))


def estimated_jaccard(sig_a: np.ndarray, sig_b: np.ndarray) -> np.ndarray:
    """The MinHash estimate (share of equal values) of aligned rows of two signature arrays."""
    return (np.asarray(sig_a) == np.asarray(sig_b)).mean(axis=-1)


_BAND_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)


def band_keys(sigs: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """``uint64 [n, bands]``: one key per band of each signature (a multiplicative mix of its ``rows`` values;
    equal bands give equal keys, and a chance collision only adds a candidate that the checks drop)."""
    sigs = np.asarray(sigs, dtype=np.uint64)
    out = np.zeros((sigs.shape[0], bands), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for b in range(bands):
            key = np.full(sigs.shape[0], np.uint64(b + 1), dtype=np.uint64)
            for k in range(b * rows, (b + 1) * rows):
                key = (key ^ sigs[:, k]) * _BAND_MULTIPLIER
                key ^= key >> np.uint64(29)
            out[:, b] = key
    return out


def bucket_pairs(keys: np.ndarray, max_bucket: int) -> np.ndarray:
    """Candidate pairs ``uint64 [m, 2]`` (``i < j``, row positions) of the rows sharing a key in one band column.

    Rows are sorted by (key, position); a row is paired with each later row of its bucket, but at most
    ``max_bucket - 1`` places on, so one huge bucket cannot make a quadratic number of pairs.
    """
    keys = np.asarray(keys)
    order = np.lexsort((np.arange(len(keys)), keys))
    sorted_keys = keys[order]
    starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
    sizes = np.diff(np.r_[starts, len(keys)])
    size = np.repeat(sizes, sizes)                       # the bucket size of each sorted row
    rank = np.arange(len(keys)) - np.repeat(starts, sizes)  # the row's place in its bucket
    active = np.flatnonzero(size > 1)
    out = []
    for offset in range(1, max_bucket):
        active = active[rank[active] + offset < size[active]]
        if not len(active):
            break
        out.append(np.stack([order[active], order[active + offset]], axis=1))
    if not out:
        return np.zeros((0, 2), dtype=np.uint64)
    return np.concatenate(out).astype(np.uint64)
