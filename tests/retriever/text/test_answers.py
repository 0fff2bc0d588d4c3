"""The normal form and answer matching of :mod:`hopscotch.retriever.text` (DR-Synth's guard and the audits)."""

from __future__ import annotations

from hopscotch.retriever.text.answers import UNINFORMATIVE_ANSWERS, AnswerMatcher, informative_answers
from hopscotch.retriever.text.normal_form import normalize_text, padded_normal_form


def test_normal_form():
    assert normalize_text("  Beyoncé's  St. Louis!") == "beyonce s st louis"
    assert normalize_text("ÅNGSTRÖM—10") == "angstrom 10"
    assert padded_normal_form("St. Louis") == " st louis "
    assert normalize_text("?!") == ""


def test_answers_match_at_word_boundaries_and_skip_uninformative_ones():
    m = AnswerMatcher(["St. Louis", "yes", ""])
    assert m.answers == ["st louis"] and m.contained_in("born in St Louis, Missouri")
    assert m.contains(padded_normal_form("st. louis")) and not m.contained_in("Louisville")
    assert not AnswerMatcher(["35"]).contained_in("born in 1935")
    assert not AnswerMatcher(["No", "TRUE"]) and {"yes", "no"} <= UNINFORMATIVE_ANSWERS
    assert informative_answers(["A", "a ", "B", "none"]) == ["a", "b"]
