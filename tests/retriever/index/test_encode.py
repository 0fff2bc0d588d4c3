"""Sharded encoding: complete shards, float16 + ids + docstore, resume after a crash, ranks, ClimbMix ids."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hopscotch.retriever.errors import FormatError, UsageError
from hopscotch.retriever.index.docstore import DocStore
from hopscotch.retriever.index.encode import EncodeOptions, encode_corpus
from hopscotch.retriever.index.layout import (
    IndexMeta,
    done_shards,
    iter_shard_docids,
    load_shard_embeddings,
    shard_file,
)
from hopscotch.retriever.io.corpus import read_corpus

REPO = Path(__file__).resolve().parents[3]


def quiet(**kw) -> EncodeOptions:
    return EncodeOptions(show_progress=False, **kw)


def all_docids(index_dir, meta) -> list[str]:
    return [d for s in range(meta.num_shards) for d in iter_shard_docids(index_dir, s)]


def write_corpus(path: Path, docs: list[dict]) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return path


def big_corpus(small_world: Path, path: Path, copies: int) -> Path:
    """The small world's documents repeated under fresh ids (a larger real-text corpus)."""
    base = [d.to_beir() for d in read_corpus(small_world / "corpus.jsonl")]
    docs = [{**d, "_id": f"{d['_id']}-{c}"} for c in range(copies) for d in base]
    return write_corpus(path, docs)


def test_encode_writes_complete_float16_shards(small_world, tiny_bert_dir, tmp_path):
    from hopscotch.retriever.model.dense_encoder import DenseEncoder

    corpus = small_world / "corpus.jsonl"
    out = tmp_path / "idx"
    result = encode_corpus(corpus, tiny_bert_dir, out, quiet(shard_size=64, batch_size=16, max_length=64))
    docs = list(read_corpus(corpus))
    meta = result.meta
    assert meta is not None and meta.num_docs == len(docs) == 300
    assert meta.num_shards == 5 and result.encoded_shards == [0, 1, 2, 3, 4]
    assert (meta.dim, meta.max_length, meta.shard_size) == (32, 64, 64)
    assert meta.model_path == str(tiny_bert_dir) and not meta.reasoning_aware
    assert done_shards(out) == [0, 1, 2, 3, 4]
    emb = np.concatenate([load_shard_embeddings(out, s) for s in range(5)])
    assert emb.dtype == np.float16 and emb.shape == (300, 32)
    assert all_docids(out, meta) == [d.docid for d in docs]  # corpus order, each once
    reference = DenseEncoder(tiny_bert_dir, max_length=64).encode_documents(docs, show_progress=False)
    np.testing.assert_allclose(emb.astype(np.float32), reference, atol=2e-3)
    store = DocStore(out)
    for d in (docs[0], docs[137], docs[-1]):
        assert store.get(d.docid) == d
    assert store.get("no-such-doc") is None
    assert IndexMeta.load(out).num_docs == 300


def test_rerun_skips_finished_shards_and_redoes_a_broken_one(small_world, tiny_bert_dir, tmp_path):
    corpus = small_world / "corpus.jsonl"
    out = tmp_path / "idx"
    encode_corpus(corpus, tiny_bert_dir, out, quiet(shard_size=64, batch_size=16, max_length=64))
    # a crash while writing shard 2: marker gone, embeddings half written, a temp file left behind
    os.unlink(shard_file(out, 2, "done.json"))
    shard_file(out, 2, "emb.npy").write_bytes(b"\x93NUMPY garbage")
    (out / "shards" / ".shard_00002.ids.npy.abc.tmp").write_bytes(b"partial")
    before = {s: shard_file(out, s, "emb.npy").stat().st_mtime_ns for s in (0, 1, 3, 4)}
    again = encode_corpus(corpus, tiny_bert_dir, out, quiet(shard_size=64, batch_size=16, max_length=64))
    assert again.encoded_shards == [2] and again.skipped_shards == [0, 1, 3, 4]
    assert {s: shard_file(out, s, "emb.npy").stat().st_mtime_ns for s in (0, 1, 3, 4)} == before
    assert not list((out / "shards").glob(".shard_00002.*"))
    ids = all_docids(out, again.meta)
    assert len(ids) == len(set(ids)) == 300
    assert load_shard_embeddings(out, 2).shape == (64, 32)
    # a third run has nothing to do and does not load the model
    third = encode_corpus(corpus, tiny_bert_dir, out, quiet(shard_size=64, max_length=64, batch_size=16))
    assert third.encoded_shards == [] and third.meta.num_docs == 300


