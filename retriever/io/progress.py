"""Progress that reads well in a terminal and in a log file: every progress bar of Hopscotch comes from here.

On a terminal (stderr is a TTY, or a Jupyter kernel's stream) :func:`progress` draws a tqdm bar, as
before. Anywhere else (a log file, a pipe, ``nohup``, a batch scheduler) it draws nothing while the stage
runs and prints one summary line on stderr when the stage ends::

    encode docs: 3,000 texts in 4.2 s (714 texts/s)
    train: 100 steps in 31.0 s (400/500 in all; loss=0.2311, samples_s=412.0)

A tqdm bar in a file is hundreds of ``\\r``-joined updates on one line, and a later error line is glued to
the last of them; the summary keeps the log one line per stage and the error line alone on its own.

Rules:

* ``show=False`` (the callers' ``show_progress``) means silence: no bar, no summary line;
* a stage ends when :meth:`Progress.close` is called, its ``with`` block exits or its iteration is
  exhausted; a stage cut short by an exception (raised through it, or in flight while ``close`` runs in a
  ``finally``) prints no summary, so an error stays the only line a failed command leaves on stderr;
  a bar that is only garbage-collected prints nothing either;
* the summary counts what this run did (``initial``, the work a resumed run found done, is not counted
  but named with the total) and ends with the last :meth:`Progress.set_postfix` values.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Iterable, Iterator
from typing import IO, Any, Self

from tqdm.auto import tqdm


def live_bars(show: bool = True, stream: IO[str] | None = None) -> bool:
    """Whether a live bar should be drawn: ``show`` and ``stream`` (default: stderr) is a terminal or a
    Jupyter kernel's output stream. Pass the result as ``show_progress`` to libraries with their own tqdm
    bars (bm25s), so they too keep out of log files."""
    if not show:
        return False
    stream = sys.stderr if stream is None else stream
    if stream is None:  # pythonw, or a closed stderr
        return False
    if type(stream).__module__.startswith("ipykernel"):  # a notebook: tqdm.auto draws a widget there
        return True
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed file
        return False


def rate_text(value: float) -> str:
    """A rate with at least two significant digits: ``0.073``, ``1.2``, ``12``, ``4,257`` (never ``0`` for 0.07)."""
    if not math.isfinite(value) or value <= 0:
        return "0"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.{max(0, 1 - math.floor(math.log10(value)))}f}"


def _plural(unit: str, n: int) -> str:
    if n == 1 or not unit:
        return unit
    if unit.endswith("y") and unit[-2:-1] not in ("a", "e", "i", "o", "u"):
        return unit[:-1] + "ies"
    return unit if unit.endswith("s") else unit + "s"


class Progress:
    """One stage's progress: a tqdm bar on a terminal, else a summary line at its end (module docstring).

    Supports what the code base uses of tqdm: ``update(n)``, ``set_postfix(**values)``, ``close()``, use as
    a context manager and iteration over ``iterable``. ``n`` is the count reached (``initial`` included).
    """

    def __init__(self, iterable: Iterable | None = None, *, desc: str = "", unit: str = "it",
                 total: int | None = None, initial: int = 0, show: bool = True, stream: IO[str] | None = None):
        self.desc, self.unit, self.initial, self.show = desc, unit, initial, show
        self._iterable = iterable
        if total is None and iterable is not None and hasattr(iterable, "__len__"):
            total = len(iterable)
        self.total = total
        self.n = initial
        self._postfix: dict[str, Any] = {}
        self._stream = stream
        self._closed = False
        self._started = time.perf_counter()
        self._bar = None
        if live_bars(show, stream):
            self._bar = tqdm(desc=desc, unit=unit, total=total, initial=initial, file=stream)

    @property
    def live(self) -> bool:
        """Whether a tqdm bar is being drawn."""
        return self._bar is not None

    def update(self, n: int = 1) -> None:
        """Count ``n`` more units of work."""
        self.n += n
        if self._bar is not None:
            self._bar.update(n)

    def set_postfix(self, refresh: bool = True, **values: Any) -> None:
        """Show ``values`` beside the bar, and at the end of the summary line (the last values set)."""
        self._postfix = dict(values)
        if self._bar is not None:
            self._bar.set_postfix(refresh=refresh, **values)

    def __iter__(self) -> Iterator:
        if self._iterable is None:
            raise TypeError("this Progress was made without an iterable")
        for item in self._iterable:
            self.n += 1
            if self._bar is not None:
                self._bar.update(1)
            yield item
        self._finish(summary=True)  # reached only when the iteration is exhausted, not when it is broken off

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self._finish(summary=exc_type is None)

    def close(self) -> None:
        """End the stage: close the bar, or print the summary line (not while an exception is in flight)."""
        self._finish(summary=sys.exc_info()[0] is None)

    def summary(self) -> str:
        """The summary line: ``desc: count unit in seconds (rate[; total][; postfix])``."""
        done = self.n - self.initial
        seconds = time.perf_counter() - self._started
        line = f"{self.desc + ': ' if self.desc else ''}{done:,} {_plural(self.unit, done)} in {seconds:.1f} s"
        extra = []
        if done and seconds > 0:
            extra.append(f"{rate_text(done / seconds)} {_plural(self.unit, 2)}/s")
        if self.initial and self.total is not None:
            extra.append(f"{self.n:,}/{self.total:,} in all")
        if self._postfix:
            extra.append(", ".join(f"{k}={v}" for k, v in self._postfix.items()))
        return line + (f" ({'; '.join(extra)})" if extra else "")

    def _finish(self, summary: bool) -> None:
        if self._closed:
            return
        self._closed = True
        if self._bar is not None:
            self._bar.close()
        elif self.show and summary:
            stream = sys.stderr if self._stream is None else self._stream
            if stream is not None:
                print(self.summary(), file=stream, flush=True)


def progress(iterable: Iterable | None = None, *, desc: str = "", unit: str = "it", total: int | None = None,
             initial: int = 0, show: bool = True, stream: IO[str] | None = None) -> Progress:
    """A :class:`Progress` for one stage: ``for x in progress(items, desc=..., unit=...)``, or
    ``bar = progress(total=n, ...)`` with ``bar.update(k)`` and ``bar.close()`` (or a ``with`` block).

    ``show``: the caller's ``show_progress`` (False: nothing at all); ``stream``: where bar and summary go
    (default: stderr at the time of each write).
    """
    return Progress(iterable, desc=desc, unit=unit, total=total, initial=initial, show=show, stream=stream)
