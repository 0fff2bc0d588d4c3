"""A synth run's work files resume only the same run: the manifest in ``<out>.parts/`` records the content of
every input (QA, qrels, corpus, traces, ``--bm25-index``) and the oracle model's files, and a rerun that
differs (another BM25 index, an index rebuilt in place, a same-size trace edit) is refused with the
difference named; a touched but unchanged file still resumes to the bytes of an uninterrupted run."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from hopscotch.data_synth.config import SynthConfig
from hopscotch.data_synth.pipeline import SynthInputs, synthesize
from hopscotch.data_synth.worker import QuestionWorker
from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.index.bm25 import BM25Index
from hopscotch.retriever.io.corpus import read_corpus


def run(world, traces, out, bm25=None, **kw):
    return synthesize(SynthInputs(world, traces=[traces], bm25_index=bm25), out=out,
                      config=SynthConfig(show_progress=False, **kw))


@pytest.fixture(scope="module")
def bm25(small_world, tmp_path_factory) -> dict:
    """Two saved BM25 indexes of the world: over every document, and over its first 250 only."""
    root = tmp_path_factory.mktemp("bm25")
    docs = list(read_corpus(small_world / "corpus.jsonl"))
    BM25Index.build(docs, show_progress=False).save(root / "all")
    BM25Index.build(docs[:250], show_progress=False).save(root / "part")
    return {"all": root / "all", "part": root / "part"}


@pytest.fixture
def interrupted(small_world, bm25, tmp_path, monkeypatch):
    """A run with the full BM25 index stopped after 11 questions; returns (traces copy, out, parts folder)."""
    traces = tmp_path / "traces.jsonl"
    shutil.copy2(small_world / "traces.jsonl", traces)
    out = tmp_path / "t.jsonl"
    original, calls = QuestionWorker.process, {"n": 0}

    def dying(self, question_id, steps):
        calls["n"] += 1
        if calls["n"] == 12:
            raise KeyboardInterrupt
        return original(self, question_id, steps)

    monkeypatch.setattr(QuestionWorker, "process", dying)
    with pytest.raises(KeyboardInterrupt):
        run(small_world, traces, out, bm25["all"])
    monkeypatch.setattr(QuestionWorker, "process", original)
    parts = tmp_path / "t.jsonl.parts"
    assert not out.exists() and len(list(parts.glob("0*.json"))) == 11
    return traces, out, parts


def snapshot(parts):
    return {p.name: p.read_bytes() for p in sorted(parts.iterdir())}


def test_another_bm25_index_is_refused_and_the_same_one_resumes(small_world, bm25, interrupted, tmp_path, cli):
    traces, out, parts = interrupted
    before = snapshot(parts)
    with pytest.raises(UsageError) as err:
        run(small_world, traces, out, bm25["part"])
    message = str(err.value)
    assert "inputs.bm25_index.path" in message and str(bm25["part"]) in message and "--fresh" in message
    with pytest.raises(UsageError, match=r"inputs\.bm25_index: .* then, None now"):
        run(small_world, traces, out, None)  # an index built in memory is another run too
    code, _, stderr = cli("synth", "--qa", small_world, "--traces", traces, "--out", out,
                          "--bm25-index", bm25["part"])
    assert code == 2 and stderr.count("\n") == 1 and "bm25_index" in stderr
    assert snapshot(parts) == before and not out.exists()  # the refused runs wrote nothing
    run(small_world, traces, out, bm25["all"])
    run(small_world, traces, tmp_path / "whole.jsonl", bm25["all"])
    assert out.read_bytes() == (tmp_path / "whole.jsonl").read_bytes()
    assert not parts.exists()


def test_a_bm25_index_rebuilt_in_place_is_refused(small_world, bm25, interrupted, tmp_path):
    traces, out, _ = interrupted
    moved = tmp_path / "moved"
    shutil.copytree(bm25["all"], moved)  # the index the run used, about to be rebuilt in its folder
    try:
        shutil.rmtree(bm25["all"])
        shutil.copytree(bm25["part"], bm25["all"])
        with pytest.raises(UsageError, match=r"inputs\.bm25_index\.content\[.*--fresh"):
            run(small_world, traces, out, bm25["all"])
    finally:
        shutil.rmtree(bm25["all"])
        shutil.copytree(moved, bm25["all"])


def test_a_same_size_trace_edit_is_refused_a_touch_is_not(small_world, bm25, interrupted, tmp_path):
    traces, out, parts = interrupted
    original = traces.read_bytes()
    os.utime(traces, ns=(1, 1))  # a touch: same content, another mtime
    rows = [json.loads(line) for line in original.decode().splitlines()]
    last = rows[-1]["query"]
    rows[-1]["query"] = last[:-1] + ("x" if last[-1] != "x" else "y")
    edited = "".join(json.dumps(r) + "\n" for r in rows).encode()
    assert len(edited) == len(original) and edited != original
    traces.write_bytes(edited)
    with pytest.raises(UsageError, match=r"inputs\.traces\.0\.content\.sha256: .* then, .* now.*--fresh"):
        run(small_world, traces, out, bm25["all"])
    traces.write_bytes(original)
    os.utime(traces, ns=(2, 2))
    stats = run(small_world, traces, out, bm25["all"])  # same content: resumes
    assert stats["steps_kept"] > 0 and not parts.exists()


def test_the_oracle_model_files_are_part_of_the_manifest(small_world, tiny_bert_dir, tmp_path):
    from hopscotch.data_synth import pipeline
    from hopscotch.retriever.io.fingerprint import model_fingerprint

    model = tmp_path / "oracle"
    shutil.copytree(tiny_bert_dir, model)
    recorded = pipeline._oracle_model(SynthConfig(reranker="dense", encoder=str(model)))
    assert recorded == {"path": str(model.resolve()), "files": model_fingerprint(model)}
    assert "model.safetensors" in recorded["files"]
    assert pipeline._oracle_model(SynthConfig(reranker="lexical")) is None


def test_work_files_written_before_the_oracle_scores_are_refused(small_world, bm25, interrupted):
    """Parts of a run that wrote passages without the oracle's ``score`` (its manifest has no ``passage_fields``)
    would mix scored and unscored tuples in one file: refused, naming the field."""
    traces, out, parts = interrupted
    manifest = json.loads((parts / "manifest.json").read_text())
    assert manifest["passage_fields"] == ["docid", "title", "text", "score"]
    del manifest["passage_fields"]
    (parts / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(UsageError, match=r"passage_fields: absent then, \['docid', 'title', 'text', 'score'\] now"):
        run(small_world, traces, out, bm25["all"])
