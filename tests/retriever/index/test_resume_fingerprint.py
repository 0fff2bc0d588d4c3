"""Fingerprinted resume of a sharded index: ``encode_config.json`` records the corpus files' content, the
model folder's files and the encode flags; a rerun that differs in any of them is refused with the difference
named (a same-size corpus edit, changed weights, a flipped ``--reasoning-aware``), and an identical rerun of a
killed job resumes to the same bytes as an uninterrupted build."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.index.docstore import DocStore
from hopscotch.retriever.index.encode import EncodeOptions, encode_corpus
from hopscotch.retriever.index.layout import ENCODE_CONFIG_FILE, META_FILE, IndexMeta, done_shards, shard_file
from hopscotch.retriever.io import fingerprint
from hopscotch.retriever.io.corpus import read_corpus

SHARD, DOCS = 50, 900
SHARD_PARTS = ("emb.npy", "ids.npy", "docs.jsonl", "offsets.npy")


def quiet(**kw) -> EncodeOptions:
    return EncodeOptions(show_progress=False, **{"shard_size": SHARD, "batch_size": 16, "max_length": 64} | kw)


@pytest.fixture(scope="module")
def pristine(small_world, tiny_bert_dir, tmp_path_factory, kill_encode_after) -> Path:
    """``corpus.jsonl`` (900 real-text documents), ``model/`` (the tiny BERT) and ``idx/``: a job killed
    after its first shard, run in ``each/`` (the config records resolved paths) and kept in ``pristine/``."""
    base = tmp_path_factory.mktemp("killed") / "each"
    base.mkdir()
    docs = [d.to_beir() for d in read_corpus(small_world / "corpus.jsonl")]
    rows = [{**d, "_id": f"{d['_id']}-{c}"} for c in range(DOCS // len(docs)) for d in docs]
    (base / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    shutil.copytree(tiny_bert_dir, base / "model")
    finished = kill_encode_after(base / "corpus.jsonl", base / "model", base / "idx", SHARD)
    assert 1 <= len(finished) < DOCS // SHARD, "the job must be killed part way"
    assert not (base / "idx" / META_FILE).exists()
    shutil.copytree(base, base.parent / "pristine")
    return base.parent / "pristine"


@pytest.fixture
def work(pristine) -> Path:
    """The killed job, restored at the path it ran in for each test."""
    here = pristine.parent / "each"
    shutil.rmtree(here, ignore_errors=True)
    shutil.copytree(pristine, here)  # copy2: sizes, contents and mtimes as they were
    return here


def shard_bytes(out: Path, shards) -> dict[tuple[int, str], bytes]:
    return {(s, k): shard_file(out, s, k).read_bytes() for s in shards for k in (*SHARD_PARTS, "done.json")}


def test_a_same_size_corpus_edit_is_refused_naming_the_corpus(work, cli):
    corpus, out = work / "corpus.jsonl", work / "idx"
    before = shard_bytes(out, done_shards(out))
    text = corpus.read_text()
    edited = text[:-20] + text[-20:].replace("e", "a", 1)  # a word of the last document, same byte count
    assert edited != text and len(edited.encode()) == len(text.encode())
    corpus.write_text(edited)
    with pytest.raises(UsageError) as err:
        encode_corpus(corpus, work / "model", out, quiet())
    message = str(err.value)
    assert str(corpus.resolve()) in message and "corpus content" in message and "sha256" in message
    assert message.startswith(str(out / ENCODE_CONFIG_FILE)) and "--overwrite" in message
    assert shard_bytes(out, done_shards(out)) == before and not (out / META_FILE).exists()  # nothing touched
    code, _, stderr = cli("index", "--corpus", corpus, "--model", work / "model", "--out", out,
                          "--shard-size", SHARD, "--batch-size", 16, "--max-length", 64)
    assert code == 2 and len(stderr.strip().splitlines()) == 1 and str(corpus.resolve()) in stderr
    # --overwrite starts again and encodes the edited text
    result = encode_corpus(corpus, work / "model", out, quiet(overwrite=True))
    assert result.skipped_shards == [] and result.meta.num_docs == DOCS
    last = list(read_corpus(corpus))[-1]
    assert DocStore(out).get(last.docid) == last


def test_changed_model_weights_are_refused(work):
    from safetensors.numpy import load_file, save_file

    weights = work / "model" / "model.safetensors"
    size = weights.stat().st_size
    tensors = load_file(weights)
    name = min(tensors)
    tensors[name] = tensors[name] + np.float32(0.01)  # same shapes and dtypes: the file keeps its size
    save_file(tensors, weights, metadata={"format": "pt"})
    assert weights.stat().st_size == size
    with pytest.raises(UsageError, match=r"the model weights changed.*model\.safetensors.*--overwrite"):
        encode_corpus(work / "corpus.jsonl", work / "model", work / "idx", quiet())
    # a model card is not part of the model: editing it resumes
    (work / "model" / "README.md").write_text("another card")
    shutil.copy2(work.parent / "pristine" / "model" / "model.safetensors", weights)
    assert encode_corpus(work / "corpus.jsonl", work / "model", work / "idx", quiet()).meta.num_docs == DOCS


def test_an_identical_rerun_resumes_to_the_bytes_of_an_uninterrupted_build_and_other_flags_are_refused(work):
    corpus, model, out = work / "corpus.jsonl", work / "model", work / "idx"
    finished = done_shards(out)
    before = shard_bytes(out, finished)
    result = encode_corpus(corpus, model, out, quiet())
    assert result.skipped_shards == finished and sorted(result.encoded_shards + finished) == list(range(DOCS // SHARD))
    assert shard_bytes(out, finished) == before  # the shards finished before the kill are not rewritten
    whole = encode_corpus(corpus, model, work / "whole", quiet())
    for s in range(DOCS // SHARD):
        for kind in SHARD_PARTS:
            assert shard_file(out, s, kind).read_bytes() == shard_file(work / "whole", s, kind).read_bytes(), (s, kind)
    for name in ("hashes.npy", "rows.npy"):
        assert (out / "lookup" / name).read_bytes() == (work / "whole" / "lookup" / name).read_bytes()
    meta = IndexMeta.load(out)
    assert meta.model_sha256 == fingerprint.digest(fingerprint.model_fingerprint(model)) == whole.meta.model_sha256
    assert meta.encode_sha256 == whole.meta.encode_sha256
    config = json.loads((out / ENCODE_CONFIG_FILE).read_text())
    assert config["corpus_files"][str(corpus.resolve())]["sha256"] == fingerprint.file_fingerprint(corpus)["sha256"]
    assert "model.safetensors" in config["model_files"] and "README.md" not in config["model_files"]
    # a third run has nothing to do: index.json and the lookup are left as they are
    stamp = (out / META_FILE).stat().st_mtime_ns, (out / META_FILE).read_bytes()
    assert encode_corpus(corpus, model, out, quiet()).encoded_shards == []
    assert ((out / META_FILE).stat().st_mtime_ns, (out / META_FILE).read_bytes()) == stamp
    # a flag that changes the index (--reasoning-aware, --precision) is refused, never written into index.json
    with pytest.raises(UsageError, match=r"--reasoning-aware.*reasoning_aware: False then, True now.*--overwrite"):
        encode_corpus(corpus, model, out, quiet(reasoning_aware=True))
    with pytest.raises(UsageError, match="--precision"):
        encode_corpus(corpus, model, out, quiet(precision="bf16"))
    assert ((out / META_FILE).stat().st_mtime_ns, (out / META_FILE).read_bytes()) == stamp
    assert not IndexMeta.load(out).reasoning_aware


def test_shards_without_a_config_are_refused(work):
    os.unlink(work / "idx" / ENCODE_CONFIG_FILE)
    with pytest.raises(UsageError, match=f"no {ENCODE_CONFIG_FILE}"):
        encode_corpus(work / "corpus.jsonl", work / "model", work / "idx", quiet())


def test_model_fingerprint_covers_weights_and_configs_not_cards(tmp_path, monkeypatch):
    model = tmp_path / "m"
    (model / "1_Pooling").mkdir(parents=True)
    (model / "pytorch_model.bin").write_bytes(bytes(range(256)) * 64)
    (model / "1_Pooling" / "config.json").write_text("{}")
    (model / "README.md").write_text("card")
    (model / ".cache").mkdir()
    (model / ".cache" / "x").write_text("lock")
    monkeypatch.setattr(fingerprint, "FULL_HASH_BYTES", 4096)  # the weights are sampled
    monkeypatch.setattr(fingerprint, "BLOCK", 256)
    fp = fingerprint.model_fingerprint(model)
    assert sorted(fp) == ["1_Pooling/config.json", "pytorch_model.bin"]
    assert set(fp["pytorch_model.bin"]) == {"size", "mtime_ns", "sha256_sampled"}
    assert fingerprint.digest({"b": 1, "a": [fp]}) == fingerprint.digest({"a": [fp], "b": 1})
    with (model / "pytorch_model.bin").open("r+b") as f:
        f.write(b"x")
    assert fingerprint.model_fingerprint(model)["pytorch_model.bin"] != fp["pytorch_model.bin"]
