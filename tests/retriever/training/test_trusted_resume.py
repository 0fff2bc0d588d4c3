"""The run folder's trust boundary: ``train_manifest.json`` fingerprints a run and ``--resume`` continues
only the same run; a folder holding another run is refused unless ``--overwrite`` (which clears it); no
pickle in a checkpoint runs code (a crafted ``__reduce__`` stops the resume with one line, its marker file
never appears); stale ``.*.tmp`` files of killed writes are removed on start. Refusals come before any
model loads (``DualEncoder.from_pretrained`` is made to fail to prove it)."""

from __future__ import annotations

import json
import os
import pickle
import shutil
from pathlib import Path

import pytest
import torch

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.io import fingerprint
from hopscotch.retriever.training.checkpoint import safe_load
from hopscotch.retriever.training.trainer import train


class Payload:
    """Unpickling it runs ``touch MARKER``."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def recipe(model_dir: Path, tuples: Path, **train) -> dict:
    return {"model": {"name": str(model_dir), "query_max_len": 32, "passage_max_len": 32},
            "data": {"train": str(tuples), "group_size": 3},
            "train": {"batch_size": 4, "max_steps": 3, "save_every": 2, "lr": 1e-3, "threads": 1, "seed": 5} | train}


def write_tuples(path: Path, n: int = 16) -> Path:
    rows = [{"query_id": f"q{i}", "query": f"colour {i} red", "reasoning": f"think {i}",
             "positive_passages": [{"docid": f"p{i}", "text": f"passage {i} blue green"}],
             "negative_passages": [{"docid": f"n{i}_{k}", "text": f"other {i} {k} grey"} for k in range(3)]}
            for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def trained(tiny_bert_dir, tmp_path_factory) -> tuple[dict, Path]:
    """A finished 3-step run (checkpoint-2, final, summary, manifest) and its recipe; copy before changing it."""
    work = tmp_path_factory.mktemp("trusted")
    r = recipe(tiny_bert_dir, write_tuples(work / "t.jsonl"))
    train(r, work / "run", show_progress=False)
    return r, work / "run"


@pytest.fixture
def run_copy(trained, tmp_path) -> tuple[dict, Path]:
    r, run = trained
    shutil.copytree(run, tmp_path / "run")
    return r, tmp_path / "run"


@pytest.fixture
def no_model_load(monkeypatch):
    """Loading the backbone fails loudly: a test passing with it shows the refusal came first."""
    from hopscotch.retriever.model.dual_encoder import DualEncoder

    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded before the refusal")

    monkeypatch.setattr(DualEncoder, "from_pretrained", refuse)


def test_the_manifest_records_recipe_data_model_code_and_launch(trained):
    r, run = trained
    manifest = json.loads((run / "train_manifest.json").read_text())
    summary = json.loads((run / "train_summary.json").read_text())
    assert manifest["recipe"] == summary["recipe"] and manifest["recipe"]["train"]["lr"] == 1e-3
    tuples = Path(r["data"]["train"])
    assert manifest["inputs"]["data.train"][str(tuples)] == fingerprint.file_fingerprint(tuples)
    assert len(manifest["inputs"]["data.train"][str(tuples)]["sha256"]) == 64
    assert "model.safetensors" in manifest["inputs"]["model.name"]
    assert manifest["code"]["hopscotch"] and manifest["code"]["torch"] == torch.__version__
    assert manifest["launch"]["processes"] == 1 and manifest["launch"]["deepspeed"] is False
    files = sorted(p.name for p in (run / "checkpoint-2").iterdir())
    assert "scheduler.pt" in files and not any(f.startswith("custom_checkpoint") for f in files)


def test_big_files_are_sampled_and_changes_are_seen(tmp_path, monkeypatch):
    monkeypatch.setattr(fingerprint, "FULL_HASH_BYTES", 4096)
    monkeypatch.setattr(fingerprint, "BLOCK", 256)
    big = tmp_path / "big.bin"
    big.write_bytes(bytes(range(256)) * 64)
    first = fingerprint.file_fingerprint(big)
    assert set(first) == {"size", "mtime_ns", "sha256_sampled"} and first["size"] == 16384
    with big.open("r+b") as f:  # inside the first sampled block
        f.write(b"x")
    second = fingerprint.file_fingerprint(big)
    assert second["sha256_sampled"] != first["sha256_sampled"]
    small = tmp_path / "small.txt"
    small.write_text("a")
    assert set(fingerprint.file_fingerprint(small)) == {"size", "sha256"}
    diffs = fingerprint.manifest_differences({"recipe": {"train": {"lr": 1}}, "inputs": {"data.train": {"a/b": 1}}},
                                             {"recipe": {"train": {"lr": 2}}, "inputs": {"data.train": {"a/b": 1}}})
    assert diffs == ["recipe.train.lr: 1 in the run, 2 now"]
    # a key the code gained since the run started passes at its default, not otherwise
    old, new = {"recipe": {"train": {"lr": 1}}}, {"recipe": {"train": {"lr": 1, "new_knob": None}}}
    assert fingerprint.manifest_differences(old, new, defaults={"recipe": {"train": {"new_knob": None}}}) == []
    assert fingerprint.manifest_differences(old, new) == ["recipe.train.new_knob: absent in the run, None now"]
    assert fingerprint.manifest_differences(new, old) == ["recipe.train.new_knob: None in the run, absent now"]


@pytest.mark.parametrize("name, raw", [("custom_checkpoint_0.pkl", False), ("random_states_0.pkl", True),
                                       ("scheduler.pt", False), ("optimizer.bin", False)])
def test_a_crafted_pickle_never_runs(run_copy, tmp_path, no_model_load, name, raw):
    r, run = run_copy
    marker = tmp_path / "PWNED"
    target = run / "checkpoint-2" / name
    if raw:
        target.write_bytes(pickle.dumps(Payload(marker)))
    else:
        torch.save({"state": Payload(marker)}, target)
    with pytest.raises(UsageError, match=rf"{name}: refusing to load: not plain tensor data") as info:
        train(r, run, resume=True, show_progress=False)
    assert "\n" not in str(info.value)
    assert not marker.exists()


def test_a_harmless_stray_custom_checkpoint_is_refused_too(run_copy, no_model_load):
    r, run = run_copy
    torch.save({"last_epoch": 2}, run / "checkpoint-2" / "custom_checkpoint_0.pkl")
    with pytest.raises(UsageError, match=r"custom_checkpoint_0.pkl: not part of a Hopscotch checkpoint"):
        train(r, run, resume=True, show_progress=False)


def test_the_cli_refuses_a_crafted_checkpoint_on_one_line(run_copy, tmp_path, cli):
    r, run = run_copy
    marker = tmp_path / "PWNED"
    torch.save({"state": Payload(marker)}, run / "checkpoint-2" / "custom_checkpoint_0.pkl")
    (tmp_path / "recipe.json").write_text(json.dumps(r))
    code, _, err = cli("train", "--recipe", tmp_path / "recipe.json", "--output", run, "--resume")
    assert code == 2 and err.strip().count("\n") == 0 and "custom_checkpoint_0.pkl: refusing to load" in err
    assert "unsupported GLOBAL" in err and "system" in err  # the reason: what the payload wanted to call
    assert not marker.exists()


def test_safe_load_reads_rng_states_and_refuses_code(tmp_path):
    import random

    import numpy as np

    torch.save({"numpy": np.random.get_state(), "random": random.getstate(), "torch": torch.get_rng_state()},
               tmp_path / "rng.pkl")
    state = safe_load(tmp_path / "rng.pkl", mmap=True)
    assert state["numpy"][0] == "MT19937" and np.array_equal(state["numpy"][1], np.random.get_state()[1])
    torch.save(Payload(tmp_path / "PWNED"), tmp_path / "evil.pt")
    with pytest.raises(UsageError, match="evil.pt: refusing to load"):
        safe_load(tmp_path / "evil.pt")
    assert not (tmp_path / "PWNED").exists()


def test_resume_refuses_another_recipe_naming_the_field(run_copy, no_model_load):
    r, run = run_copy
    with pytest.raises(UsageError, match=r"holds a run of another setup \(recipe\.train\.lr: 0\.001 in the run, "
                                         r"0\.002 now\)"):
        train(r, run, ["train.lr=2e-3"], resume=True, show_progress=False)


def test_resume_refuses_changed_data(tiny_bert_dir, tmp_path, monkeypatch):
    """A run stopped as its model loaded leaves a manifest (and nothing to protect: a changed recipe starts
    again); once it has outputs, changed tuples stop the resume, named."""
    from hopscotch.retriever.model.dual_encoder import DualEncoder

    class Stop(Exception):
        pass

    def stop(*args, **kwargs):
        raise Stop

    monkeypatch.setattr(DualEncoder, "from_pretrained", stop)
    tuples = write_tuples(tmp_path / "t.jsonl")
    r = recipe(tiny_bert_dir, tuples)
    with pytest.raises(Stop):
        train(r, tmp_path / "run", show_progress=False)
    assert (tmp_path / "run" / "train_manifest.json").is_file()
    with pytest.raises(Stop):  # no outputs yet: another recipe starts again, and records itself
        train(r, tmp_path / "run", ["train.lr=5e-4"], resume=True, show_progress=False)
    assert json.loads((tmp_path / "run" / "train_manifest.json").read_text())["recipe"]["train"]["lr"] == 5e-4
    with pytest.raises(Stop):
        train(r, tmp_path / "run", resume=True, show_progress=False)
    (tmp_path / "run" / "final").mkdir()  # as if the run had finished, saving no checkpoint
    with pytest.raises(UsageError, match=r"holds final but no complete checkpoint-\* to continue from"):
        train(r, tmp_path / "run", resume=True, show_progress=False)  # the same run, but nothing to continue
    write_tuples(tuples, n=15)
    with pytest.raises(UsageError, match=rf"inputs\[data\.train\]\[{tuples}\]\.sha256: [0-9a-f]{{12}}\.\.\. in the run"):
        train(r, tmp_path / "run", resume=True, show_progress=False)


def test_a_used_folder_is_refused_and_overwrite_clears_it(run_copy, no_model_load, monkeypatch):
    r, run = run_copy
    (run / "notes.txt").write_text("mine")
    with pytest.raises(UsageError, match=r"holds another run \(checkpoint-2, final, train_summary.json\): "
                                         r"--resume continues it, --overwrite deletes it"):
        train(r, run, show_progress=False)
    with pytest.raises(UsageError, match="--resume and --overwrite contradict"):
        train(r, run, resume=True, overwrite=True, show_progress=False)
    monkeypatch.undo()  # the model may load now
    train(r, run, ["train.max_steps=1", "train.save_every=0"], overwrite=True, show_progress=False)
    assert sorted(p.name for p in run.iterdir()) == ["final", "notes.txt", "train_manifest.json",
                                                      "train_summary.json"]
    assert json.loads((run / "train_manifest.json").read_text())["recipe"]["train"]["max_steps"] == 1
    assert json.loads((run / "train_summary.json").read_text())["steps"] == 1


def test_resume_without_a_manifest_is_refused(run_copy, no_model_load):
    r, run = run_copy
    (run / "train_manifest.json").unlink()
    with pytest.raises(UsageError, match=r"holds checkpoint-2, final, train_summary.json but no "
                                         r"train_manifest.json .*--overwrite starts over"):
        train(r, run, resume=True, show_progress=False)


def test_same_run_resumes_and_stale_temp_files_go(run_copy, capsys):
    r, run = run_copy
    (run / ".checkpoint-9.tmp").mkdir()
    (run / ".checkpoint-9.tmp" / "model.safetensors").write_bytes(b"half")
    (run / ".train_summary.json.k2j3.tmp").write_text("{")
    (run / "final" / ".model.safetensors.x1.tmp").write_bytes(b"half")
    (run / "keep.tmp").write_text("not ours")
    final = train(r, run, resume=True, show_progress=False)
    assert "resuming from" in capsys.readouterr().out
    assert final == str(run / "final")
    assert not (run / ".checkpoint-9.tmp").exists() and not (run / ".train_summary.json.k2j3.tmp").exists()
    assert not (run / "final" / ".model.safetensors.x1.tmp").exists() and (run / "keep.tmp").is_file()
    assert json.loads((run / "train_summary.json").read_text())["steps"] == 3
