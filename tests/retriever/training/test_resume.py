"""Exact resume: a run killed (SIGKILL) after step 3 and resumed from its step-2 checkpoint ends with the
model folder of an uninterrupted run byte for byte (weights, temperature, configs; on CPU, one thread),
dropout on, so RNG states and the data position must be restored;
the resume passes the manifest check (same recipe, data, model, code) and the weights-only checkpoint check.

This file is also the runner: ``python tests/retriever/training/test_resume.py RECIPE_JSON OUTPUT [--kill-at N] [--resume]``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[3]


def recipe(model_dir: Path, tuples: Path) -> dict:
    return {"model": {"name": str(model_dir), "query_max_len": 32, "passage_max_len": 32},
            "data": {"train": str(tuples), "group_size": 3},
            "loss": {"learn_temperature": True},
            "train": {"batch_size": 4, "max_steps": 7, "save_every": 2, "save_total_limit": 2, "lr": 1e-3,
                      "warmup_steps": 2, "scheduler": "cosine", "threads": 1, "seed": 3}}


def run(recipe_file: Path, out: Path, *flags: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, __file__, str(recipe_file), str(out), *flags], check=False, env=env,
                          capture_output=True, text=True, timeout=1800)


def weights(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


@pytest.mark.slow
def test_killed_and_resumed_run_matches_uninterrupted_run(tiny_bert_dir, tmp_path, write_training_tuples):
    recipe_file = tmp_path / "recipe.json"
    recipe_file.write_text(json.dumps(recipe(tiny_bert_dir, write_training_tuples(tmp_path / "t.jsonl", second_positive=True))))
    straight = run(recipe_file, tmp_path / "straight")
    assert straight.returncode == 0, straight.stderr[-2000:]

    killed = run(recipe_file, tmp_path / "killed", "--kill-at", "3")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert not (tmp_path / "killed" / "final").exists()
    assert (tmp_path / "killed" / "checkpoint-2" / "trainer_state.json").is_file()
    resumed = run(recipe_file, tmp_path / "killed", "--resume")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "resuming from" in resumed.stdout + resumed.stderr

    # byte for byte: every file of the resumed run's model folder is the uninterrupted run's
    straight_final, killed_final = tmp_path / "straight" / "final", tmp_path / "killed" / "final"
    files = sorted(p.relative_to(straight_final) for p in straight_final.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(killed_final) for p in killed_final.rglob("*") if p.is_file())
    assert [f for f in files if (straight_final / f).read_bytes() != (killed_final / f).read_bytes()] == []
    a, b = weights(tmp_path / "straight" / "final"), weights(tmp_path / "killed" / "final")
    assert a.keys() == b.keys()
    base = weights(tiny_bert_dir)
    assert any(not torch.allclose(a[k], base[k]) for k in a if k in base)  # training did move the weights
    for key in a:
        assert torch.allclose(a[key], b[key], atol=1e-6, rtol=0), key
    ta = json.loads((tmp_path / "straight" / "final" / "hopscotch_config.json").read_text())["temperature"]
    tb = json.loads((tmp_path / "killed" / "final" / "hopscotch_config.json").read_text())["temperature"]
    assert ta == pytest.approx(tb, abs=1e-7) and ta != pytest.approx(0.05, abs=1e-6)
    summary = json.loads((tmp_path / "killed" / "train_summary.json").read_text())
    assert summary["steps"] == 7
    # the same run: both folders carry the same manifest, and no checkpoint holds an accelerate custom pickle
    manifests = [json.loads((tmp_path / run / "train_manifest.json").read_text()) for run in ("straight", "killed")]
    assert manifests[0]["inputs"] == manifests[1]["inputs"] and manifests[0]["recipe"]["train"]["max_steps"] == 7
    assert manifests[0]["recipe"]["train"] == manifests[1]["recipe"]["train"]
    assert not list(tmp_path.glob("*/checkpoint-*/custom_checkpoint_*.pkl"))
    assert not list(tmp_path.glob("*/.*.tmp"))
    kept = sorted(p.name for p in (tmp_path / "straight").glob("checkpoint-*"))
    assert kept == ["checkpoint-4", "checkpoint-6"]  # save_total_limit=2


if __name__ == "__main__":
    from hopscotch.retriever.training.trainer import train

    recipe_path, output = sys.argv[1], sys.argv[2]
    kill_at = int(sys.argv[sys.argv.index("--kill-at") + 1]) if "--kill-at" in sys.argv else None

    def maybe_kill(state, loss):
        if kill_at is not None and state.step == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    train(json.loads(Path(recipe_path).read_text()), output, resume="--resume" in sys.argv, on_step_end=maybe_kill,
          show_progress=False)
