"""Word shingles of the normal form and their exact Jaccard: the one near-duplicate measure of Hopscotch.

DR-Synth's near-duplicate guard (``synth --near-duplicate``), its false-negative count and audit, and the
contamination and near-duplicate audits all compare texts by it:

* **shingles**: the word ``n``-grams (``n`` = :data:`SHINGLE_WORDS` = 3) of the normal form
  (:func:`~hopscotch.retriever.text.normal_form.normalize_text`), each as its words joined by one space (a
  string, so MinHash can hash its bytes); a text of fewer than ``n`` words: its words. The normal form's
  words hold no space, so a joined n-gram never equals a word and the set has as many members as the tuples
  of words would have: the Jaccard of two texts is the same as over word tuples.
* **Jaccard**: ``|a & b| / |a | b|``; a pair in which one set is empty: 0.0. Two empty sets (two texts with no
  words): ``both_empty``, 0.0 by default (the audits: an empty text is nobody's duplicate); DR-Synth's
  labeller passes 1.0 (two passages without words are one passage: it never takes both).
"""

from __future__ import annotations

from hopscotch.retriever.text.normal_form import normalize_text

SHINGLE_WORDS = 3


def shingles(text: str, n: int = SHINGLE_WORDS, normalized: bool = False) -> frozenset[str]:
    """Word ``n``-grams of the normal form, each as its words joined by one space (the words for a short text);
    ``normalized``: ``text`` is already in the normal form."""
    words = (text if normalized else normalize_text(text)).split()
    if len(words) < n:
        return frozenset(words)
    return frozenset(" ".join(words[i:i + n]) for i in range(len(words) - n + 1))


def jaccard_of_sizes(overlap: int, size_a: int, size_b: int, both_empty: float = 0.0) -> float:
    """The Jaccard of two sets of ``size_a`` and ``size_b`` members sharing ``overlap`` (the rule of the module doc);
    what :func:`jaccard` and the audits' hashed shingle arrays compute."""
    if not size_a and not size_b:
        return both_empty
    return overlap / (size_a + size_b - overlap) if overlap else 0.0


def jaccard(a: frozenset, b: frozenset, both_empty: float = 0.0) -> float:
    """Exact Jaccard of two shingle sets (one empty: 0.0; both empty: ``both_empty``)."""
    return jaccard_of_sizes(len(a & b), len(a), len(b), both_empty)
