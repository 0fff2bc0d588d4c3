"""Passage windows (``hopscotch index --windows``): the cut, the MaxP merge, the windows/ index, resume and search."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.index.encode import EncodeOptions, encode_corpus
from hopscotch.retriever.index.layout import IndexMeta, iter_shard_docids
from hopscotch.retriever.index.windows import (
    TailWindows,
    WindowSpec,
    best_per_document,
    parent_docid,
    search_windows,
    window_docid,
    window_spec,
)
from hopscotch.retriever.io.corpus import Document

FILLER = " ".join(f"filler{i} words about nothing in particular." for i in range(150))
NEEDLE = "The unique evidence sentence says zebras graze near the lighthouse."


def _tokenizer(model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(model_dir))


def _corpus(path: Path) -> Path:
    docs = [{"_id": "short", "title": "Cats", "text": "A short note about cats."},
            {"_id": "deep", "title": "Page", "text": FILLER + " " + NEEDLE},
            {"_id": "shallow", "title": "", "text": NEEDLE + " " + FILLER},
            {"_id": "other#w1", "title": "", "text": FILLER}]
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return path


def test_window_ids_name_their_document_even_when_the_docid_holds_the_separator():
    assert parent_docid(window_docid("a#w3", 7)) == "a#w3"
    assert parent_docid(window_docid("shard_00001_5", 1)) == "shard_00001_5"


def test_windows_cover_the_text_after_the_first_window_within_the_budget(tiny_bert_dir):
    tok = _tokenizer(tiny_bert_dir)
    spec = WindowSpec(max_windows=100, stride=40, max_length=64)
    view = TailWindows(tok, spec, passage_prefix="passage: ")
    doc = Document("d", "A title", FILLER)
    windows = view(doc)
    assert [w.docid for w in windows] == [f"d#w{i}" for i in range(1, len(windows) + 1)]
    head = len(tok("passage: A title ", add_special_tokens=False)["input_ids"])
    budget = 64 - 2 - head
    for w in windows:
        assert w.title == "A title"
        assert w.text in doc.text
        assert len(tok(w.text, add_special_tokens=False)["input_ids"]) <= budget
        # what the encoder sees fits its max length: nothing of the window is cut
        assert len(tok("passage: " + "A title " + w.text)["input_ids"]) <= 64
    offsets = tok(doc.text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    starts = [doc.text.index(w.text) for w in windows]
    assert starts == sorted(starts) and starts[0] == offsets[40][0]  # the first extra window starts at the stride
    assert doc.text.endswith(windows[-1].text)                        # the last one reaches the end
    for a, b in zip(windows, windows[1:]):                            # consecutive windows overlap: nothing skipped
        assert doc.text.index(b.text) < doc.text.index(a.text) + len(a.text)


def test_short_documents_and_one_window_give_no_extra_windows(tiny_bert_dir):
    tok = _tokenizer(tiny_bert_dir)
    assert TailWindows(tok, WindowSpec(8, 40, 64))(Document("s", "", "a few words")) == []
    assert TailWindows(tok, WindowSpec(1, 40, 64))(Document("d", "", FILLER)) == []
    capped = TailWindows(tok, WindowSpec(3, 40, 64))(Document("d", "", FILLER))
    assert len(capped) == 2  # at most max_windows, the first (usual) row included


def test_a_stride_over_the_budget_is_capped_so_no_text_is_skipped(tiny_bert_dir):
    tok = _tokenizer(tiny_bert_dir)
    windows = TailWindows(tok, WindowSpec(100, 500, 64))(Document("d", "", FILLER))
    assert len(windows) > 3
    for a, b in zip(windows, windows[1:]):  # the windows abut: only whitespace lies between them
        end = FILLER.index(a.text) + len(a.text)
        assert FILLER[end:FILLER.index(b.text)].strip() == ""


def test_bad_window_settings_are_usage_errors():
    with pytest.raises(UsageError, match="--max-windows"):
        WindowSpec(0, 10, 64)
    with pytest.raises(UsageError, match="--stride"):
        WindowSpec(4, 0, 64)
    assert window_spec(None, None, 160) == WindowSpec(1, 128, 160)
    assert not window_spec(1, None, 160).enabled


def test_best_per_document_scores_each_document_by_its_best_row():
    main = [("a", 0.5), ("b", 0.4), ("c", 0.1)]
    windows = [("c#w2", 0.9), ("a#w1", 0.45), ("d#w1", 0.3), ("c#w1", 0.2)]
    assert best_per_document(main, windows, 3) == [("c", 0.9), ("a", 0.5), ("b", 0.4)]
    assert best_per_document(main, [], 2) == main[:2]


def test_search_windows_gives_the_exact_maxp_top_k():
    """Against brute force: every document's best row over its first-window row and all its windows."""
    rng = np.random.default_rng(0)
    docs = [f"d{i}" for i in range(40)]
    main_emb = rng.normal(size=(40, 8)).astype(np.float32)
    owners = [i for i in range(40) for _ in range(int(rng.integers(0, 6)))]
    win_emb = rng.normal(size=(len(owners), 8)).astype(np.float32)
    win_ids = [window_docid(docs[o], j) for j, o in enumerate(owners)]
    queries = rng.normal(size=(5, 8)).astype(np.float32)

    def search(emb, q, depth):
        s = q @ emb.T
        rows = np.argsort(-s, axis=1, kind="stable")[:, :depth]
        return np.take_along_axis(s, rows, 1), rows

    k = 5
    ms, mr = search(main_emb, queries, k)
    hits = search_windows(lambda q, depth: search(win_emb, q, depth), lambda r: win_ids[r], len(win_ids), queries, k)
    for qi in range(len(queries)):
        main = [(docs[r], float(s)) for s, r in zip(ms[qi], mr[qi])]
        got = best_per_document(main, hits[qi], k)
        best = {d: float(queries[qi] @ main_emb[i]) for i, d in enumerate(docs)}
        for j, o in enumerate(owners):
            best[docs[o]] = max(best[docs[o]], float(queries[qi] @ win_emb[j]))
        want = sorted(best.items(), key=lambda x: -x[1])[:k]
        assert [d for d, _ in got] == [d for d, _ in want]
        np.testing.assert_allclose([s for _, s in got], [s for _, s in want], rtol=1e-5)


