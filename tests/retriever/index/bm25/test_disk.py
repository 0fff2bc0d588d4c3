"""The disk BM25 backend (hopscotch.retriever.index.bm25: disk, disk_build, disk_merge, kernel, analyzer,
docids): the same terms and scores as bm25s, an exact top k (against brute force, ties included), weighted queries,
and a streaming build that resumes after a kill at any step."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from hopscotch.retriever.index.bm25 import BM25Index, load_bm25_index
from hopscotch.retriever.index.bm25.disk import DiskBM25Index
from hopscotch.retriever.index.bm25.disk_build import DiskBuildOptions, build_disk_index, partial_folder
from hopscotch.retriever.io.corpus import Document, read_corpus

TRICKY = ["İsmail Km² Алекса́ндр Ке́ренский", "state\u200d \u200cthe foo_bar C++ don't", "", "the of and",
          "Gummo GUMMO gummo's directors directed 1997"]


def _docs(small_world) -> list[Document]:
    docs = list(read_corpus(small_world / "corpus.jsonl"))
    return docs + [Document(f"tricky{i}", "", text) for i, text in enumerate(TRICKY)]


@pytest.fixture(scope="module")
def backends(small_world, tmp_path_factory):
    """The small world (plus tricky texts, an empty and an all-stopword document) in both backends; the disk one
    built in runs of 50 documents and merge ranges of 2,000 postings, so every stage has several steps."""
    root = tmp_path_factory.mktemp("bm25_disk")
    docs = _docs(small_world)
    BM25Index.build(docs, show_progress=False).save(root / "bm25s")
    build_disk_index(docs, root / "disk", "fp", DiskBuildOptions(batch_docs=50, merge_postings=2_000, block=4,
                                                                 show_progress=False), log=lambda _: None)
    queries = [q for q in (json.loads(line)["text"] for line in
                           (small_world / "queries.jsonl").read_text().splitlines())]
    return {"root": root, "docs": docs, "bm25s": load_bm25_index(root / "bm25s"),
            "disk": load_bm25_index(root / "disk"), "queries": queries + TRICKY + ["zzzunknownzzz", "the the the"]}


def _close(a, b):
    """Same scores in the same order (ties may hold other docids), and the same docids above the cut-off score."""
    assert [round(s, 4) for _, s in a] == [round(s, 4) for _, s in b]
    if a:
        cut = a[-1][1]
        assert {d for d, s in a if s > cut + 1e-4} == {d for d, s in b if s > cut + 1e-4}


def test_the_analyzer_is_bm25s_tokenizer_term_for_term(small_world):
    import bm25s
    import Stemmer

    from hopscotch.retriever.index.bm25.analyzer import Analyzer
    from hopscotch.retriever.model.query_template import format_document

    texts = [format_document(d.title, d.text) for d in _docs(small_world)]
    theirs = bm25s.tokenize(texts, stopwords="en", stemmer=Stemmer.Stemmer("english"), return_ids=False,
                            show_progress=False)
    analyzer = Analyzer("english", "en")
    assert [analyzer.terms(t) for t in texts] == [list(t) for t in theirs]
    plain = bm25s.tokenize(texts, stopwords=[], stemmer=None, return_ids=False, show_progress=False)
    assert [Analyzer(None, None).terms(t) for t in texts] == [list(t) for t in plain]


def test_the_backend_is_read_from_the_folder(backends):
    assert isinstance(backends["disk"], DiskBM25Index) and isinstance(backends["bm25s"], BM25Index)
    assert len(backends["disk"].docids) == len(backends["bm25s"].docids) == len(backends["docs"])
    assert list(backends["disk"].docids) == backends["bm25s"].docids
    meta = json.loads((backends["root"] / "disk" / "hopscotch_bm25.json").read_text())
    assert meta["backend"] == "disk" and meta["k1"] == 1.5 and meta["num_docs"] == len(backends["docs"])
    assert not partial_folder(backends["root"] / "disk").exists()


@pytest.mark.parametrize("k", [1, 10, 100, 10_000])
def test_top_k_scores_equal_bm25s(backends, k):
    disk, ref = backends["disk"].search(backends["queries"], k=k), backends["bm25s"].search(backends["queries"], k=k)
    for a, b in zip(disk, ref):
        _close(a, b)
    assert disk[-2] == ref[-2] == [] and disk[-1] == ref[-1] == []  # unknown terms only; stopwords only
    assert backends["disk"].search(backends["queries"], k=k, threads=3) == disk  # threads change nothing


def test_weighted_queries_and_document_scores_equal_bm25s(backends):
    disk, ref = backends["disk"], backends["bm25s"]
    parts = [[(q, 7.0), ("ancient river empire", 0.5)] for q in backends["queries"][:20]] + [[("zzz", 1.0)], []]
    for a, b in zip(disk.search_weighted(parts, k=25), ref.search_weighted(parts, k=25)):
        _close(a, b)
    some = [d.docid for d in backends["docs"][::7]] + ["not-a-doc"]
    for q in backends["queries"][:10]:
        np.testing.assert_allclose(disk.score_documents(q, some), ref.score_documents(q, some), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(disk.corpus_scores(q), ref.corpus_scores(q), rtol=1e-5, atol=1e-6)
    assert disk.corpus_scores("zzzunknownzzz") is None and disk.row("not-a-doc") is None
    assert disk.row(backends["docs"][5].docid) == 5


def test_other_k1_and_b_score_as_bm25s_does(small_world, tmp_path):
    docs = _docs(small_world)
    BM25Index.build(docs, k1=0.9, b=0.4, show_progress=False).save(tmp_path / "s")
    build_disk_index(docs, tmp_path / "d", "fp", DiskBuildOptions(k1=0.9, b=0.4, show_progress=False),
                     log=lambda _: None)
    queries = [d.text[:60] for d in docs[:15]]
    for a, b in zip(load_bm25_index(tmp_path / "d").search(queries, k=20),
                    load_bm25_index(tmp_path / "s").search(queries, k=20)):
        _close(a, b)


def test_the_kernel_is_exact_against_brute_force_ties_included():
    """Integer impacts make every sum exact, so the top k must equal brute force's (score desc, row asc) exactly,
    across windows smaller than the corpus and blocks smaller than the lists."""
    from hopscotch.retriever.index.bm25.kernel import block_maxima, top_k

    rng = np.random.default_rng(3)
    n_docs, n_terms = 3_000, 12
    lists = [np.sort(rng.choice(n_docs, size=int(rng.integers(1, 1_500)), replace=False)) for _ in range(n_terms)]
    indptr = np.concatenate([[0], np.cumsum([len(x) for x in lists])]).astype(np.int64)
    rows = np.concatenate(lists).astype(np.uint32)
    impacts = rng.integers(1, 6, size=len(rows)).astype(np.float32)
    bptr, bmax = block_maxima(indptr, impacts, 8)
    for trial in range(30):
        terms = rng.choice(n_terms, size=int(rng.integers(1, 7)), replace=False)
        weights = rng.integers(1, 4, size=len(terms)).astype(np.float64)
        dense = np.zeros(n_docs)
        for t, w in zip(terms, weights):
            dense[rows[indptr[t]:indptr[t + 1]]] += w * impacts[indptr[t]:indptr[t + 1]]
        k = int(rng.choice([1, 5, 50, 4_000]))
        hit = np.flatnonzero(dense > 0)
        want = hit[np.lexsort((hit, -dense[hit]))][:k]
        out_rows, out_scores = np.zeros(k, np.int64), np.zeros(k)
        n = top_k(rows, impacts, bmax, 8, indptr[terms], indptr[terms + 1], bptr[terms], weights, k,
                  int(rng.choice([64, 256, 4096])), out_rows, out_scores)
        assert list(out_rows[:n]) == list(want), trial
        np.testing.assert_array_equal(out_scores[:n], dense[want])


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.name != "hopscotch_bm25.json"}


class Killed(Exception):
    pass


def test_a_build_killed_after_a_run_resumes_and_ends_byte_identical(small_world, tmp_path):
    docs, opts = _docs(small_world), DiskBuildOptions(batch_docs=40, merge_postings=3_000, show_progress=False)
    build_disk_index(docs, tmp_path / "fresh", "fp", opts, log=lambda _: None)
    commits = []

    def kill_after_second(rows):
        commits.append(rows)
        if len(commits) == 2:
            raise Killed

    with pytest.raises(Killed):
        build_disk_index(docs, tmp_path / "out", "fp", opts, log=lambda _: None, on_commit=kill_after_second)
    assert not (tmp_path / "out").exists() and partial_folder(tmp_path / "out").is_dir()
    logs, seen = [], []
    build_disk_index(iter(docs), tmp_path / "out", "fp", opts, log=logs.append, on_commit=seen.append)
    assert any("resuming" in line and "80 documents" in line for line in logs)
    assert seen[0] == 120  # the two finished runs were kept: reading went on after their 80 documents
    assert _files(tmp_path / "out") == _files(tmp_path / "fresh")


def test_a_merge_killed_between_ranges_resumes_at_the_next(small_world, tmp_path, monkeypatch):
    import hopscotch.retriever.index.bm25.disk_merge as merge

    docs, opts = _docs(small_world), DiskBuildOptions(batch_docs=60, merge_postings=1_500, show_progress=False)
    build_disk_index(docs, tmp_path / "fresh", "fp", opts, log=lambda _: None)
    real, calls = merge.merge_range, []

    def dies_on_the_third(*args, **kw):
        calls.append(1)
        if len(calls) == 3:
            raise Killed
        return real(*args, **kw)

    monkeypatch.setattr(merge, "merge_range", dies_on_the_third)
    with pytest.raises(Killed):
        build_disk_index(docs, tmp_path / "out", "fp", opts, log=lambda _: None)
    monkeypatch.setattr(merge, "merge_range", real)
    logs = []
    build_disk_index(docs, tmp_path / "out", "fp", opts, log=logs.append)
    assert any("resuming the merge at range 3" in line for line in logs)
    assert _files(tmp_path / "out") == _files(tmp_path / "fresh")


def test_another_fingerprint_starts_the_partial_build_afresh(small_world, tmp_path):
    docs, opts = _docs(small_world), DiskBuildOptions(batch_docs=40, show_progress=False)

    def kill(rows):
        raise Killed

    with pytest.raises(Killed):
        build_disk_index(docs, tmp_path / "out", "one", opts, log=lambda _: None, on_commit=kill)
    logs = []
    meta = build_disk_index(docs[:100], tmp_path / "out", "two", opts, log=logs.append)
    assert any("starting again" in line for line in logs) and meta["num_docs"] == 100


def test_a_repeated_docid_is_refused(small_world, tmp_path):
    from hopscotch.retriever.errors import FormatError

    docs = _docs(small_world)
    with pytest.raises(FormatError, match=f"{docs[3].docid!r} is document 4 and {len(docs) + 1:,}"):
        build_disk_index(docs + [docs[3]], tmp_path / "out", "fp", DiskBuildOptions(show_progress=False),
                         log=lambda _: None)
    assert not (tmp_path / "out").exists() and not partial_folder(tmp_path / "out").exists()


@pytest.mark.parametrize("batch_docs", [1000, 100], ids=["in-one-batch", "across-batches"])
def test_a_repeated_docid_is_refused_at_its_file_and_line_before_any_merge(small_world, tmp_path, monkeypatch,
                                                                           batch_docs):
    """Inside a batch it is refused before the batch is analysed; across batches once the runs are written, before
    the merge; either way at the file and line of both, and the refused build leaves nothing behind."""
    from hopscotch.retriever.errors import FormatError
    from hopscotch.retriever.index.bm25 import disk_merge

    lines = (small_world / "corpus.jsonl").read_text().splitlines(keepends=True)
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(lines + [lines[2]]))
    merged = []
    monkeypatch.setattr(disk_merge, "merge_range", lambda *a, **k: merged.append(1))
    analysed = []
    if batch_docs > len(lines):
        from hopscotch.retriever.index.bm25 import disk_build

        monkeypatch.setattr(disk_build, "_analyze", lambda *a: analysed.append(1))
    with pytest.raises(FormatError) as caught:
        build_disk_index(read_corpus(corpus, unique=False), tmp_path / "out", "fp",
                         DiskBuildOptions(batch_docs=batch_docs, show_progress=False), corpus_name=str(corpus),
                         log=lambda _: None)
    assert str(caught.value).startswith(f"{corpus}:{len(lines) + 1}: expected unique document ids (")
    assert "is already at line 3)" in str(caught.value)
    assert not merged and not analysed
    assert not (tmp_path / "out").exists() and not partial_folder(tmp_path / "out").exists()


def test_a_stale_partial_that_is_a_file_is_one_line(small_world, tmp_path, cli):
    partial_folder(tmp_path / "out").write_text("not a folder")
    code, _, err = cli("bm25-index", "--corpus", small_world / "corpus.jsonl", "--out", tmp_path / "out", "--backend",
                       "disk")
    assert code == 2 and err.count("\n") == 1 and "a file where the build keeps its work folder" in err, err
    assert partial_folder(tmp_path / "out").read_text() == "not a folder"  # not ours to remove


_CHILD = """
import sys, threading
from pathlib import Path
from hopscotch.retriever.index.bm25.disk_build import DiskBuildOptions, build_disk_index
from hopscotch.retriever.io.corpus import read_corpus
marker = Path(sys.argv[3])
def commit(rows):
    if rows >= 60:
        marker.write_text(str(rows))
        threading.Event().wait()  # hold here until killed
