"""Every audit's outputs go through the one output guard (issue 36, mechanism 1): ``--report`` / ``--out`` /
``--state`` onto an input is refused for every audit, ``--fresh`` never empties a folder the audit did not make,
and a rerun with other settings does not replace the earlier run's output without ``--overwrite``."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from hopscotch.retriever.commands.audit import audit_modules


def _digest(path: Path) -> str:
    if path.is_file():
        return hashlib.sha256(path.read_bytes()).hexdigest()
    return hashlib.sha256(b"".join(p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file())).hexdigest()


@pytest.fixture
def files(tmp_path):
    """Inputs of every audit kind (their content does not matter: the guard refuses before anything is read)."""
    corpus = tmp_path / "beir"
    corpus.mkdir()
    (corpus / "corpus.jsonl").write_text(json.dumps({"_id": "d1", "title": "", "text": "a harbour city"}) + "\n")
    (corpus / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    (corpus / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "harbour"}) + "\n")
    tuples = tmp_path / "tuples.jsonl"
    tuples.write_text(json.dumps({"query_id": "q1", "query": "harbour", "positive_passages": [],
                                  "negative_passages": []}) + "\n")
    model, index, bm25 = tmp_path / "model", tmp_path / "index", tmp_path / "bm25"
    for folder in (model, index, bm25):
        folder.mkdir()
        (folder / "config.json").write_text("{}")
    return {"corpus": corpus, "tuples": tuples, "model": model, "index": index, "bm25": bm25,
            "queries": corpus / "queries.jsonl", "qrels": corpus / "qrels.tsv"}


#: per audit kind: its flags, and the outputs aimed at an input (each must be refused)
CASES = {
    "contamination": (lambda f: ["--tuples", f["tuples"], "--eval", f"dev={f['corpus']}"],
                      lambda f: [["--report", f["tuples"]], ["--report", f["corpus"] / "qrels.tsv"]]),
    "false-negatives": (lambda f: ["--tuples", f["tuples"], "--model", "none"],
                        lambda f: [["--report", f["tuples"]]]),
    "near-duplicates": (lambda f: ["--corpus", f["corpus"] / "corpus.jsonl"],
                        lambda f: [["--out", f["tmp"] / "g.jsonl", "--report", f["corpus"] / "corpus.jsonl"],
                                   ["--out", f["corpus"] / "corpus.jsonl"],
                                   ["--out", f["tmp"] / "g.jsonl", "--state", f["corpus"]],
                                   ["--out", f["tmp"] / "g.jsonl", "--state", f["corpus"], "--fresh"]]),
    "ann-fidelity": (lambda f: ["--index", f["index"], "--queries", f["queries"]],
                     lambda f: [["--report", f["queries"]], ["--report", f["index"] / "config.json"]]),
    "model": (lambda f: [f["model"]], lambda f: [["--report", f["model"] / "config.json"],
                                                 ["--report", f["model"] / "report.json"]]),
    "perturbation": (lambda f: ["--queries", f["queries"], "--qrels", f["qrels"], "--bm25", f["bm25"]],
                     lambda f: [["--report", f["qrels"]], ["--report", f["bm25"] / "new.json"]]),
}


def test_every_audit_kind_is_covered():
    assert {m.replace("_", "-") for m in audit_modules()} == set(CASES)


@pytest.mark.parametrize("kind", sorted(CASES))
def test_an_output_onto_an_input_is_refused(kind, files, tmp_path, cli):
    files["tmp"] = tmp_path
    flags, bad = CASES[kind]
    before = {name: _digest(p) for name, p in files.items() if isinstance(p, Path) and p.exists()}
    for outputs in bad(files):
        code, _, err = cli("audit", kind, *flags(files), *outputs)
        assert code == 2, (kind, outputs, err)
        assert "refusing to" in err and len(err.strip().splitlines()) == 1, err
    after = {name: _digest(p) for name, p in files.items() if isinstance(p, Path) and p.exists()}
    assert after == before   # no input was modified
    assert not (files["bm25"] / "new.json").exists() and not (files["model"] / "report.json").exists()


def _corpus(path: Path, n: int = 40) -> Path:
    path.write_text("".join(json.dumps({"_id": f"d{i}", "text": f"the harbour city number {i % 7} has a mill and a "
                                                                 f"port and a river {i % 5}"}) + "\n" for i in range(n)))
    return path


def test_fresh_never_empties_a_folder_the_audit_did_not_make(tmp_path, cli):
    corpus = _corpus(tmp_path / "c.jsonl")
    mine = tmp_path / "notes"
    mine.mkdir()
    (mine / "keep.txt").write_text("my notes")
    for extra in ([], ["--fresh"]):
        code, _, err = cli("audit", "near-duplicates", "--corpus", corpus, "--out", tmp_path / "g.jsonl",
                           "--state", mine, *extra)
        assert code == 2 and f"--state {mine}" in err and "refusing to" in err, err
        assert (mine / "keep.txt").read_text() == "my notes" and sorted(p.name for p in mine.iterdir()) == ["keep.txt"]
    # its own state folder: --fresh empties and redoes it
    state = tmp_path / "state"
    assert cli("audit", "near-duplicates", "--corpus", corpus, "--out", tmp_path / "g.jsonl", "--state", state)[0] == 0
    first = (tmp_path / "g.jsonl").read_bytes()
    code, _, err = cli("audit", "near-duplicates", "--corpus", corpus, "--out", tmp_path / "g.jsonl", "--state", state,
                       "--fresh")
    assert code == 0, err
    assert (tmp_path / "g.jsonl").read_bytes() == first and (state / "manifest.json").is_file()


def test_a_rerun_with_other_settings_needs_overwrite(tmp_path, cli):
    corpus = _corpus(tmp_path / "c.jsonl")
    out, report = tmp_path / "g.jsonl", tmp_path / "r.json"
    common = ["audit", "near-duplicates", "--corpus", corpus, "--out", out, "--report", report]
    assert cli(*common)[0] == 0
    assert cli(*common)[0] == 0   # the same run again: allowed (idempotent; it resumes from its state)
    saved = out.read_bytes(), report.read_bytes()
    code, _, err = cli(*common, "--threshold", "0.5", "--state", tmp_path / "other.state")
    assert code == 2 and "--overwrite" in err and len(err.strip().splitlines()) == 1, err
    assert (out.read_bytes(), report.read_bytes()) == saved
    code, _, err = cli(*common, "--threshold", "0.5", "--state", tmp_path / "other.state", "--overwrite")
    assert code == 0, err


def test_an_empty_corpus_is_not_audited_as_ok(tmp_path, cli):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    code, _, err = cli("audit", "near-duplicates", "--corpus", empty, "--out", tmp_path / "g.jsonl")
    assert code == 2 and "no documents" in err and not (tmp_path / "g.jsonl").exists()
    assert not (tmp_path / "g.jsonl.state").exists()   # bad input found by this run: nothing left behind


def test_a_rerank_cache_that_is_a_file_is_refused(tmp_path):
    from hopscotch.retriever.errors import UsageError
    from hopscotch.retriever.searchers.rerank import MultiVectorReranker

    cache = tmp_path / "cache"
    cache.write_text("not a folder")
    with pytest.raises(UsageError, match="--rerank-cache .*a file, not a folder"):
        MultiVectorReranker(tmp_path / "no-model", cache_dir=cache)
    assert cache.read_text() == "not a folder"
