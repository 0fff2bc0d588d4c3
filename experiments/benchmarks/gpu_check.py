"""Shared pieces of ``scripts/gpu_check.py`` and its section scripts: rows, deadlines, device helpers, and
the entry point every section script runs.

A section function has the signature ``run_x(rec, device="cuda", deadline=None, **sizes)``: it reports
through ``rec`` (a :class:`Recorder`), stops starting new work once ``deadline`` (a
:class:`Deadline`) has passed, and takes its sizes as keyword arguments, so the same code runs on a
CPU with tiny sizes (``gpu_check.py --cpu-smoke``) and on the GPU with the real ones. A section script
(``scripts/gpu_check_<name>.py``) ends with ``sys.exit(section_main("<name>", run_x, SIZES))``;
``gpu_check.py`` runs it as its own process with ``--device``, ``--size``, ``--rows`` and ``--budget-s``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

from hopscotch_experiments.benchmarks.common import md_row

STATUSES = ("PASS", "FAIL", "INFO", "SKIP")
MARGIN_S = 10.0    # a section stops starting new work this long before its budget


def one_line(text: object, limit: int = 160) -> str:
    """A single line, cut to ``limit`` characters, safe inside a Markdown table cell."""
    line = " ".join(str(text).split()).replace("|", "/")
    return line if len(line) <= limit else line[:limit - 3] + "..."


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
        """A Markdown block (e.g. the kernel bench's tables) written below the summary table."""
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


def run_section(name: str, function, sizes: dict, device: str = "cuda", rows: str | None = None,
                budget_s: float | None = None) -> int:
    """Run one section in this process: its rows to ``rows`` (a JSON-lines file); an exception or an empty
    report becomes a FAIL row with a one-line reason; 1 when the section failed."""
    rec = Recorder(name, rows)
    deadline = Deadline.after(None if budget_s is None else max(1.0, budget_s - MARGIN_S))
    try:
        function(rec, device=device, deadline=deadline, **sizes)
    except Exception as exc:  # noqa: BLE001 -- the reason goes in the table; the traceback to stderr
        traceback.print_exc()
        why = "timed out: the section's time budget is spent" if isinstance(exc, TimeoutError) else exc
        rec.row("error", f"{type(exc).__name__}: {why}", "FAIL")
    if not rec.rows:
        rec.row("error", "the section reported nothing", "FAIL")
    return 1 if rec.failed else 0


def section_main(name: str, function, sizes_by_kind: dict, argv=None) -> int:
    """The command line of a section script: ``--device`` (cuda), ``--size`` (full | tiny: a key of
    ``sizes_by_kind``), ``--rows`` (JSON-lines file) and ``--budget-s``; see :func:`run_section`."""
    parser = argparse.ArgumentParser(description=f"GPU check section {name!r} (run by scripts/gpu_check.py)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--size", default="full", choices=sorted(sizes_by_kind))
    parser.add_argument("--rows", help="append the rows here as JSON lines")
    parser.add_argument("--budget-s", type=float, help="the section's time budget (it stops early)")
    args = parser.parse_args(argv)
    return run_section(name, function, sizes_by_kind[args.size], args.device, args.rows, args.budget_s)


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
