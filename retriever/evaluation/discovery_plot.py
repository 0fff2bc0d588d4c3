"""The discovery plot: mean evidence recall after each call of a replayed trajectory, one line per retriever.

:func:`plot_discovery` draws the ``discovery_curve`` of one or more replays
(:func:`hopscotch.retriever.evaluation.replay.discovery_curve`) with a shaded 95% band, and writes a PNG
atomically. It uses matplotlib's object API on an Agg canvas (no pyplot, no global backend switch);
matplotlib is in the ``dev`` extra only, so it is imported here, lazily, and a missing one is a
:class:`~hopscotch.retriever.errors.UsageError` (``hopscotch replay --no-plot`` skips the plot).

The PNG carries text metadata that says what was drawn: ``hopscotch:lines`` (the number of lines) and
``hopscotch:labels`` (their labels, JSON), readable with :func:`png_text`.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.io.common import atomic_write


@dataclass(frozen=True, slots=True)
class Curve:
    """One retriever's curve: mean evidence recall after call 1, 2, ... and the 95% half-widths (optional)."""

    label: str
    evidence_recall: Sequence[float]
    ci95: Sequence[float] | None = None

    @classmethod
    def from_report(cls, label: str, curve: dict) -> Curve:
        """From a replay report's ``discovery_curve`` dict."""
        return cls(label, list(curve["evidence_recall"]), curve.get("ci95"))


def require_matplotlib():
    """matplotlib's ``(Figure, FigureCanvasAgg, MaxNLocator)``; a UsageError naming the fix when it is missing."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.ticker import MaxNLocator
    except ImportError:
        raise UsageError("drawing discovery.png needs matplotlib (pip install 'hopscotch[dev]'); "
                         "or pass --no-plot") from None
    return Figure, FigureCanvasAgg, MaxNLocator


def plot_discovery(curves: Sequence[Curve], path: str | os.PathLike, title: str | None = None) -> int:
    """Draw ``curves`` (evidence recall vs call number) into a PNG at ``path``; returns the lines drawn."""
    if not curves:
        raise UsageError("no discovery curve to plot")
    Figure, FigureCanvasAgg, MaxNLocator = require_matplotlib()
    fig = Figure(figsize=(6.4, 4.2), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    for curve in curves:
        ys = [float(y) for y in curve.evidence_recall]
        xs = list(range(1, len(ys) + 1))
        (line,) = ax.plot(xs, ys, marker="o" if len(xs) <= 30 else None, markersize=3, label=curve.label)
        if curve.ci95 is not None and len(xs) > 1:
            lo = [max(0.0, y - (c or 0.0)) for y, c in zip(ys, curve.ci95)]
            hi = [min(1.0, y + (c or 0.0)) for y, c in zip(ys, curve.ci95)]
            ax.fill_between(xs, lo, hi, alpha=0.15, color=line.get_color(), linewidth=0)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("search call")
    ax.set_ylabel("evidence recall (cumulative)")
    ax.set_ylim(0.0, 1.02)
    ax.set_title(title or "Evidence discovery over replayed calls (off-policy)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    lines = len(ax.get_lines())
    metadata = {"Software": "hopscotch replay", "hopscotch:lines": str(lines),
                "hopscotch:labels": json.dumps([c.label for c in curves])}
    with atomic_write(path, "wb") as fh:
        fig.savefig(fh, format="png", metadata=metadata)
    return lines


def png_text(path: str | os.PathLike) -> dict[str, str]:
    """The ``tEXt`` / ``zTXt`` / ``iTXt`` metadata of a PNG file as ``{key: value}``."""
    with open(path, "rb") as fh:
        data = fh.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise UsageError(f"{path}: not a PNG file")
    out, pos = {}, 8
    while pos + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"tEXt":
            key, _, value = body.partition(b"\0")
            out[key.decode("latin-1")] = value.decode("latin-1")
        elif kind == b"zTXt":
            key, _, rest = body.partition(b"\0")
            out[key.decode("latin-1")] = zlib.decompress(rest[1:]).decode("latin-1")
        elif kind == b"iTXt":
            key, _, rest = body.partition(b"\0")
            compressed, rest = rest[0], rest[2:]
            _, _, rest = rest.partition(b"\0")  # language tag
            _, _, text = rest.partition(b"\0")  # translated keyword
            out[key.decode("latin-1")] = (zlib.decompress(text) if compressed else text).decode("utf-8")
        elif kind == b"IEND":
            break
    return out