def _index(corpus, model, out, **kw) -> IndexMeta:
    return encode_corpus(corpus, model, out, EncodeOptions(shard_size=2, batch_size=4, max_length=64,
                                                           show_progress=False, **kw)).meta


def test_index_with_windows_writes_the_windows_folder_and_records_it(tiny_bert_dir, tmp_path):
    corpus = _corpus(tmp_path / "corpus.jsonl")
    meta = _index(corpus, tiny_bert_dir, tmp_path / "idx", windows=16, window_stride=40)
    assert meta.num_docs == 4
    assert meta.windows["dir"] == "windows" and meta.windows["max_windows"] == 16 and meta.windows["stride"] == 40
    wmeta = IndexMeta.load(tmp_path / "idx" / "windows")
    assert meta.windows["rows"] == wmeta.num_docs > 3
    ids = [d for s in range(wmeta.num_shards) for d in iter_shard_docids(tmp_path / "idx" / "windows", s)]
    assert {parent_docid(d) for d in ids} == {"deep", "shallow", "other#w1"}  # "short" fits one window
    assert not wmeta.docstore
    assert IndexMeta.load(tmp_path / "idx").windows == meta.windows


def test_without_windows_the_index_is_as_before(tiny_bert_dir, tmp_path):
    corpus = _corpus(tmp_path / "corpus.jsonl")
    meta = _index(corpus, tiny_bert_dir, tmp_path / "idx")
    assert meta.windows == {} and not (tmp_path / "idx" / "windows").exists()
    config = json.loads((tmp_path / "idx" / "encode_config.json").read_text())
    assert "windows" not in config  # folders written before windows existed still resume


def test_a_rerun_with_other_window_settings_is_refused_and_a_same_one_is_a_no_op(tiny_bert_dir, tmp_path):
    corpus = _corpus(tmp_path / "corpus.jsonl")
    out = tmp_path / "idx"
    meta = _index(corpus, tiny_bert_dir, out, windows=16, window_stride=40)
    before = (out / "windows" / "shards" / "shard_00000.emb.npy").stat().st_mtime_ns
    again = _index(corpus, tiny_bert_dir, out, windows=16, window_stride=40)
    assert again.windows == meta.windows
    assert (out / "windows" / "shards" / "shard_00000.emb.npy").stat().st_mtime_ns == before
    with pytest.raises(UsageError, match="--windows"):
        _index(corpus, tiny_bert_dir, out, windows=4, window_stride=40)


def test_killed_before_the_windows_were_recorded_the_rerun_records_them(tiny_bert_dir, tmp_path):
    """Every window shard is gathered, the windows' manifest and their record in index.json are not: the rerun
    encodes nothing, writes them, and the result equals an uninterrupted build (a kill mid-parts or mid-gather:
    test_windows_encoded_in_parts.py)."""
    corpus = _corpus(tmp_path / "corpus.jsonl")
    whole = _index(corpus, tiny_bert_dir, tmp_path / "whole", windows=16, window_stride=40)
    out = tmp_path / "idx"
    _index(corpus, tiny_bert_dir, out, windows=16, window_stride=40)
    meta = IndexMeta.load(out)
    meta.windows = {}
    meta.save(out)                                          # as if killed before the windows were recorded
    (out / "windows" / "index.json").unlink()
    resumed = _index(corpus, tiny_bert_dir, out, windows=16, window_stride=40)
    assert resumed.windows == whole.windows
    for f in sorted((tmp_path / "whole" / "windows").rglob("*.npy")):
        g = out / "windows" / f.relative_to(tmp_path / "whole" / "windows")
        assert np.array_equal(np.load(f), np.load(g)), f.name


