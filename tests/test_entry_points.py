"""Every documented entry point runs from the clone root as a user types it, with no environment variable set
(``PYTHONSAFEPATH`` unset): ``python train.py``, ``accelerate launch train.py``, ``python scripts/NAME.py`` and a
``python -c`` that imports sentence-transformers. From the clone root the checkout's ``kernels/`` folder would be
importable as the top-level ``kernels``, which is Hugging Face's package (transformers imports it);
``kernels/__init__.py`` hands that name to Hugging Face's package."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _env() -> dict[str, str]:
    """This process's environment without anything that changes Python's path (as a user's shell has it)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHONSAFEPATH", "PYTHONPATH", "PYTHONHOME"))}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


def _run(argv, timeout=600, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], cwd=cwd, env=_env(), capture_output=True, text=True,
                          timeout=timeout, check=False)


def _tail(proc) -> str:
    return (proc.stdout + proc.stderr)[-3000:]


def test_the_clone_root_imports_hugging_faces_kernels_beside_hopscotchs():
    code = ("from sentence_transformers import SentenceTransformer\n"
            "import kernels, hopscotch.kernels as ours\n"
            "from kernels import CUDAProperties\n"
            "assert hasattr(kernels, 'get_kernel') and not hasattr(kernels, 'infonce_loss'), kernels.__file__\n"
            "assert hasattr(ours, 'infonce_loss')\n"
            "print(kernels.__file__)")
    proc = _run([sys.executable, "-c", code])
    assert proc.returncode == 0, _tail(proc)
    assert not Path(proc.stdout.strip()).resolve().is_relative_to(ROOT / "kernels"), proc.stdout


def test_a_missing_kernels_package_fails_as_without_the_folder():
    """Where Hugging Face's package is not installed, ``import kernels`` in the clone root is the plain
    ModuleNotFoundError (never Hopscotch's kernels under that name)."""
    code = ("import sys\n"
            "sys.path = [p for p in sys.path if 'site-packages' not in p]\n"
            "try:\n"
            "    import kernels\n"
            "except ModuleNotFoundError as exc:\n"
            "    print(exc.name, 'kernels' in sys.modules)\n")
    proc = _run([sys.executable, "-c", code])
    assert proc.returncode == 0 and proc.stdout.strip() == "kernels False", _tail(proc)


def test_every_script_runs_from_the_clone_root():
    scripts = sorted(ROOT.glob("scripts/*.py"))
    with ThreadPoolExecutor(2) as pool:
        procs = list(pool.map(lambda s: _run([sys.executable, s.relative_to(ROOT), "--help"], timeout=300), scripts))
    failed = {s.name: _tail(p) for s, p in zip(scripts, procs) if p.returncode != 0 or "usage" not in p.stdout}
    assert not failed, failed


@pytest.fixture(scope="module")
def tuples(tmp_path_factory) -> Path:
    words = "red green blue cyan magenta yellow black white grey brown pink olive navy teal".split()
    text = lambda i, k: " ".join(words[(i * k + j) % len(words)] for j in range(4 + (i * k) % 9))  # noqa: E731
    path = tmp_path_factory.mktemp("entry") / "tuples.jsonl"
    path.write_text("".join(json.dumps({"query_id": f"q{i}", "query": text(i, 1), "reasoning": text(i, 2),
                                        "positive_passages": [{"docid": f"p{i}", "text": text(i, 3)}],
                                        "negative_passages": [{"docid": f"n{i}", "text": text(i, 5)}]}) + "\n"
                            for i in range(8)))
    return path


def _train_args(tiny_bert_dir, tuples, out) -> list[str]:
    """The documented command, with a tiny model and one step (overrides as the recipe's comment shows)."""
    return ["train.py", "--recipe", "recipes/minilm_hotpot.yaml", "--output", str(out), f"data.train={tuples}",
            f"model.name={tiny_bert_dir}", "train.max_steps=1", "train.batch_size=4", "train.save_every=0",
            "eval.every=0", "model.query_max_len=32", "model.passage_max_len=32"]


def _check_trained(proc, out: Path) -> None:
    assert proc.returncode == 0, _tail(proc)
    assert "Traceback" not in proc.stderr, _tail(proc)
    assert (out / "final" / "modules.json").is_file(), _tail(proc)
    assert json.loads((out / "train_summary.json").read_text())["steps"] == 1


def test_python_train_py_from_the_clone_root(tiny_bert_dir, tuples, tmp_path):
    out = tmp_path / "run"
    _check_trained(_run([sys.executable, *_train_args(tiny_bert_dir, tuples, out)]), out)


def test_accelerate_launch_train_py_from_the_clone_root(tiny_bert_dir, tuples, tmp_path):
    accelerate = shutil.which("accelerate", path=str(BIN))
    if accelerate is None:
        pytest.skip("no accelerate command beside this Python")
    out = tmp_path / "run"
    proc = _run([accelerate, "launch", "--config_file", "configs/accelerate/cpu.yaml",
                 *_train_args(tiny_bert_dir, tuples, out)])
    _check_trained(proc, out)
