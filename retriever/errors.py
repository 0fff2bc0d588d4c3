"""Errors that the CLI turns into a one-line message and exit code 2."""

from __future__ import annotations

import os


class HopscotchError(Exception):
    """Base class of errors meant for the user, not a traceback."""


class UsageError(HopscotchError):
    """A bad flag, a missing file, or an inconsistent combination of options."""


class FormatError(HopscotchError, ValueError):
    """A malformed input line: names the file, the 1-based line number and what was expected.

    >>> str(FormatError("queries.jsonl", 12, "a JSON object with '_id' and 'text'"))
    "queries.jsonl:12: expected a JSON object with '_id' and 'text'"
    """

    def __init__(self, path: str | os.PathLike, line: int | None, expected: str, got: str | None = None):
        self.path = str(path)
        self.line = line
        self.expected = expected
        self.got = got
        where = f"{self.path}:{line}" if line is not None else self.path
        msg = f"{where}: expected {expected}"
        if got:
            msg += f" (got {got[:120]!r})"
        super().__init__(msg)
