"""Shared pieces of ``scripts/gpu_check.py`` and its sections: rows, deadlines, device helpers.

A section function has the signature ``run_x(rec, device="cuda", deadline=None, **sizes)``: it reports
through ``rec`` (a :class:`Recorder`), stops starting new work once ``deadline`` (a
:class:`Deadline`) has passed, and takes its sizes as keyword arguments, so the same code runs on a
CPU with tiny sizes (``gpu_check.py --cpu-smoke``) and on the GPU with the real ones.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = Path(__file__).resolve().parent
STATUSES = ("PASS", "FAIL", "INFO", "SKIP")


def ensure_paths() -> None:
    """Make ``scripts/`` (bench_kernel, bench_index) importable from a section."""
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))


def one_line(text: object, limit: int = 160) -> str:
    """A single line, cut to ``limit`` characters, safe inside a Markdown table cell."""
    line = " ".join(str(text).split()).replace("|", "/")
    return line if len(line) <= limit else line[:limit - 3] + "..."


def md_row(cells) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


class Deadline:
    """``left()`` seconds until an absolute ``time.time()``; ``None`` means no limit."""

    def __init__(self, at: float | None = None):
        self.at = at

    @classmethod
    def after(cls, seconds: float | None) -> Deadline:
        return cls(None if seconds is None else time.time() + seconds)

    def left(self) -> float:
        return float("inf") if self.at is None else self.at - time.time()

    def timeout(self, floor: float = 1.0) -> float | None:
        """What is left as a ``timeout=`` argument (at least ``floor``; ``None`` without a limit)."""
        return None if self.at is None else max(floor, self.left())

    def passed(self) -> bool:
        return self.left() <= 0


class Recorder:
    """Collects one section's rows; appends each as a JSON line to ``path`` (so rows written before a
    hard kill survive) and echoes it as a Markdown row."""

    def __init__(self, section: str, path: str | Path | None = None, echo: bool = True):
        self.section = section
        self.path = Path(path) if path else None
        self.echo = echo
        self.stream = sys.stdout  # the real one, even while a section redirects stdout
        self.rows: list[dict] = []
        self.details: list[str] = []

    def _write(self, record: dict) -> None:
        if self.path is not None:
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(record) + "\n")

    def row(self, item: str, value: object, status: str = "INFO") -> None:
        if status not in STATUSES:
            raise ValueError(f"status {status!r}: expected one of {STATUSES}")
        record = {"section": self.section, "item": one_line(item, 90), "value": one_line(value, 200),
                  "status": status}
        self.rows.append(record)
        self._write(record)
        if self.echo:
            print(md_row([record["section"], record["item"], record["value"], status]), file=self.stream, flush=True)

    def detail(self, text: str) -> None:
        """A Markdown block (e.g. bench_kernel's tables) written below the summary table."""
        self.details.append(text)
        self._write({"section": self.section, "detail": text})

    @property
    def failed(self) -> bool:
        return any(r["status"] == "FAIL" for r in self.rows)


def read_records(path: str | Path) -> tuple[list[dict], list[str]]:
    """Rows and detail blocks a section process wrote (a torn last line is ignored)."""
    rows, details = [], []
    path = Path(path)
    if not path.exists():
        return rows, details
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        (details.append(record["detail"]) if "detail" in record else rows.append(record))
    return rows, details


def synchronize(device) -> None:
    import torch

    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def reset_peak(device) -> None:
    import torch

    if torch.device(device).type == "cuda":
        synchronize(device)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def peak_gib(device) -> float | None:
    """Peak allocated GPU memory since :func:`reset_peak` (``None`` on CPU)."""
    import torch

    if torch.device(device).type != "cuda":
        return None
    synchronize(device)
    return torch.cuda.max_memory_allocated(device) / 2**30


def fmt_gib(value: float | None) -> str:
    return "n/a (CPU)" if value is None else f"{value:.2f} GiB"
