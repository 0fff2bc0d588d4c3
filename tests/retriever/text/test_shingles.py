"""The one shingle and Jaccard rule of DR-Synth and the audits, pinned with exact values: strings (not word
tuples) of the normal form, and the Jaccard of empty sets (0.0 for the audits, 1.0 as DR-Synth's labeller asks)."""

from __future__ import annotations

import numpy as np
import pytest

from hopscotch.data_synth.labels import BOTH_EMPTY_JACCARD, LabelConfig, Labeller
from hopscotch.data_synth.oracles import Candidate
from hopscotch.retriever.audit.minhash import array_jaccard, shingle_array
from hopscotch.retriever.text.shingles import SHINGLE_WORDS, jaccard, jaccard_of_sizes, shingles


def test_shingles_are_joined_word_trigrams_of_the_normal_form():
    assert SHINGLE_WORDS == 3
    assert shingles("The Quick, brown FOX!") == frozenset({"the quick brown", "quick brown fox"})
    assert shingles("Beyoncé's  song") == frozenset({"beyonce s song"})
    assert shingles("two words") == frozenset({"two", "words"})       # shorter than n: its words
    assert shingles("...!?") == frozenset() and shingles("") == frozenset()
    assert shingles("a b c d", n=2) == frozenset({"a b", "b c", "c d"})
    assert shingles("already normal form", normalized=True) == frozenset({"already normal form"})


@pytest.mark.parametrize(("a", "b", "expected"), [
    ("a b c d", "a b c e", 1 / 3),           # {abc, bcd} vs {abc, bce}: 1 shared of 3
    ("a b c d", "A, b; c. D!", 1.0),
    ("a b c d", "w x y z", 0.0),
    ("two words", "two words", 1.0),
    ("two words", "two words here", 0.0),    # words vs a trigram never match
])
def test_jaccard_exact_values(a, b, expected):
    assert jaccard(shingles(a), shingles(b)) == expected


def test_empty_sets():
    empty, full = frozenset(), shingles("a b c d")
    assert jaccard(empty, empty) == 0.0                      # the audits: an empty text is nobody's duplicate
    assert jaccard(empty, empty, both_empty=1.0) == 1.0      # DR-Synth's labeller: two empty passages are one
    assert BOTH_EMPTY_JACCARD == 1.0
    for both_empty in (0.0, 1.0):
        assert jaccard(empty, full, both_empty) == 0.0 and jaccard(full, empty, both_empty) == 0.0
    assert jaccard_of_sizes(0, 0, 0) == 0.0 and jaccard_of_sizes(2, 4, 3) == 2 / 5
    assert array_jaccard(shingle_array(empty), shingle_array(empty)) == 0.0


def test_hashed_shingle_arrays_give_the_set_jaccard():
    a, b = shingles("one two three four five six"), shingles("one two three four five seven")
    assert array_jaccard(shingle_array(a), shingle_array(b)) == jaccard(a, b) == 3 / 5
    assert array_jaccard(shingle_array(a), np.array([], dtype=np.int64)) == 0.0


def test_labeller_takes_one_of_two_passages_without_words():
    cands = [Candidate("d0", "", "...", 1.0, True), Candidate("d1", "", "!!", 1.0, True),
             Candidate("d2", "t", "alpha beta gamma delta", 1.0, True)]
    res = Labeller(LabelConfig(positives=3, negatives=0), seed=0).label("q", cands, [3, 2, 1], mode="gold")
    assert [c.docid for c in res.positives] == ["d0", "d2"]
