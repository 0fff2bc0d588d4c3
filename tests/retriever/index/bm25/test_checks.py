"""A damaged BM25 index folder of either backend is refused on open with one line naming the file
(hopscotch.retriever.index.bm25.checks and .manifest): nothing unchecked reaches the numba kernel, and ``search`` and
``serve`` exit 2 with that line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.index.bm25 import BM25Index, load_bm25_index
from hopscotch.retriever.index.bm25.disk_build import DiskBuildOptions, build_disk_index
from hopscotch.retriever.io.corpus import read_corpus


@pytest.fixture(scope="module")
def built(small_world, tmp_path_factory):
    root = tmp_path_factory.mktemp("bm25_checks")
    docs = list(read_corpus(small_world / "corpus.jsonl"))
    BM25Index.build(docs, show_progress=False).save(root / "bm25s")
    build_disk_index(docs, root / "disk", "fp", DiskBuildOptions(block=4, show_progress=False), log=lambda _: None)
    return root


def _copy(built, backend, tmp_path) -> Path:
    out = tmp_path / backend
    shutil.copytree(built / backend, out)
    return out


def _meta(folder: Path, **changes) -> None:
    path = folder / "hopscotch_bm25.json"
    meta = json.loads(path.read_text())
    for key, value in changes.items():
        if value is _DROP:
            meta.pop(key, None)
        else:
            meta[key] = value
    path.write_text(json.dumps(meta))


_DROP = object()


def _array(folder: Path, name: str, change) -> None:
    path = folder / name
    a = np.load(path)
    np.save(path, change(a.copy()))


def _swap_within_a_term(folder: Path) -> None:
    indptr = np.load(folder / "postings.indptr.npy")
    t = int(np.flatnonzero(np.diff(indptr) >= 3)[0])

    def swap(rows):
        a = int(indptr[t])
        rows[a], rows[a + 1] = rows[a + 1], rows[a]
        return rows

    _array(folder, "postings.rows.npy", swap)


def _truncate(path: Path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:int(len(data) * keep)])


def _folder_for_file(path: Path) -> None:
    path.unlink()
    path.mkdir()


def _garbage_terms(folder: Path) -> None:
    lines = (folder / "terms.txt").read_bytes().split(b"\n")
    (folder / "terms.txt").write_bytes(b"\n".join(b"q" * len(line) for line in lines))


DISK_DAMAGE = {
    "scaled pointers": (lambda f: _array(f, "postings.indptr.npy", lambda a: a * 3), "postings.indptr.npy"),
    "reversed pointers": (lambda f: _array(f, "postings.indptr.npy", lambda a: a[::-1]), "postings.indptr.npy"),
    "falling pointers": (lambda f: _array(f, "postings.indptr.npy", lambda a: np.where(np.arange(len(a)) == 3, a[-2], a)),
                         "postings.indptr.npy"),
    "block pointers out of range": (lambda f: _array(f, "blocks.ptr.npy", lambda a: a + np.arange(len(a)) * 1000),
                                    "blocks.ptr.npy"),
    "block pointers shifted": (lambda f: _array(f, "blocks.ptr.npy", lambda a: np.r_[a[:1], a[1:] + 1]),
                               "blocks.ptr.npy"),
    "truncated terms": (lambda f: _truncate(f / "terms.txt"), "terms.offsets"),
    "garbage vocabulary": (_garbage_terms, "terms.txt"),
    "older layout (no block)": (lambda f: _meta(f, block=_DROP), "hopscotch_bm25.json"),
    "newer layout": (lambda f: _meta(f, layout=2), "hopscotch_bm25.json"),
    "names the other backend": (lambda f: _meta(f, backend="bm25s"), "hopscotch_bm25.json"),
    "unknown backend": (lambda f: _meta(f, backend="lucene"), "hopscotch_bm25.json"),
    "block 0": (lambda f: _meta(f, block=0), "hopscotch_bm25.json"),
    "block a string": (lambda f: _meta(f, block="64"), "hopscotch_bm25.json"),
    "unknown stemmer": (lambda f: _meta(f, stemmer="klingon"), "hopscotch_bm25.json"),
    "k1 not a number": (lambda f: _meta(f, k1="1.5"), "hopscotch_bm25.json"),
    "more documents claimed": (lambda f: _meta(f, num_docs=10_000), "doclens.npy"),
    "manifest not JSON": (lambda f: (f / "hopscotch_bm25.json").write_text("{"), "hopscotch_bm25.json"),
    "manifest a list": (lambda f: (f / "hopscotch_bm25.json").write_text("[]"), "hopscotch_bm25.json"),
    "manifest a folder": (lambda f: _folder_for_file(f / "hopscotch_bm25.json"), "hopscotch_bm25.json"),
    "rows a folder": (lambda f: _folder_for_file(f / "postings.rows.npy"), "postings.rows.npy"),
    "docids a folder": (lambda f: _folder_for_file(f / "docids.txt"), "docids.txt"),
    "truncated impacts": (lambda f: _truncate(f / "postings.impacts.npy"), "postings.impacts.npy"),
    "truncated rows": (lambda f: _truncate(f / "postings.rows.npy", 0.9), "postings.rows.npy"),
    "missing rows": (lambda f: (f / "postings.rows.npy").unlink(), "postings.rows.npy"),
    "short docid list": (lambda f: (f / "docids.txt").write_text(
        "".join((f / "docids.txt").read_text().splitlines(keepends=True)[:-1])), "docids.offsets"),
    "short lookup": (lambda f: _array(f, "lookup_rows.npy", lambda a: a[:-1]), "lookup_rows.npy"),
    "lookup rows out of range": (lambda f: _array(f, "lookup_rows.npy", lambda a: a + 5), "lookup_rows.npy"),
    "rows out of range": (lambda f: _array(f, "postings.rows.npy", lambda a: np.where(np.arange(len(a)) == 7, 99_999, a)
                                           .astype(np.uint32)), "postings.rows.npy"),
    "rows of another dtype": (lambda f: _array(f, "postings.rows.npy", lambda a: a.astype(np.int64)),
                              "postings.rows.npy"),
    "rows not ascending": (_swap_within_a_term, "postings.rows.npy"),
    "impacts NaN": (lambda f: _array(f, "postings.impacts.npy", lambda a: np.where(np.arange(len(a)) == 9, np.nan, a)
                                     .astype(np.float32)), "postings.impacts.npy"),
    "impacts scaled": (lambda f: _array(f, "postings.impacts.npy", lambda a: a * 2), "blocks.max.npy"),
    "impacts zeroed": (lambda f: [_array(f, n, lambda a: a * 0) for n in ("postings.impacts.npy", "blocks.max.npy",
                                                                          "terms.max.npy")], "postings.impacts.npy"),
    "stemmer 'none'": (lambda f: _meta(f, stemmer="none"), "hopscotch_bm25.json"),
    "hashes unsorted": (lambda f: _array(f, "terms.hashes.npy", lambda a: a[::-1]), "terms.hashes.npy"),
    "a pickle": (lambda f: np.save(f / "doclens.npy", np.array([object()] * 3), allow_pickle=True), "doclens.npy"),
}

BM25S_DAMAGE = {
    "names the other backend": (lambda f: _meta(f, backend="disk"), "hopscotch_bm25.json"),
    "older layout (no num_docs)": (lambda f: _meta(f, num_docs=_DROP), "hopscotch_bm25.json"),
    "unknown stopwords": (lambda f: _meta(f, stopwords="elvish"), "hopscotch_bm25.json"),
    "garbage vocabulary": (lambda f: (f / "vocab.index.json").write_text("{garbage"), "vocab.index.json"),
    "vocabulary ids repeated": (lambda f: (f / "vocab.index.json").write_text(json.dumps(
        {k: 0 for k in json.loads((f / "vocab.index.json").read_text())})), "vocab.index.json"),
    "vocabulary a list": (lambda f: (f / "vocab.index.json").write_text("[1, 2]"), "vocab.index.json"),
    "params unknown key": (lambda f: (f / "params.index.json").write_text(json.dumps(
        {**json.loads((f / "params.index.json").read_text()), "speed": 9})), "params.index.json"),
    "params k1 a string": (lambda f: (f / "params.index.json").write_text(json.dumps(
        {**json.loads((f / "params.index.json").read_text()), "k1": "1.5"})), "params.index.json"),
    "params num_docs differ": (lambda f: (f / "params.index.json").write_text(json.dumps(
        {**json.loads((f / "params.index.json").read_text()), "num_docs": 7})), "params.index.json"),
    "short docid list": (lambda f: (f / "docids.txt").write_text(
        "".join((f / "docids.txt").read_text().splitlines(keepends=True)[:-1])), "docids.txt"),
    "docids a folder": (lambda f: _folder_for_file(f / "docids.txt"), "docids.txt"),
    "data a folder": (lambda f: _folder_for_file(f / "data.csc.index.npy"), "data.csc.index.npy"),
    "truncated data": (lambda f: _truncate(f / "data.csc.index.npy"), "data.csc.index.npy"),
    "scaled pointers": (lambda f: _array(f, "indptr.csc.index.npy", lambda a: a * 2), "indptr.csc.index.npy"),
    "reversed pointers": (lambda f: _array(f, "indptr.csc.index.npy", lambda a: a[::-1]), "indptr.csc.index.npy"),
    "rows out of range": (lambda f: _array(f, "indices.csc.index.npy", lambda a: a + 1000), "indices.csc.index.npy"),
    "rows of another dtype": (lambda f: _array(f, "indices.csc.index.npy", lambda a: a.astype(np.int64)),
                              "indices.csc.index.npy"),
    "scores infinite": (lambda f: _array(f, "data.csc.index.npy", lambda a: a / np.float32(0)), "data.csc.index.npy"),
}


def _refused(folder: Path, name: str) -> str:
    with pytest.raises(UsageError) as caught:
        index = load_bm25_index(folder)
        index.search(["river empire ancient"], k=5)
    message = str(caught.value)
    assert "\n" not in message and name in message and "hopscotch bm25-index" in message, message
    return message


CASES = [("disk", case) for case in sorted(DISK_DAMAGE)] + [("bm25s", case) for case in sorted(BM25S_DAMAGE)]


@pytest.mark.parametrize(("backend", "case"), CASES, ids=[f"{b}: {c}" for b, c in CASES])
def test_a_damaged_folder_is_refused_naming_the_file(built, tmp_path, backend, case):
    damage, name = (DISK_DAMAGE if backend == "disk" else BM25S_DAMAGE)[case]
    folder = _copy(built, backend, tmp_path)
    damage(folder)
    _refused(folder, name)


def test_the_undamaged_folders_open_and_agree(built):
    disk, mem = load_bm25_index(built / "disk"), load_bm25_index(built / "bm25s")
    a, b = disk.search(["river empire ancient"], k=5), mem.search(["river empire ancient"], k=5)
    assert [round(s, 4) for _, s in a[0]] == [round(s, 4) for _, s in b[0]] and a[0]


@pytest.mark.parametrize("damage", ["rows not ascending", "rows out of range"])
def test_postings_the_open_check_did_not_sample_are_guarded_where_read(built, tmp_path, monkeypatch, damage):
    """On a large index only some terms' postings are read on open: a damaged row elsewhere is refused where a query
    reads it (the kernel stops on a row that does not ascend; a row past the documents is refused), never a crash."""
    from hopscotch.retriever.index.bm25 import checks

    folder = _copy(built, "disk", tmp_path)
    monkeypatch.setattr(checks, "FULL_POSTINGS", 0)
    monkeypatch.setattr(checks, "POSTING_TERMS", 1)  # the first term only
    indptr = np.load(folder / "postings.indptr.npy")
    terms = [line for line in (folder / "terms.txt").read_text().splitlines()]
    df = np.diff(indptr)
    t = int(np.flatnonzero(df >= 3)[-1])
    a = int(indptr[t])
    if damage == "rows not ascending":
        _array(folder, "postings.rows.npy", lambda r: np.r_[r[:a], r[a + 2:a + 3], r[a + 1:a + 2], r[a:a + 1],
                                                            r[a + 3:]].astype(np.uint32))
    else:
        _array(folder, "postings.rows.npy", lambda r: np.where(np.arange(len(r)) == a + 1, 10**6, r).astype(np.uint32))
    index = load_bm25_index(folder)  # the damaged term was not sampled
    with pytest.raises(UsageError, match="postings.rows.npy"):
        index.search([terms[t]], k=3)
    with pytest.raises(UsageError, match="postings.rows.npy") if damage == "rows out of range" else _nothing():
        index.corpus_scores(terms[t])


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.mark.parametrize("command", ["search", "serve"])
@pytest.mark.parametrize("backend", ["disk", "bm25s"])
def test_search_and_serve_refuse_a_damaged_folder_in_one_line(built, small_world, tmp_path, cli, command, backend):
    folder = _copy(built, backend, tmp_path)
    if backend == "disk":
        _array(folder, "postings.indptr.npy", lambda a: a * 3)
    else:
        (folder / "vocab.index.json").write_text("{garbage")
    if command == "search":
        code, _, err = cli("search", "--queries", small_world / "queries.jsonl", "--bm25", folder, "--out",
                           tmp_path / "run.trec")
    else:
        code, _, err = cli("serve", "--bm25-index", folder, "--corpus", small_world / "corpus.jsonl", "--port", "0")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert ("postings.indptr.npy" if backend == "disk" else "vocab.index.json") in err
    assert not (tmp_path / "run.trec").exists()