def test_killed_job_resumes_with_every_docid_exactly_once(small_world, tiny_bert_dir, tmp_path, kill_encode_after):
    corpus = big_corpus(small_world, tmp_path / "corpus.jsonl", copies=10)  # 3,000 documents
    out = tmp_path / "idx"
    finished = kill_encode_after(corpus, tiny_bert_dir, out, shard_size=50, shards=3)
    assert 3 <= len(finished) < 60, "the job must be killed part way"
    result = encode_corpus(corpus, tiny_bert_dir, out, quiet(shard_size=50, batch_size=16, max_length=64))
    assert sorted(result.encoded_shards + result.skipped_shards) == list(range(60))
    assert set(result.skipped_shards) == set(finished)  # nothing finished before the kill is encoded again
    ids = all_docids(out, result.meta)
    assert ids == [d.docid for d in read_corpus(corpus)]  # every docid exactly once, in order


def test_ranks_split_the_shards(small_world, tiny_bert_dir, tmp_path):
    corpus = small_world / "corpus.jsonl"
    out = tmp_path / "idx"
    r1 = encode_corpus(corpus, tiny_bert_dir, out,
                       quiet(shard_size=64, batch_size=16, max_length=64, rank=1, world_size=2))
    assert r1.encoded_shards == [2, 3, 4] and r1.meta is None  # rank 1 does not finish the index
    assert not (out / "index.json").exists()
    r0 = encode_corpus(corpus, tiny_bert_dir, out,
                       quiet(shard_size=64, batch_size=16, max_length=64, rank=0, world_size=2, wait_timeout=5))
    assert r0.encoded_shards == [0, 1]
    assert all_docids(out, r0.meta) == [d.docid for d in read_corpus(corpus)]


def test_a_rank_reads_only_the_files_of_its_block(tiny_bert_dir, tmp_path):
    folder = tmp_path / "parts"
    folder.mkdir()
    for part in range(4):
        lines = [json.dumps({"text": f"part {part} row {row} on lakes"}) for row in range(10)]
        if part == 0:
            lines[3] = "{ this line is not JSON"  # only rank 0's block contains it
        (folder / f"part_{part:05d}.jsonl").write_text("\n".join(lines) + "\n")
    out = tmp_path / "idx"
    r1 = encode_corpus(folder, tiny_bert_dir, out, quiet(shard_size=10, max_length=16, rank=1, world_size=2))
    assert r1.encoded_shards == [2, 3]
    assert json.loads((out / "corpus_counts.json").read_text())["counts"] == [10, 10, 10, 10]
    with pytest.raises(FormatError, match=r"part_00000.jsonl:4"):
        encode_corpus(folder, tiny_bert_dir, out, quiet(shard_size=10, max_length=16, rank=0, world_size=2))


def test_rank0_times_out_when_other_ranks_never_finish(small_world, tiny_bert_dir, tmp_path):
    with pytest.raises(UsageError, match="not finished by the other ranks"):
        encode_corpus(small_world / "corpus.jsonl", tiny_bert_dir, tmp_path / "idx",
                      quiet(shard_size=64, max_length=64, rank=0, world_size=2, wait_timeout=0.2, poll_seconds=0.05))


def test_other_settings_on_the_same_folder_are_refused(small_world, tiny_bert_dir, tmp_path):
    corpus = small_world / "corpus.jsonl"
    out = tmp_path / "idx"
    encode_corpus(corpus, tiny_bert_dir, out, quiet(shard_size=64, max_length=64))
    with pytest.raises(UsageError, match="shard_size"):
        encode_corpus(corpus, tiny_bert_dir, out, quiet(shard_size=100, max_length=64))
    from hopscotch.retriever.index.faiss_index import build_faiss_index
    build_faiss_index(out, "IVF2,Flat", layout="shards", show_progress=False)
    result = encode_corpus(corpus, tiny_bert_dir, out, quiet(shard_size=100, max_length=64, overwrite=True))
    assert result.meta.num_shards == 3 and done_shards(out) == [0, 1, 2]
    assert not (out / "faiss").exists() and result.meta.faiss == {}  # nothing built on the old shards survives


