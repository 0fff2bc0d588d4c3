"""The normal form every text comparison of Hopscotch uses (answer matching, shingles, exact-duplicate hashes).

Unicode accents stripped (NFKD, combining marks dropped), lowercase, every run of characters other than
``a-z0-9`` one space, trimmed: ``"  Beyoncé's  St. Louis!"`` -> ``"beyonce s st louis"``.
"""

from __future__ import annotations

import re
import unicodedata

_NON_ALNUM = re.compile(r"[^0-9a-z]+")


def normalize_text(text: str) -> str:
    """Lowercase, strip accents, replace every run of non-alphanumerics by one space, trim."""
    if not text.isascii():
        text = unicodedata.normalize("NFKD", text)
        text = "".join(ch for ch in text if not unicodedata.combining(ch))
    return _NON_ALNUM.sub(" ", text.lower()).strip()


def padded_normal_form(text: str) -> str:
    """``normalize_text`` with a space at both ends: the form :meth:`~.answers.AnswerMatcher.contains` takes."""
    return f" {normalize_text(text)} "
