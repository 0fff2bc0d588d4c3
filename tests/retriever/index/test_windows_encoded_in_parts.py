"""The windows/ index encoded by every rank (``index.windows``: ``encode_parts``, ``gather_parts``): each rank encodes the windows of its own
document shards as parts, rank 0 gathers them into shards; the result is the corpus's window stream, as one
process streaming it writes, a killed run resumes where it stopped, and two processes write what one does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hopscotch.retriever.index import windows as index_windows
from hopscotch.retriever.index.encode import EncodeOptions, EncodeResult, encode_corpus
from hopscotch.retriever.index.layout import (IndexMeta, load_shard_embeddings, load_shard_ids, read_done_marker,
                                              shard_file)
from hopscotch.retriever.index.windows import TailWindows, WindowSpec
from hopscotch.retriever.io.corpus import read_corpus

REPO = Path(__file__).resolve().parents[3]
SHARD, BATCH, MAX_LENGTH, WINDOWS, STRIDE = 2, 4, 64, 16, 40


def _corpus(path: Path) -> Path:
    """12 documents in 6 shards of 2: long ones (several windows) in every shard but the fourth, short ones beside
    them, so the windows' parts differ in size (none in shard 3) and no part fills a windows/ shard evenly."""
    words = "alpha beta gamma delta river mountain zebra lighthouse ocean forest city bridge".split()
    lengths = [300, 5, 120, 160, 8, 450, 6, 9, 220, 90, 10, 260]
    docs = [{"_id": f"d{i}", "title": f"Title {i}" if i % 3 else "",
             "text": " ".join(f"{words[(i * 7 + j) % len(words)]}{j % 13}" for j in range(n))}
            for i, n in enumerate(lengths)]
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return path


def _build(corpus, model, out) -> EncodeResult:
    return encode_corpus(corpus, model, out, EncodeOptions(shard_size=SHARD, batch_size=BATCH, max_length=MAX_LENGTH,
                                                           windows=WINDOWS, window_stride=STRIDE, show_progress=False))


def _rows(windows_dir: Path) -> tuple[list[str], np.ndarray]:
    meta = IndexMeta.load(windows_dir)
    ids = [i.decode() for s in range(meta.num_shards) for i in load_shard_ids(windows_dir, s)]
    return ids, np.concatenate([load_shard_embeddings(windows_dir, s) for s in range(meta.num_shards)])


def _files(windows_dir: Path) -> dict[str, bytes]:
    """The bytes of the windows' arrays: shards and docid lookup."""
    return {str(p.relative_to(windows_dir)): p.read_bytes() for p in sorted(windows_dir.rglob("*.npy"))}


def _killed_after(monkeypatch, writes: int) -> list[int]:
    """Make the ``writes + 1``-th shard write of ``index.windows`` (a part, then a gathered shard) die like a killed
    process; returns the shards written before it."""
    write, written = index_windows.write_rows, []

    def write_or_die(folder, shard, *args, **kw):
        if len(written) == writes:
            raise KeyboardInterrupt("killed")
        write(folder, shard, *args, **kw)
        written.append(shard)

    monkeypatch.setattr(index_windows, "write_rows", write_or_die)
    return written


def test_one_process_writes_the_corpus_window_stream_in_shards(tiny_bert_dir, tmp_path):
    """The windows/ shards hold the windows of the documents in corpus order, ``SHARD`` a shard, each encoded as
    the encoder encodes it (the one-process stream the windows were encoded from before the parts)."""
    from transformers import AutoTokenizer

    from hopscotch.retriever.model.dense_encoder import DenseEncoder
    from hopscotch.retriever.model.query_template import format_document

    corpus = _corpus(tmp_path / "corpus.jsonl")
    result = _build(corpus, tiny_bert_dir, tmp_path / "idx")
    view = TailWindows(AutoTokenizer.from_pretrained(str(tiny_bert_dir)), WindowSpec(WINDOWS, STRIDE, MAX_LENGTH))
    stream = [w for doc in read_corpus(corpus) for w in view(doc)]
    assert result.window_parts == list(range(6)) and result.encoded_windows == len(stream) > 3 * SHARD
    ids, emb = _rows(tmp_path / "idx" / "windows")
    assert ids == [w.docid for w in stream] and result.meta.windows["rows"] == len(stream)
    encoder = DenseEncoder(str(tiny_bert_dir), max_length=MAX_LENGTH, batch_size=BATCH, device="cpu")
    want = np.concatenate([encoder.encode_texts([format_document(w.title, w.text) for w in stream[i:i + SHARD]])
                           for i in range(0, len(stream), SHARD)]).astype(np.float16)
    # the stream was encoded SHARD windows at a time, the parts a document shard's windows at a time: other
    # batches, so equal up to float16 rounding of float32 sums taken in another order
    np.testing.assert_allclose(emb.astype(np.float32), want.astype(np.float32), rtol=0, atol=1e-3)
    windows = tmp_path / "idx" / "windows"
    parts = json.loads((windows / index_windows.SIZES_FILE).read_text())["parts"]
    assert [p["rows"] for p in parts][3] == 0 and sum(p["rows"] for p in parts) == len(stream)
    assert {p["rank"] for p in parts} == {0} and read_done_marker(windows, 0)["ranks"] == [0]
    assert not (windows / index_windows.PARTS_DIR).exists()  # each part deleted once gathered