def test_climbmix_parquet_shards_get_positional_ids(tiny_bert_dir, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path / "climbmix"
    folder.mkdir()
    for shard in range(2):
        texts = [f"document {row} of part {shard} about rivers and mountains" for row in range(7)]
        pq.write_table(pa.table({"text": texts}), folder / f"part_{shard:05d}.parquet")
    result = encode_corpus(folder, tiny_bert_dir, tmp_path / "idx", quiet(shard_size=5, max_length=32))
    ids = all_docids(tmp_path / "idx", result.meta)
    assert ids == [f"shard_{s:05d}_{r}" for s in range(2) for r in range(7)]
    doc = DocStore(tmp_path / "idx").get("shard_00001_3")
    assert doc.text == "document 3 of part 1 about rivers and mountains"


def test_repeated_docids_are_a_format_error(tiny_bert_dir, tmp_path):
    corpus = write_corpus(tmp_path / "c.jsonl", [{"_id": "a", "text": "x y"}, {"_id": "b", "text": "z"},
                                                 {"_id": "a", "text": "w"}])
    with pytest.raises(FormatError, match="unique document ids.*'a'"):
        encode_corpus(corpus, tiny_bert_dir, tmp_path / "idx", quiet(shard_size=2, max_length=16))


def test_empty_corpus_and_bad_sizes_are_usage_errors(tiny_bert_dir, tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(UsageError, match="no documents"):
        encode_corpus(empty, tiny_bert_dir, tmp_path / "idx", quiet())
    with pytest.raises(UsageError, match="positive"):
        encode_corpus(empty, tiny_bert_dir, tmp_path / "idx2", quiet(shard_size=0))


def test_malformed_corpus_line_names_file_and_line(tiny_bert_dir, tmp_path):
    corpus = tmp_path / "bad.jsonl"
    corpus.write_text('{"_id": "a", "text": "fine"}\n{"_id": "b", "body": "no text"}\n')
    with pytest.raises(FormatError, match=r"bad.jsonl:2"):
        encode_corpus(corpus, tiny_bert_dir, tmp_path / "idx", quiet(shard_size=1))


@pytest.mark.slow
def test_torchrun_two_processes_build_one_index(small_world, tiny_bert_dir, tmp_path):
    out = tmp_path / "idx"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "0",
           "-m", "hopscotch.retriever.cli", "index", "--corpus", str(small_world / "corpus.jsonl"), "--model",
           str(tiny_bert_dir), "--out", str(out), "--shard-size", "40", "--max-length", "64"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-2000:]
    meta = IndexMeta.load(out)
    assert meta.num_shards == 8
    assert all_docids(out, meta) == [d.docid for d in read_corpus(small_world / "corpus.jsonl")]
    seconds = {s: json.loads(shard_file(out, s, "done.json").read_text()) for s in range(8)}
    assert all(m["num_docs"] == (40 if s < 7 else 20) for s, m in seconds.items())
    assert "rank 1/2: encoded 4 shards" in proc.stderr


def test_bf16_autocast_stays_close_to_fp32(small_world, tiny_bert_dir, tmp_path, monkeypatch):
    from hopscotch.retriever.model import cpu_precision

    monkeypatch.setattr(cpu_precision, "cpu_supports_bf16", lambda: True)  # bf16 runs (emulated on older CPUs)
    corpus = small_world / "corpus.jsonl"
    kw = dict(shard_size=300, batch_size=32, max_length=64)
    a = encode_corpus(corpus, tiny_bert_dir, tmp_path / "fp32", quiet(precision="fp32", **kw))
    b = encode_corpus(corpus, tiny_bert_dir, tmp_path / "bf16", quiet(precision="bf16", **kw))
    x = load_shard_embeddings(a.index_dir, 0).astype(np.float32)
    y = load_shard_embeddings(b.index_dir, 0).astype(np.float32)
    assert not np.array_equal(x, y) and np.all(np.isfinite(y))
    assert np.allclose(np.linalg.norm(y, axis=1), 1.0, atol=2e-3)  # normalised in float32, stored as float16
    cosine = np.sum(x * y, axis=1) / (np.linalg.norm(x, axis=1) * np.linalg.norm(y, axis=1))
    assert cosine.min() > 0.99
    with pytest.raises(UsageError, match="precision"):
        encode_corpus(corpus, tiny_bert_dir, tmp_path / "x", quiet(precision="int4", **kw))


def test_bf16_on_a_cpu_without_bf16_instructions_encodes_in_fp32(small_world, tiny_bert_dir, tmp_path, monkeypatch):
    from hopscotch.retriever.model import cpu_precision

    monkeypatch.setattr(cpu_precision, "cpu_supports_bf16", lambda: False)
    monkeypatch.setattr(cpu_precision, "_warned", set())
    corpus = small_world / "corpus.jsonl"
    kw = dict(shard_size=300, batch_size=32, max_length=64)
    a = encode_corpus(corpus, tiny_bert_dir, tmp_path / "fp32", quiet(precision="fp32", **kw))
    with pytest.warns(RuntimeWarning, match=r"--precision: bf16 .* running in float32"):
        b = encode_corpus(corpus, tiny_bert_dir, tmp_path / "bf16", quiet(precision="bf16", **kw))
    assert np.array_equal(load_shard_embeddings(a.index_dir, 0), load_shard_embeddings(b.index_dir, 0))
