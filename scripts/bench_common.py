"""Flags every whole-process benchmark under scripts/ takes the same way."""

from __future__ import annotations

import argparse


def add_run_options(parser: argparse.ArgumentParser, work: str, threads: int = 2, repeats: int = 3) -> None:
    """``--work`` (scratch folder), ``--repeats`` (runs; the median is reported), ``--threads``
    (torch / OpenMP threads per process) and ``--json`` (write the summary there)."""
    parser.add_argument("--work", default=work, help="scratch folder")
    parser.add_argument("--repeats", type=int, default=repeats, help="runs of each system; the median is reported")
    parser.add_argument("--threads", type=int, default=threads, help="torch / OpenMP threads per process")
    parser.add_argument("--json", help="write the summary here")
