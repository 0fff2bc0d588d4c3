"""The experiment scripts are thin drivers of :mod:`hopscotch_experiments.ablations`: each one's ``--help`` runs
as a plain ``python scripts/NAME.py`` from any folder (no ``sys.path`` trick, no other script needed), and the
smallest real paths (an argument refused before any work) say what is wrong."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
DRIVERS = {
    "agent_ablation": "--trained",
    "agent_multivector_ablation": "--mv",
    "agent_wise_ft": "--alphas",
    "agent_fusion_defaults": "--split",
    "late_fusion_gate": "--variant",
    "train_quality": "--skip-train",
    "st_multivector_peer": "--query-input",
    "st_single_vector_peer": "--query-input",
    "agent_trajectory_use": "--data",
}


def _run(name: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPTS / f"{name}.py"), *args], cwd=cwd, capture_output=True,
                          text=True, timeout=1800, check=False)


@pytest.mark.parametrize("name", sorted(DRIVERS))
def test_help_runs_from_any_folder(name, tmp_path):
    proc = _run(name, "--help", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("usage: ") and DRIVERS[name] in proc.stdout


def test_wise_ft_refuses_alphas_outside_zero_one(tmp_path):
    proc = _run("agent_wise_ft", "--finetuned", str(tmp_path), "--alphas", "0.5,2", "--no-docs", cwd=tmp_path)
    assert proc.returncode == 2 and "--alphas: expected numbers in [0, 1], got '0.5,2'" in proc.stderr


def test_trajectory_use_refuses_data_without_the_clean_tuples(tmp_path):
    proc = _run("agent_trajectory_use", "--data", str(tmp_path), "--work", str(tmp_path / "w"), "--no-docs",
                cwd=tmp_path)
    assert proc.returncode == 2 and "no clean (run DATA_ONLY=1" in proc.stderr and not (tmp_path / "w").exists()


def test_peer_refuses_an_unknown_query_input_before_any_work(tmp_path):
    proc = _run("st_multivector_peer", "--tuples", "x.jsonl", "--out", "unused", "--query-input", "nope",
                cwd=tmp_path)
    assert proc.returncode != 0 and "unknown query input" in proc.stderr
    assert not (tmp_path / "unused").exists()
