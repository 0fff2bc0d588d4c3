"""Packaging: Hopscotch installs under one ``hopscotch`` namespace (``hopscotch.kernels``, ...), so it
never claims the top-level names of Hugging Face's ``kernels`` hub package (which transformers probes
for) or PyPI's ``retriever``; every import package imports cleanly; and a throwaway venv with all three
installed runs the fused loss and a training step (scripts/check_coexistence.sh)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_transformers_works_with_our_kernels_installed(tmp_path):
    code = r"""
import importlib, importlib.util
import hopscotch.kernels as ours
assert hasattr(ours, "infonce_loss") and hasattr(ours, "reference_infonce_loss"), dir(ours)
assert importlib.util.find_spec("hopscotch.kernels").origin.endswith("kernels/__init__.py")
# A top-level `kernels` is never Hopscotch's: absent, or Hugging Face's hub package.
spec = importlib.util.find_spec("kernels")
if spec is not None:
    hf = importlib.import_module("kernels")
    assert not hasattr(hf, "infonce_loss") and hasattr(hf, "get_kernel"), spec.origin
from transformers.utils.import_utils import is_kernels_available
if spec is None:
    assert is_kernels_available() is False, "transformers mistook Hopscotch's kernels for the HF kernels hub"
import torch
from transformers import BertConfig, BertModel
model = BertModel(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                             intermediate_size=32))
out = model(input_ids=torch.tensor([[1, 2, 3]]))
assert out.last_hidden_state.shape == (1, 3, 16)
import transformers.integrations.hub_kernels  # the module that imports from `kernels` when it is "available"
print("ok")
"""
    # From outside the repository: its root on sys.path would make the folder kernels/ importable as `kernels`.
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().endswith("ok")


def test_import_packages():
    from hopscotch import (
        data_synth,  # noqa: F401
        kernels,  # noqa: F401
        retriever,  # noqa: F401
    )
    from hopscotch.retriever.cli import build_parser
    from hopscotch_experiments import (
        ablations,  # noqa: F401
        agent_data,  # noqa: F401
        benchmarks,  # noqa: F401
        kernel_checks,  # noqa: F401
    )

    parser = build_parser()
    for name in ("world", "bm25-index", "eval", "demo"):
        assert name in parser._subparsers._group_actions[0].choices


@pytest.mark.parametrize("project", [ROOT, ROOT / "experiments"], ids=["hopscotch", "experiments"])
def test_pyproject_lists_every_package_folder(project):
    """setuptools installs only the packages pyproject.toml names: a folder with an ``__init__.py`` left out
    would import from a checkout but be missing from a wheel (the package's or the experiments')."""
    tomllib = pytest.importorskip("tomllib")
    setup = tomllib.loads((project / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = set()
    for name, folder in setup["package-dir"].items():
        for init in sorted((project / folder).rglob("__init__.py")):
            parts = init.parent.relative_to(project / folder).parts
            found.add(".".join([name, *parts]))
    assert found == set(setup["packages"]), (sorted(found - set(setup["packages"])),
                                             sorted(set(setup["packages"]) - found))


def _pypi_reachable() -> bool:
    """A quick ``pip download --no-deps kernels`` (no cache, no retries): can pip reach PyPI?"""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-cache-dir",
                                   "--disable-pip-version-check", "--timeout", "10", "--retries", "0", "-q",
                                   "-d", tmp, "kernels"], check=False, capture_output=True, timeout=1800)
        except (subprocess.TimeoutExpired, OSError):
            return False
        return proc.returncode == 0


@pytest.mark.slow
def test_coexists_with_hf_kernels_and_pypi_retriever():
    """Issue 12 item 4: Hopscotch (a wheel of this tree) + Hugging Face ``kernels`` + PyPI ``retriever`` in
    one throwaway venv: the fused-loss import and one training step run."""
    if not _pypi_reachable():
        pytest.skip("PyPI unreachable: scripts/check_coexistence.sh installs kernels and retriever from it")
    env = {**os.environ, "HOPSCOTCH_DEPS_PYTHON": sys.executable}
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "check_coexistence.sh")], check=False, capture_output=True,
                          text=True, env=env, timeout=540)
    tail = (proc.stdout + proc.stderr)[-4000:]
    assert proc.returncode == 0, tail
    assert proc.stdout.strip().splitlines()[-1] == "COEXISTENCE: PASS", tail
