"""The GPU check script and the kernel benchmark, run on CPU in their dry-run mode.

scripts/gpu_check.sh is meant to run first time on a CUDA machine; these tests run every code path
of scripts/bench_kernel.py that does not need CUDA (the check table, the bench table, the ratios)
with the Triton interpreter and tiny sizes, check that the shell script parses, refuses a machine
without CUDA with exit code 2, and in ``--dry-run`` reports every section skipped and writes its
table; that every section function of scripts/gpu_check_*.py takes the sizes it is given; that a
section script takes the flags gpu_check.py runs it with; and (slow) every section end to end on CPU
with tiny sizes (``--cpu-smoke``), each as its own process, from outside the repository. (That no
script edits ``sys.path`` or imports another script is tests/test_architecture.py's rule.)
"""

from __future__ import annotations

import inspect
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_bench_kernel_dry_run_prints_both_tables_and_passes():
    env = dict(os.environ, OMP_NUM_THREADS="2")
    env.pop("TRITON_INTERPRET", None)
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_kernel.py"), "--device", "cpu", "--dry-run"],
                         capture_output=True, text=True, env=env, timeout=1800, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "CHECK: PASS" in out.stdout
    assert "FAIL" not in out.stdout
    bench_rows = [line for line in out.stdout.splitlines() if line.startswith(("| 16 |", "| 48 |"))]
    assert len(bench_rows) == 4, out.stdout  # d in {16, 48} x B in {16, 40}
    for row in bench_rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert cells[2] == str(8 * int(cells[1]))  # N = 8 B
        assert all(float(cells[i]) > 0 for i in (3, 4, 6))  # torch, fused, chunked ms
        assert cells[5].endswith("x") and cells[7].endswith("x")


def test_gpu_check_script_parses_and_refuses_a_machine_without_cuda(tmp_path):
    script = ROOT / "scripts" / "gpu_check.sh"
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has a GPU")
    # A PATH with only a python that has no CUDA: the script must say so and exit 2, installing nothing.
    env = dict(os.environ, PYTHON=sys.executable, PATH="/usr/bin:/bin")
    out = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, timeout=1800, check=False)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "CUDA" in out.stderr


def _no_gpu_env() -> dict:
    """A PATH without nvidia-smi and this test's python: nothing is installed, nothing measured."""
    return dict(os.environ, PYTHON=sys.executable, PATH="/usr/bin:/bin")


def test_gpu_check_dry_run_reports_every_section_skipped_and_writes_the_table(tmp_path, load_script):
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has a GPU")
    out_file = tmp_path / "gpu_check.md"
    out = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh"), "--dry-run", str(out_file)],
                         capture_output=True, text=True, env=_no_gpu_env(), timeout=1800, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip().splitlines()[-1] == "GPU CHECK: SKIPPED (dry run)"
    sections = [name for name, *_ in load_script("gpu_check").SECTIONS]
    assert sections == ["kernel", "encode", "faiss", "train", "qwen"]
    table = out_file.read_text()
    for name in sections:
        assert f"| {name} | section | skipped: no CUDA | SKIP |" in out.stdout
        assert f"| {name} | section | skipped: no CUDA | SKIP |" in table
    assert table.strip().splitlines()[-1] == "GPU CHECK: SKIPPED (dry run)"


def test_gpu_check_section_functions_take_their_sizes(load_script):
    """Every section's ``SIZES`` (GPU and CPU-smoke) binds to its function: no typo waits for a GPU."""
    gpu_check = load_script("gpu_check")
    for name, _, budget in gpu_check.SECTIONS:
        assert gpu_check.section_script(name).is_file(), name
        module = load_script(f"gpu_check_{name}")
        signature = inspect.signature(getattr(module, f"run_{name}"))
        for size in ("full", "tiny"):
            signature.bind(object(), device="cpu", deadline=None, **module.SIZES[size])
        assert 0 < budget <= 180, name
    assert sum(s[-1] for s in gpu_check.SECTIONS) + len(gpu_check.SECTIONS) * gpu_check.GRACE_S < 8 * 60


def test_every_section_script_takes_the_flags_gpu_check_gives_it(tmp_path, load_script):
    """``--help`` of each section script from outside the repository: it imports (the installed package, not
    the repository root) and takes ``--device --size --rows --budget-s``."""
    for name, *_ in load_script("gpu_check").SECTIONS:
        out = subprocess.run([sys.executable, str(ROOT / "scripts" / f"gpu_check_{name}.py"), "--help"],
                             capture_output=True, text=True, timeout=1800, check=False, cwd=tmp_path)
        assert out.returncode == 0, out.stderr[-2000:]
        for flag in ("--device", "--size", "--rows", "--budget-s"):
            assert flag in out.stdout, (name, flag)


@pytest.mark.slow
def test_gpu_check_cpu_smoke_runs_every_section(tmp_path):
    """Every section end to end on CPU with tiny sizes (the kernels in Triton's interpreter), from outside
    the repository: each section is ``python scripts/gpu_check_<name>.py --device --size --rows --budget-s``
    in its own process and relies on the installed package, not on the repository root. The table holds
    every row the section processes wrote (JSON lines): each with its section's name and a status, the
    faiss section's with recall@100."""
    out_file = tmp_path / "smoke.md"
    env = dict(os.environ, OMP_NUM_THREADS="1")  # tiny sizes: a second thread per process only waits (2 cores)
    env.pop("TRITON_INTERPRET", None)
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_check.py"), "--cpu-smoke", str(out_file)],
                         capture_output=True, text=True, env=env, timeout=1200, check=False, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "GPU CHECK: SKIPPED (CPU smoke run: sections PASS)"
    table = out_file.read_text()
    lines = table.splitlines()
    summary = lines[lines.index("| section | item | value | status |") + 2:]  # the rows below the header's rule
    summary = summary[:summary.index("")]  # the detail tables come after a blank line
    cells = [[c.strip() for c in line.strip().strip("|").split("|")] for line in summary]
    for name in ("kernel", "encode", "faiss", "train", "qwen"):
        assert f"| {name} | **" in table and "| FAIL |" not in table
        header = [row for row in cells if row[0] == name and row[1].startswith("**")]
        records = [row for row in cells if row[0] == name and not row[1].startswith("**")]
        assert len(header) == 1 and header[0][3] in ("**PASS**", "**SKIP**"), (name, header)
        assert records and all(len(row) == 4 and row[3] in ("PASS", "INFO", "SKIP") for row in records), records
        if name == "faiss":
            assert any("recall@100" in row[2] for row in records) or records[0][3] == "SKIP", records
    assert {row[0] for row in cells} == {"kernel", "encode", "faiss", "train", "qwen"}, cells