def test_killed_while_encoding_the_parts_the_rerun_encodes_only_the_rest(tiny_bert_dir, tmp_path, monkeypatch):
    corpus = _corpus(tmp_path / "corpus.jsonl")
    _build(corpus, tiny_bert_dir, tmp_path / "whole")
    written = _killed_after(monkeypatch, 2)
    with pytest.raises(KeyboardInterrupt):
        _build(corpus, tiny_bert_dir, tmp_path / "idx")
    monkeypatch.undo()
    meta = IndexMeta.load(tmp_path / "idx")
    assert written == [0, 1] and meta.windows == {}  # documents finished, windows not recorded: first windows only
    resumed = _build(corpus, tiny_bert_dir, tmp_path / "idx")
    assert resumed.skipped_shards == list(range(6)) and resumed.window_parts == [2, 3, 4, 5]
    assert resumed.meta.windows == IndexMeta.load(tmp_path / "whole").windows
    assert _files(tmp_path / "idx" / "windows") == _files(tmp_path / "whole" / "windows")


def test_killed_while_gathering_the_rerun_gathers_the_rest(tiny_bert_dir, tmp_path, monkeypatch):
    corpus = _corpus(tmp_path / "corpus.jsonl")
    _build(corpus, tiny_bert_dir, tmp_path / "whole")
    written = _killed_after(monkeypatch, 6 + 10)  # the 6 parts, then 10 gathered shards
    with pytest.raises(KeyboardInterrupt):
        _build(corpus, tiny_bert_dir, tmp_path / "idx")
    monkeypatch.undo()
    parts = tmp_path / "idx" / "windows" / index_windows.PARTS_DIR
    left = sorted(p.name for p in (parts / "shards").glob("*.done.json"))
    # 20 windows gathered: part 0 (14 windows) is gone, part 1 (12, 6 of them gathered) and the rest wait
    written = written[6:]
    assert written == list(range(10)) and left == [f"shard_0000{j}.done.json" for j in range(1, 6)]
    before = {s: shard_file(tmp_path / "idx" / "windows", s, "emb.npy").stat().st_mtime_ns for s in written}
    resumed = _build(corpus, tiny_bert_dir, tmp_path / "idx")
    assert resumed.window_parts == [] and resumed.meta.windows == IndexMeta.load(tmp_path / "whole").windows
    assert _files(tmp_path / "idx" / "windows") == _files(tmp_path / "whole" / "windows")
    assert all(shard_file(tmp_path / "idx" / "windows", s, "emb.npy").stat().st_mtime_ns == t
               for s, t in before.items())  # shards gathered before the kill are not rewritten
    assert not parts.exists()


def test_short_documents_give_no_window_rows_and_a_rerun_is_a_no_op(tiny_bert_dir, tmp_path):
    corpus = tmp_path / "short.jsonl"
    corpus.write_text("".join(json.dumps({"_id": f"s{i}", "text": f"a short note {i}"}) + "\n" for i in range(5)))
    meta = _build(corpus, tiny_bert_dir, tmp_path / "idx").meta
    assert meta.windows["rows"] == 0 and not (tmp_path / "idx" / "windows" / "index.json").exists()
    again = _build(corpus, tiny_bert_dir, tmp_path / "idx")
    assert again.window_parts == [] and again.meta.windows == meta.windows


def _cli_index(corpus, model, out, nproc: int) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    launch = ([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc), "--master_port", "0"]
              if nproc > 1 else [sys.executable])
    cmd = [*launch, "-m", "hopscotch.retriever.cli", "index", "--corpus", str(corpus), "--model", str(model),
           "--out", str(out), "--shard-size", str(SHARD), "--batch-size", str(BATCH), "--max-length", str(MAX_LENGTH),
           "--windows", str(WINDOWS), "--window-stride", str(STRIDE)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.mark.slow
def test_torchrun_two_processes_both_encode_windows_and_write_what_one_does(tiny_bert_dir, tmp_path):
    corpus = _corpus(tmp_path / "corpus.jsonl")
    one = _cli_index(corpus, tiny_bert_dir, tmp_path / "one", nproc=1)
    two = _cli_index(corpus, tiny_bert_dir, tmp_path / "two", nproc=2)
    assert "rank 0/1: encoded 6 shards" in one.stderr and "windows of 6 shards" in one.stderr
    # each rank encoded the windows of its own 3 document shards (shard 3, rank 1's, has none)
    assert "rank 0/2: encoded 3 shards" in two.stderr and "rank 1/2: encoded 3 shards" in two.stderr
    for rank in (0, 1):
        assert f"rank {rank}/2: encoded 3 shards" in two.stderr
        line = next(ln for ln in two.stderr.splitlines() if ln.startswith(f"rank {rank}/2:"))
        assert "; windows of 3 shards" in line
    parts = json.loads((tmp_path / "two" / "windows" / index_windows.SIZES_FILE).read_text())["parts"]
    assert [p["rank"] for p in parts] == [0, 0, 0, 1, 1, 1] and all(p["rows"] for i, p in enumerate(parts) if i != 3)
    ranks = {r for s in range(IndexMeta.load(tmp_path / "two" / "windows").num_shards)
             for r in read_done_marker(tmp_path / "two" / "windows", s)["ranks"]}
    assert ranks == {0, 1}
    # the same windows, ids and vectors, in the same order: the same bytes (each part is encoded the same way,
    # whichever rank encodes it)
    ids_one, emb_one = _rows(tmp_path / "one" / "windows")
    ids_two, emb_two = _rows(tmp_path / "two" / "windows")
    assert ids_one == ids_two and np.array_equal(emb_one, emb_two)
    assert _files(tmp_path / "one" / "windows") == _files(tmp_path / "two" / "windows")
    assert IndexMeta.load(tmp_path / "one").windows == IndexMeta.load(tmp_path / "two").windows
    assert IndexMeta.load(tmp_path / "two" / "windows").faiss.get("default")  # FAISS built over the gathered shards
