"""Answer strings and the answer-containment test (DR-Synth's oracle and false-negative guard, the audits).

Containment is checked on the normal form (:mod:`.normal_form`) at word boundaries, so ``"St. Louis"`` is
found in ``"... in St Louis, Missouri"`` and ``"35"`` is not found in ``"1935"``.

Answers that say nothing about a passage are ignored: ``yes`` / ``no`` (HotpotQA comparison questions)
and answers that normalize to nothing.

>>> from hopscotch.retriever.text.answers import AnswerMatcher
>>> m = AnswerMatcher(["Chief of Protocol"])
>>> m.contained_in("She served as Chief of Protocol of the United States.")
True
"""

from __future__ import annotations

from collections.abc import Iterable

from hopscotch.retriever.text.normal_form import normalize_text, padded_normal_form

UNINFORMATIVE_ANSWERS = frozenset({"yes", "no", "true", "false", "unknown", "none", "noanswer"})


def informative_answers(answers: Iterable[str]) -> list[str]:
    """The normalized answers worth matching, de-duplicated, in first-seen order."""
    out: list[str] = []
    for answer in answers:
        norm = normalize_text(str(answer))
        if norm and norm not in UNINFORMATIVE_ANSWERS and norm not in out:
            out.append(norm)
    return out


class AnswerMatcher:
    """Tests whether a passage contains any of a question's answers (normalized, word-bounded)."""

    def __init__(self, answers: Iterable[str]):
        self.answers = informative_answers(answers)
        self._padded = [f" {a} " for a in self.answers]

    def __bool__(self) -> bool:
        return bool(self.answers)

    def contained_in(self, text: str) -> bool:
        """Whether ``text`` contains an answer."""
        return bool(self._padded) and self.contains(padded_normal_form(text))

    def contains(self, padded_normal: str) -> bool:
        """Like :meth:`contained_in` for a text already in :func:`padded_normal_form` (cache it per passage)."""
        return any(a in padded_normal for a in self._padded)
