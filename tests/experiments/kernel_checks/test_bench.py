"""hopscotch_experiments.kernel_checks.bench (scripts/bench_kernel.py, the GPU check's section 1): the tables'
shapes and the number formatting, on CPU (the fused loss falls back to the reference there unless Triton's
interpreter is on: the harness is what is tested; tests/scripts runs it with the interpreter)."""

from __future__ import annotations

import torch

from hopscotch_experiments.kernel_checks.bench import (BENCH_HEADER, CHECK_HEADER, bench_row, check_cases, fmt_mib,
                                                       fmt_ms, fmt_ratio, measure, run_bench, run_check)


def test_dry_run_cases_are_the_small_ones_plus_an_all_but_positive_row():
    full, dry = check_cases(dry_run=False), check_cases(dry_run=True)
    assert all(c in full for c in dry[:-1]) and all(b * n <= 64 * 513 for b, n, *_ in dry)
    assert dry[-1][4] == "all-but-positive" and any(c[4] == "all-but-positive" for c in full)


def test_run_check_prints_one_passing_row_per_case(capsys):
    assert run_check("cpu", dry_run=True, only=[0, 1], seed=11)
    out = capsys.readouterr().out
    assert "## check (seed 11)" in out and CHECK_HEADER in out
    rows = [line for line in out.splitlines() if line.startswith("| ") and line.endswith("| PASS |")]
    assert len(rows) == 2


def test_run_bench_prints_a_row_per_size(capsys):
    run_bench("cpu", [4], [8, 16], reps=1, warmup=0)
    out = capsys.readouterr().out
    assert BENCH_HEADER in out
    rows = [line.strip("|").split("|") for line in out.splitlines() if line.startswith(("| 8 |", "| 16 |"))]
    assert len(rows) == 2 and all(r[2].strip() == "32" and r[5].strip().endswith("x") for r in rows)


def test_measure_and_formatting():
    ms, extra = measure("cpu", lambda: torch.ones(3).sum(), reps=3, warmup=1)
    assert ms >= 0 and extra is None
    assert fmt_ms((1.234, None)) == "1.23" and fmt_ms("OOM") == "OOM"
    assert fmt_mib((1.0, None)) == "n/a" and fmt_mib((1.0, 3 * 2**20)) == "3" and fmt_mib("skipped") == "skipped"
    assert fmt_ratio((2.0, 4), (1.0, 2), 0) == "2.00x" and fmt_ratio((2.0, 4), (1.0, 2), 1) == "2.00x"
    assert fmt_ratio((2.0, None), (1.0, None), 1) == "-" and fmt_ratio("OOM", (1.0, 2), 0) == "-"
    row = bench_row(16, 4, 32, {"torch": (1.0, None), "fused": (0.5, None), "chunked": "OOM"})
    assert row == "| 16 | 4 | 32 | 1.00 | 0.50 | 0.50x | OOM | - | n/a | n/a | - | OOM | - |"
