"""What the whole-process benchmarks of ``scripts/`` share: flags, timed child processes, RSS, tables."""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path


def add_run_options(parser: argparse.ArgumentParser, work: str, threads: int = 2, repeats: int = 3) -> None:
    """``--work`` (scratch folder), ``--repeats`` (runs; the median is reported), ``--threads``
    (torch / OpenMP threads per process) and ``--json`` (write the summary there)."""
    parser.add_argument("--work", default=work, help="scratch folder")
    parser.add_argument("--repeats", type=int, default=repeats, help="runs of each system; the median is reported")
    parser.add_argument("--threads", type=int, default=threads, help="torch / OpenMP threads per process")
    parser.add_argument("--json", help="write the summary here")


def shared_data_dir(repo_root: str | os.PathLike) -> Path:
    """``$HOPSCOTCH_DATA``, else ``shared/data`` beside the repository (as the tests find it)."""
    return Path(os.environ.get("HOPSCOTCH_DATA") or Path(repo_root).parent / "shared" / "data")


def timed(cmd: list[str], env: dict | None = None, **options) -> float:
    """Wall seconds of ``cmd`` run to completion (``check=True``; output discarded unless ``options`` say)."""
    options.setdefault("stdout", subprocess.DEVNULL)
    options.setdefault("stderr", subprocess.DEVNULL)
    start = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, **options)
    return time.perf_counter() - start


def run_json(cmd: list[str], env: dict | None = None, prefix: str = "", what: str | None = None) -> tuple[dict, float]:
    """Run ``cmd`` (a benchmark's child process); ``(the JSON of its last stdout line starting with prefix,
    wall seconds)``. A failed child, or one that printed no such line, stops the benchmark with its stderr."""
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - start
    lines = [line for line in proc.stdout.splitlines() if line.startswith(prefix) and line.strip()]
    if proc.returncode or not lines:
        raise SystemExit(f"{what or ' '.join(cmd[1:3])} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1][len(prefix):]), seconds


def peak_rss_mib(children: bool = False) -> float:
    """Peak resident memory (MiB) of this process, or the largest of its finished children's."""
    who = resource.RUSAGE_CHILDREN if children else resource.RUSAGE_SELF
    return resource.getrusage(who).ru_maxrss / (1024 if sys.platform != "darwin" else 2**20)


def folder_bytes(path: str | os.PathLike, pattern: str = "**/*") -> int:
    """Bytes of the files under ``path`` matching ``pattern`` (every file by default)."""
    return sum(p.stat().st_size for p in Path(path).glob(pattern) if p.is_file())


def md_row(cells) -> str:
    """One Markdown table row."""
    return "| " + " | ".join(str(c) for c in cells) + " |"


def md_table(header, rows) -> str:
    """A Markdown table: the header row, its rule (``|---|---|``), then ``rows``."""
    return "\n".join([md_row(header), "|" + "---|" * len(header), *(md_row(r) for r in rows)])