def test_dense_search_finds_a_document_by_a_window_far_into_it(tmp_path):
    """With the bundled MiniLM: the needle sits ~1,500 tokens into "deep"; first windows only, it is not found
    at rank 1; with the windows it is, and its score is its best window's."""
    from hopscotch.retriever.searchers.dense import DenseSearcher

    corpus = _corpus(tmp_path / "corpus.jsonl")
    out = tmp_path / "idx"
    _index(corpus, "minilm", out, windows=64, window_stride=48)
    query = ["where do zebras graze near the lighthouse"]
    first = DenseSearcher(out, first_windows_only=True).search_batch(query, k=4)[0]
    best = DenseSearcher(out).search_batch(query, k=4)[0]
    assert [d for d, _ in first].index("deep") > 0
    assert {d for d, _ in best[:2]} == {"deep", "shallow"}
    assert len(best) == 4 and len({d for d, _ in best}) == 4   # documents, each once
    assert all(not d.endswith(("#w1", "#w2")) or d == "other#w1" for d, _ in best)
    deep = dict(best)["deep"]
    assert deep > dict(first)["deep"]


def test_the_model_records_the_windows_the_index_uses_by_default(tiny_bert_dir, tmp_path):
    import shutil

    from hopscotch.retriever.model.config import HOPSCOTCH_CONFIG, EncoderConfig, model_settings

    model = tmp_path / "model"
    shutil.copytree(tiny_bert_dir, model)
    config = {k: v for k, v in vars(EncoderConfig(passage_max_len=64, passage_windows=8, window_stride=32)).items()}
    (model / HOPSCOTCH_CONFIG).write_text(json.dumps(config))
    assert (model_settings(model).passage_windows, model_settings(model).window_stride) == (8, 32)
    meta = _index(_corpus(tmp_path / "corpus.jsonl"), model, tmp_path / "idx")
    assert (meta.windows["max_windows"], meta.windows["stride"]) == (8, 32)
    meta_off = _index(_corpus(tmp_path / "corpus2.jsonl"), model, tmp_path / "idx_off", windows=1)
    assert meta_off.windows == {}
    with pytest.raises(UsageError, match="model.passage_windows"):
        EncoderConfig(passage_windows=0)


def test_index_and_search_cli_with_windows(tiny_bert_dir, tmp_path, capsys):
    from hopscotch.retriever.cli import main

    corpus = _corpus(tmp_path / "corpus.jsonl")
    queries = tmp_path / "q.jsonl"
    queries.write_text(json.dumps({"_id": "q1", "text": "zebras lighthouse"}) + "\n")
    assert main(["index", "--corpus", str(corpus), "--model", str(tiny_bert_dir), "--out", str(tmp_path / "idx"),
                 "--max-length", "64", "--windows", "16", "--window-stride", "40", "--spec", "HNSW8"]) == 0
    err = capsys.readouterr()
    assert "passage windows" in err.out
    wmeta = IndexMeta.load(tmp_path / "idx" / "windows")
    assert wmeta.faiss.get("default")  # the windows get the same FAISS spec as the documents
    for extra in ([], ["--first-windows-only"]):
        run = tmp_path / f"run{len(extra)}.trec"
        assert main(["search", "--index", str(tmp_path / "idx"), "--queries", str(queries), "--k", "4",
                     "--out", str(run), *extra]) == 0
        docids = [line.split()[2] for line in run.read_text().splitlines()]
        assert sorted(docids) == sorted(["short", "deep", "shallow", "other#w1"])


def test_every_window_is_a_full_budget_the_last_one_ending_at_the_text_end(tiny_bert_dir):
    """No short scrap at the end: a document a few tokens over one window gets one window shifted to its end."""
    tok = _tokenizer(tiny_bert_dir)
    view = TailWindows(tok, WindowSpec(100, 40, 64))
    budget = 64 - 2
    for words in (55, 70, 150, 400):
        text = " ".join(f"w{i}" for i in range(words))
        n = len(tok(text, add_special_tokens=False)["input_ids"])
        windows = view(Document("d", "", text))
        if n <= budget:
            assert windows == []
            continue
        assert windows and text.endswith(windows[-1].text)
        # each window is the budget's tokens of the whole text (a slice re-tokenized can differ by a piece or two
        # where it starts inside a word)
        assert all(budget - 3 <= len(tok(w.text, add_special_tokens=False)["input_ids"]) <= budget for w in windows)


def test_search_windows_stops_when_fewer_documents_have_windows_than_k():
    calls = []

    def search(q, depth):
        calls.append(depth)
        rows = np.arange(min(depth, 6))[None, :].repeat(len(q), 0)
        return np.ones_like(rows, dtype=np.float32), rows

    hits = search_windows(search, lambda r: window_docid(f"d{r % 2}", r), 6, np.zeros((2, 4), np.float32), k=10)
    assert calls == [6] and [len(h) for h in hits] == [6, 6]  # every window once, then done
