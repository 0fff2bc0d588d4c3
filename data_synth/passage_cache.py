"""A per-docid cache of something computed from a passage's text, for the work a candidate window repeats.

Candidate windows of one corpus overlap heavily, so a passage's normal form or word shingles are
computed once per process. The cache is emptied whole when it reaches ``max_size`` entries: a reset
costs one recomputation per passage, far less than keeping recency order on every hit.

Example::

    normal_form = PassageCache(padded_normal_form, max_size=200_000)
    normal_form(candidate)   # padded_normal_form(f"{candidate.title} {candidate.text}"), computed once
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class PassageCache(Generic[T]):
    """``fn(title + " " + text)`` of any object with ``docid``, ``title`` and ``text``, by docid."""

    def __init__(self, fn: Callable[[str], T], max_size: int):
        self.fn, self.max_size = fn, max_size
        self._values: dict[str, T] = {}

    def __call__(self, passage) -> T:
        got = self._values.get(passage.docid)
        if got is None:
            if len(self._values) >= self.max_size:
                self._values.clear()
            got = self._values[passage.docid] = self.fn(f"{passage.title} {passage.text}")
        return got
