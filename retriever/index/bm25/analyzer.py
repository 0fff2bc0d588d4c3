"""The one BM25 analyzer of both BM25 backends: how a text becomes the terms it is indexed and searched by.

bm25s's own tokenizer, reproduced term for term (tests compare them on the shared corpora): the text lowercased
(``str.lower``), split by scikit-learn's token pattern ``(?u)\\b\\w\\w+\\b`` (words of two or more word characters),
stopwords dropped (bm25s's lists: ``en`` = NLTK's English), the rest stemmed by PyStemmer (Snowball; ``english``).
The bm25s backend (:mod:`hopscotch.retriever.index.bm25`) indexes through bm25s's tokenizer and tokenizes queries
here; the disk backend (:mod:`hopscotch.retriever.index.bm25.disk`) indexes and searches the terms made here, each
known by its 64-bit hash (:func:`term_hashes`).

Example::

    Analyzer("english", "en").terms("The Directors of Gummo")   # ['director', 'gummo']
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

#: bm25s's (scikit-learn's) token pattern
TOKEN_PATTERN = re.compile(r"(?u)\b\w\w+\b")
#: words whose stem (or stopword verdict) is remembered before the memo is emptied (bounds its memory)
MEMO_WORDS = 1_000_000


def stopword_list(name: str | None) -> list[str]:
    """bm25s's stopword list called ``name`` (``en``, ``english``, ``de``, ...; None: none), or ValueError."""
    if not name:
        return []
    from bm25s.tokenization import _infer_stopwords

    return list(_infer_stopwords(name))


def check_analyzer_names(stemmer: str | None, stopwords: str | None) -> None:
    """ValueError naming what is wrong when PyStemmer has no ``stemmer`` or bm25s no ``stopwords`` list."""
    if stemmer:
        import Stemmer

        try:
            Stemmer.Stemmer(stemmer)
        except KeyError:
            raise ValueError(f"PyStemmer has no stemmer {stemmer!r} (english, porter, german, ... or 'none')") from None
    if stopwords:
        try:
            stopword_list(stopwords)
        except ValueError:
            raise ValueError(f"bm25s has no stopword list {stopwords!r} (en, de, fr, es, ... or 'none')") from None


def term_keys(terms: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Each term's 64-bit hash (``uint64``: its key in a disk index's sorted term table) and a 32-bit check
    (``uint32``: two terms with one hash differ there, almost surely), both from one 12-byte ``blake2b`` of its
    UTF-8."""
    digests = b"".join(hashlib.blake2b(t.encode("utf-8"), digest_size=12).digest() for t in terms)
    raw = np.frombuffer(digests, dtype=np.uint8).reshape(len(terms), 12)
    return raw[:, :8].copy().view("<u8").ravel(), raw[:, 8:].copy().view("<u4").ravel()


def term_hashes(terms: Sequence[str]) -> np.ndarray:
    """:func:`term_keys`' hashes."""
    return term_keys(terms)[0]


class Analyzer:
    """Text -> BM25 terms (module doc). Not thread-safe (one memo of word -> stem); cheap to make one per thread."""

    def __init__(self, stemmer: str | None = "english", stopwords: str | None = "en",
                 stopword_words: Sequence[str] | None = None):
        """``stopword_words``: the words of the ``stopwords`` list as an index folder recorded them (:meth:`describe`);
        given, bm25s is not imported (its package import costs a search process about a second)."""
        if stopword_words is None:
            check_analyzer_names(stemmer, stopwords)
        else:
            check_analyzer_names(stemmer, None)
        self.stemmer_language, self.stopwords = stemmer or None, stopwords or None
        if self.stemmer_language:
            import Stemmer

            self._stem = Stemmer.Stemmer(self.stemmer_language).stemWord
        else:
            self._stem = None
        self._stop = frozenset(stopword_list(self.stopwords) if stopword_words is None else stopword_words)
        self._memo: dict[str, str] = {}  # word -> its term, "" for a stopword

    def _mapped(self, text: str) -> list[str | None]:
        """Each word of ``text`` as its term, ``""`` for a stopword (the memo's values)."""
        words = TOKEN_PATTERN.findall(text.lower())
        memo = self._memo
        mapped = list(map(memo.get, words))
        if None in mapped:
            new = {w for w, t in zip(words, mapped) if t is None}
            if len(memo) + len(new) > MEMO_WORDS:
                memo.clear()
                new = set(words)
            stop, stem = self._stop, self._stem
            for w in new:
                memo[w] = "" if w in stop else (stem(w) if stem else w)
            mapped = list(map(memo.__getitem__, words))
        return mapped

    def words(self, text: str) -> list[str]:
        """The words of ``text`` before stopwords and stemming (lowercased, split by :data:`TOKEN_PATTERN`)."""
        return TOKEN_PATTERN.findall(text.lower())

    def term_of(self, word: str) -> str:
        """The term a word becomes: its stem, ``""`` for a stopword."""
        term = self._memo.get(word)
        if term is None:
            if len(self._memo) >= MEMO_WORDS:
                self._memo.clear()
            term = self._memo[word] = "" if word in self._stop else (self._stem(word) if self._stem else word)
        return term

    def terms(self, text: str) -> list[str]:
        """The terms of ``text`` in order, repeats kept (a term's count is its frequency)."""
        return list(filter(None, self._mapped(text)))

    def counts(self, text: str) -> dict[str, int]:
        """``{term: occurrences}`` of ``text``, in first-occurrence order."""
        out: dict[str, int] = {}
        for t in self.terms(text):
            out[t] = out.get(t, 0) + 1
        return out

    def describe(self) -> dict:
        return {"token_pattern": TOKEN_PATTERN.pattern, "lowercase": True, "stemmer": self.stemmer_language,
                "stopwords": self.stopwords, "stopword_list": sorted(self._stop)}