build_disk_index(read_corpus(sys.argv[1]), sys.argv[2], "fp", DiskBuildOptions(batch_docs=30, show_progress=False),
                 log=lambda _: None, on_commit=commit)
"""


def test_a_build_sigkilled_midway_resumes_in_another_process(small_world, tmp_path):
    corpus, out, marker = small_world / "corpus.jsonl", tmp_path / "out", tmp_path / "committed"
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(corpus), str(out), str(marker)])
    try:
        for _ in range(6000):  # wait for the event (the child's second run is on disk), not for a duration
            if marker.exists() or child.poll() is not None:
                break
            time.sleep(0.05)
        assert marker.exists(), "the child never committed its second run"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    opts = DiskBuildOptions(batch_docs=30, show_progress=False)
    logs = []
    build_disk_index(read_corpus(corpus), out, "fp", opts, log=logs.append)
    assert any("resuming" in line for line in logs)
    build_disk_index(read_corpus(corpus), tmp_path / "fresh", "fp", opts, log=lambda _: None)
    assert _files(out) == _files(tmp_path / "fresh")


def test_a_disk_folder_records_its_stopwords_and_searches_without_importing_bm25s(backends):
    meta = json.loads((backends["root"] / "disk" / "hopscotch_bm25.json").read_text())
    from hopscotch.retriever.index.bm25.analyzer import stopword_list

    assert meta["analyzer"]["stopword_list"] == sorted(set(stopword_list("en")))
    code = ("import sys; from hopscotch.retriever.index.bm25 import load_bm25_index; "
            f"hits = load_bm25_index({str(backends['root'] / 'disk')!r}).search(['who directed Gummo'], k=3); "
            "assert hits[0], hits; assert 'bm25s' not in sys.modules, 'bm25s imported'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
