"""The GPU check script and the kernel benchmark, run on CPU in their dry-run mode.

scripts/gpu_check.sh is meant to run first time on a CUDA machine; these tests run every code path
of scripts/bench_kernel.py that does not need CUDA (the check table, the bench table, the ratios)
with the Triton interpreter and tiny sizes, and check that the shell script parses and refuses a
machine without CUDA with exit code 2.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_bench_kernel_dry_run_prints_both_tables_and_passes():
    env = dict(os.environ, OMP_NUM_THREADS="2")
    env.pop("TRITON_INTERPRET", None)
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_kernel.py"), "--device", "cpu", "--dry-run"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "CHECK: PASS" in out.stdout
    assert "FAIL" not in out.stdout
    bench_rows = [line for line in out.stdout.splitlines() if line.startswith("| 16 |") or line.startswith("| 48 |")]
    assert len(bench_rows) == 4, out.stdout  # d in {16, 48} x B in {16, 40}
    for row in bench_rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert cells[2] == str(8 * int(cells[1]))  # N = 8 B
        assert all(float(cells[i]) > 0 for i in (3, 4, 6))  # torch, fused, chunked ms
        assert cells[5].endswith("x") and cells[7].endswith("x")


def test_gpu_check_script_parses_and_refuses_a_machine_without_cuda(tmp_path):
    script = ROOT / "scripts" / "gpu_check.sh"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has a GPU")
    # A PATH with only a python that has no CUDA: the script must say so and exit 2, installing nothing.
    env = dict(os.environ, PYTHON=sys.executable, PATH="/usr/bin:/bin")
    out = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "CUDA" in out.stderr
