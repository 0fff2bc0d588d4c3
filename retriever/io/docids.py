"""Docid hashes: the one 64-bit hash of a docid, as stored in index lookups and as torch's int64.

Both views are the same 8 bytes of ``blake2b(docid, digest_size=8)``, read little-endian: unsigned
(:func:`docid_hash`, the key of an index's docid lookup) or signed (:func:`signed_docid_hash`, the
ids the training loss compares to spot one passage in several places of a batch).
"""

from __future__ import annotations

import hashlib
import re


def docid_hash(docid: str | bytes) -> int:
    """The unsigned 64-bit hash of ``docid`` (str, or its UTF-8 bytes); the same in every process and run."""
    raw = docid.encode("utf-8") if isinstance(docid, str) else docid
    return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "little")


def signed_docid_hash(docid: str) -> int:
    """:func:`docid_hash` read as a signed 64-bit integer (fits a ``torch.long``)."""
    value = docid_hash(docid)
    return value - (1 << 64) if value >= 1 << 63 else value


_CLIMBMIX_ID = re.compile(r"shard_(\d+)_(\d+)")


def canonical_docid(docid: str) -> str:
    """The one spelling of a docid: ClimbMix ids as ``shard_<5-digit shard>_<row, not padded>``.

    ClimbMix has two spellings of one document (cmass's corpus analysis and duplicate groups pad the
    row, ``shard_00045_06622``; its API and qrels do not, ``shard_00045_6622``). Every reader passes
    docids through here, so runs, qrels, corpora and duplicate groups agree whatever spelling a file
    uses. Any other docid is returned unchanged.
    """
    if not docid.startswith("shard_"):  # the common case, without a regex
        return docid
    m = _CLIMBMIX_ID.fullmatch(docid)
    if m is None:
        return docid
    return f"shard_{int(m.group(1)):05d}_{int(m.group(2))}"
