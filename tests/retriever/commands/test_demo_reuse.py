"""``hopscotch demo`` reuses a stage only when it would be run from the same settings, inputs and model
(``OUT/demo_manifest.json``): an identical rerun reuses everything, a rerun with another base model rebuilds
what depends on it and reports exactly the numbers of a fresh demo with that model, never the old ones."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from hopscotch.retriever.commands.demo_pipeline import STAGES_FILE, run_demo
from hopscotch.retriever.index.layout import IndexMeta
from hopscotch.retriever.io.fingerprint import digest, model_fingerprint


def demo(out: Path, model: Path) -> dict:
    """The smallest demo: a 150-document, 20-question world, 2 training steps; returns results.json."""
    run_demo(out, docs=150, questions=20, seed=13, model=str(model), stage=lambda name: None, train_steps=2)
    return json.loads((out / "results.json").read_text())


def files(out: Path) -> dict[str, tuple[int, bytes]]:
    """Every run file and stage marker by name: (mtime_ns, bytes)."""
    paths = [*sorted((out / "runs").glob("*.trec")), out / "bm25" / "docids.txt", out / "dense-base" / "index.json",
             out / "tuples.jsonl", out / "model" / "train_summary.json", out / "dense-trained" / "index.json"]
    return {str(p.relative_to(out)): (p.stat().st_mtime_ns, p.read_bytes()) for p in paths}


@pytest.fixture(scope="module")
def models(tiny_bert_dir, tmp_path_factory) -> tuple[Path, Path]:
    """The tiny BERT, and a copy whose weights are perturbed (another model in a same-looking folder)."""
    from safetensors.numpy import load_file, save_file

    root = tmp_path_factory.mktemp("demo_models")
    a, b = root / "a", root / "b"
    shutil.copytree(tiny_bert_dir, a)
    shutil.copytree(tiny_bert_dir, b)
    rng = np.random.default_rng(3)
    tensors = load_file(b / "model.safetensors")
    tensors = {k: (v + rng.normal(0, 0.5, v.shape).astype(v.dtype)) if v.dtype.kind == "f" else v
               for k, v in tensors.items()}
    save_file(tensors, b / "model.safetensors", metadata={"format": "pt"})
    return a, b


@pytest.mark.slow  # four small demos
def test_a_rerun_reuses_what_is_unchanged_and_never_shows_an_older_models_numbers(models, tmp_path, capsys):
    a, b = models
    out = tmp_path / "demo"
    first = demo(out, a)
    before = files(out)
    assert demo(out, a) == first and files(out) == before  # identical rerun: every stage reused, nothing rewritten
    stages = json.loads((out / STAGES_FILE).read_text())
    assert stages["dense-base"]["model"]["files"] == json.loads(json.dumps(model_fingerprint(a)))
    capsys.readouterr()

    second = demo(out, b)  # another model in the same demo folder
    said = capsys.readouterr().out
    assert "dense-base: model.files[model.safetensors].sha256" in said and "removing dense-base to rebuild" in said
    after = files(out)
    for name in ("bm25/docids.txt", "runs/questions.bm25.trec", "runs/steps.bm25.trec"):
        assert after[name] == before[name]  # BM25 does not depend on the model: reused as it was
    for name in ("runs/steps.dense-base.trec", "runs/steps.hybrid-base.trec", "runs/steps.dense-trained.trec"):
        assert after[name][1] != before[name][1], name  # searched again with the new model
    assert IndexMeta.load(out / "dense-base").model_sha256 == digest(model_fingerprint(b))
    manifest = json.loads((out / "model" / "train_manifest.json").read_text())
    assert manifest["recipe"]["model"]["name"] == str(b)  # the trained model starts from the new base model
    assert second != first
    fresh = demo(tmp_path / "fresh", b)
    assert second == fresh  # every number is the new model's, as a demo that never saw the old one reports
    assert {n: v[1] for n, v in after.items() if n.startswith("runs/")} == \
        {n: v[1] for n, v in files(tmp_path / "fresh").items() if n.startswith("runs/")}
