"""scripts/test.sh hands its arguments to pytest: a path runs that file only (without one, pytest runs pyproject.toml's
testpaths: every test)."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _collected(*args: str) -> list[str]:
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "test.sh"), "--collect-only", *args],
                          capture_output=True, text=True, check=False, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-2000:]
    return [line for line in proc.stdout.splitlines() if "::" in line]


def test_a_path_runs_that_file_only():
    ids = _collected("tests/scripts/test_test_sh.py")
    assert ids and {i.split("::")[0] for i in ids} == {"tests/scripts/test_test_sh.py"}

