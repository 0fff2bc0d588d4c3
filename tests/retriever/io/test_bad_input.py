"""Issue 14: every reader of ``retriever/io`` turns malformed input into one FormatError naming file and line.

Table-driven: the byte-level categories (non-UTF-8, UTF-16, truncated gzip, BOM, deep JSON) run against
every reader; the field-level ones (ids, numbers, grades, repeats) against the readers that hold them.
A few go through the CLI: exit 2, one stderr line naming the file, no traceback.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys

import pytest

from hopscotch.retriever.errors import FormatError, UsageError
from hopscotch.retriever.io.agent_runs import iter_run_records, read_judgements
from hopscotch.retriever.io.common import open_text
from hopscotch.retriever.io.corpus import read_corpus
from hopscotch.retriever.io.qrels import read_duplicate_groups, read_qrels
from hopscotch.retriever.io.queries import read_queries
from hopscotch.retriever.io.runs import RunWriter, read_run
from hopscotch.retriever.io.tuples import read_training_tuples

J = json.dumps


def _csv_line(i: int) -> str:
    return "query_id,judge_correct,judge_confidence" if i == 0 else f"q{i},yes,90"


# name -> (file name, the valid line i, read(path), whether lines are JSON)
READERS = {
    "corpus": ("c.jsonl", lambda i: J({"_id": f"d{i}", "text": f"text {i}"}), lambda p: list(read_corpus(p)), True),
    "queries-jsonl": ("q.jsonl", lambda i: J({"_id": f"q{i}", "text": f"query {i}"}),
                      lambda p: list(read_queries(p)), True),
    "queries-tsv": ("q.tsv", lambda i: f"q{i}\tquery {i}", lambda p: list(read_queries(p)), False),
    "qrels-trec": ("qrels.txt", lambda i: f"q{i} 0 d{i} 1", read_qrels, False),
    "qrels-beir": ("qrels.tsv", lambda i: f"q{i}\td{i}\t1", read_qrels, False),
    "qrels-jsonl": ("qrels.jsonl", lambda i: J({"query_id": f"q{i}", "doc_id": f"d{i}", "relevance": 1}),
                    read_qrels, True),
    "run": ("run.trec", lambda i: f"q{i} Q0 d{i} 1 1.5 t", read_run, False),
    "tuples": ("t.jsonl", lambda i: J({"query_id": f"q{i}", "query": "x",
                                       "positive_passages": [{"docid": f"d{i}", "text": "p"}]}),
               read_training_tuples, True),
    "agent-runs": ("runs.jsonl", lambda i: J({"query_id": f"q{i}", "status": "completed", "result": []}),
                   lambda p: list(iter_run_records(p)), True),
    "judgements-jsonl": ("j.jsonl", lambda i: J({"query_id": f"q{i}", "judge_result": {"correct": True}}),
                         read_judgements, True),
    "judgements-csv": ("j.csv", _csv_line, read_judgements, False),
    "duplicate-groups": ("g.jsonl", lambda i: J({"doc_id": f"d{i}", "exact_duplicates": [f"e{i}"]}),
                         read_duplicate_groups, True),
    "open_text": ("x.txt", lambda i: f"line {i}", lambda p: open_text(p).read(), False),
}
JSON_READERS = [name for name, spec in READERS.items() if spec[3]]


def lines(name: str, n: int) -> str:
    return "".join(READERS[name][1](i) + "\n" for i in range(n))


def refused(read, path, line: int | None, *needles: str) -> FormatError:
    """``read(path)`` raises FormatError at ``line`` whose message names the file, the line and ``needles``."""
    with pytest.raises(FormatError) as info:
        read(path)
    err, message = info.value, str(info.value)
    assert err.line == line, message
    assert (f"{path.name}:{line}" if line is not None else path.name) in message
    for needle in needles:
        assert needle in message
    return err


# -- bytes, gzip, BOM, nesting: every reader ------------------------------------------------------------
@pytest.mark.parametrize("name", READERS)
def test_a_byte_that_is_not_utf8_names_its_line(tmp_path, name):
    filename, _, read, _ = READERS[name]
    path = tmp_path / filename
    path.write_bytes(lines(name, 1).encode() + b"\xff\xfe\x00bad\n" + lines(name, 3).encode())
    refused(read, path, 2, "UTF-8", "0xff")


@pytest.mark.parametrize("name", READERS)
def test_a_utf16_file_is_refused_on_line_1(tmp_path, name):
    filename, _, read, _ = READERS[name]
    path = tmp_path / filename
    path.write_bytes(lines(name, 3).encode("utf-16"))
    refused(read, path, 1, "UTF-8", "UTF-16")


@pytest.mark.parametrize("name", READERS)
def test_a_truncated_gzip_names_the_last_good_line(tmp_path, name):
    filename, _, read, _ = READERS[name]
    data = gzip.compress(lines(name, 3000).encode())
    path = tmp_path / (filename + ".gz")
    path.write_bytes(data[: len(data) // 2])
    err = refused(read, path, _line_of(read, path), "gzip")
    assert err.line > 1 and f"last good line {err.line - 1}" in str(err)
    (tmp_path / "junk.gz").write_bytes(b"not gzip at all\n")
    refused(read, tmp_path / "junk.gz", 1, "gzip")


def _line_of(read, path) -> int | None:
    try:
        read(path)
    except FormatError as exc:
        return exc.line
    raise AssertionError(f"{path} was read")


@pytest.mark.parametrize("name", READERS)
def test_a_utf8_bom_is_dropped(tmp_path, name):
    filename, _, read, _ = READERS[name]
    plain, bom = tmp_path / filename, tmp_path / ("bom_" + filename)
    plain.write_text(lines(name, 3), encoding="utf-8")
    bom.write_bytes(b"\xef\xbb\xbf" + lines(name, 3).encode())
    got, want = read(bom), read(plain)
    if name.startswith("queries"):
        assert [q.qid for q in got] == ["q0", "q1", "q2"]
    elif name in ("agent-runs",):
        assert [r for _, r in got] == [r for _, r in want]
    elif name == "duplicate-groups":
        assert got.classes() == want.classes()
    elif name == "tuples":
        assert [t.query_id for t in got] == [t.query_id for t in want] == ["q0", "q1", "q2"]
    else:
        assert got == want


@pytest.mark.parametrize("name", JSON_READERS)
def test_json_nested_100000_deep_is_refused_with_its_line(tmp_path, name):
    filename, _, read, _ = READERS[name]
    path = tmp_path / filename
    path.write_text(lines(name, 1) + "[" * 100_000 + "]" * 100_000 + "\n")
    refused(read, path, 2, "nested too deeply")


def test_whole_file_json_readers_name_file_and_line(tmp_path):
    run = tmp_path / "run_1.json"
    run.write_text('{"result": ' + "[" * 100_000 + "]" * 100_000 + "}")
    refused(lambda p: list(iter_run_records(p)), run, 1, "nested too deeply")
    run.write_bytes(b'{"query_id": "1",\n "status": "\xc3("}\n')
    refused(lambda p: list(iter_run_records(p)), run, 2, "UTF-8")
    run.write_text('{"query_id": "1",\n\n "status": }\n')
    refused(lambda p: list(iter_run_records(p)), run, 3, "invalid JSON")
    judged = tmp_path / "evals" / "1_eval.json"
    judged.parent.mkdir()
    judged.write_bytes(b'{"query_id": "1", "judge_result": {"correct": true}}\n\xff\n')
    refused(read_judgements, judged, 2, "UTF-8")
    with pytest.raises(FormatError, match=r"1_eval.json:2"):
        read_judgements(tmp_path / "evals")


# -- fields: ids, numbers, repeats ---------------------------------------------------------------------
def row(**kw) -> str:
    return J(kw)


FIELD_CASES = [  # (reader, file name, line 2, expected text in the message)
    ("corpus", "c.jsonl", row(_id="a\nb", text="t"), "control or line-break"),
    ("corpus", "c.jsonl", row(_id="a\u2028b", text="t"), "control or line-break"),
    ("corpus", "c.jsonl", row(_id="nul\u0000", text="t"), "control or line-break"),
    ("corpus", "c.jsonl", row(_id=True, text="t"), "string or an integer"),
    ("corpus", "c.jsonl", row(_id=1.5, text="t"), "string or an integer"),
    ("corpus", "c.jsonl", row(_id="", text="t"), "not empty"),
    ("corpus", "c.jsonl", row(_id="d0", text="again"), "unique document ids ('d0' is already at line 1)"),
    ("corpus", "c.jsonl", '{"_id": "x", "text": "lone \\ud800 surrogate"}', "surrogates"),
    ("queries-jsonl", "q.jsonl", row(_id="q0", text="twice"), "unique query ids ('q0' is already at line 1)"),
    ("queries-jsonl", "q.jsonl", row(_id="q 1", text="t"), "without whitespace"),
    ("queries-jsonl", "q.jsonl", row(_id="q\n1", text="t"), "control or line-break"),
    ("queries-jsonl", "q.jsonl", row(_id=[1], text="t"), "'_id'"),
    ("queries-jsonl", "q.jsonl", row(_id=False, text="t"), "string or an integer"),
    ("queries-tsv", "q.tsv", "q0\ttwice", "unique query ids"),
    ("queries-tsv", "q.tsv", "q 1\tspace in the id", "without whitespace"),
    ("qrels-trec", "qrels.txt", "q0 0 d0 inf", "not nan or infinite"),
    ("qrels-trec", "qrels.txt", "q0 0 d9 nan", "not nan or infinite"),
    ("qrels-trec", "qrels.txt", "q0 0 d9 0.9", "not a fraction"),
    ("qrels-trec", "qrels.txt", "q0 0 d9 1e400", "within range"),
    ("qrels-trec", "qrels.txt", "q0 0 d9 " + "9" * 5000, "within range"),
    ("qrels-trec", "qrels.txt", "q0 0 d9 4294967296", "integer relevance grade in"),
    ("qrels-trec", "qrels.txt", "q0 0 d9 one", "integer relevance grade"),
    ("qrels-trec", "qrels.txt", "q0 0 d0 2", "one grade per (query, document) pair (line 1 gives q0 d0 grade 1)"),
    ("qrels-beir", "qrels.tsv", "q 9\td9\t1", "without whitespace"),
    ("qrels-beir", "qrels.tsv", "q9\td9\x00\t1", "control or line-break"),
    ("qrels-jsonl", "qrels.jsonl", row(query_id="q9", doc_id="d9", relevance=True), "integer relevance grade"),
    ("qrels-jsonl", "qrels.jsonl", row(query_id="q9", doc_id="d\n9", relevance=1), "control or line-break"),
    ("qrels-jsonl", "qrels.jsonl", row(query_id={"a": 1}, doc_id="d9"), "string or an integer"),
    ("qrels-jsonl", "qrels.jsonl", row(record_id=9, qrel=["ok", 3.5]), "docids in 'qrel'"),
    ("qrels-jsonl", "qrels.jsonl", '{"query_id": "q9", "doc_id": "d9", "relevance": NaN}', "not nan or infinite"),
    ("run", "run.trec", "q0 Q0 d9 2 nan t", "finite"),
    ("run", "run.trec", "q0 Q0 d9 2 -inf t", "finite"),
    ("run", "run.trec", "q0 Q0 d9 2 1e999 t", "within range"),
    ("run", "run.trec", "q0 Q0 d9 two 1.0 t", "rank in column 4"),
    ("run", "run.trec", "q0 Q0 d9 -2 1.0 t", "rank in column 4"),
    ("run", "run.trec", "q0 Q0 d\x019 2 1.0 t", "control or line-break"),
    ("tuples", "t.jsonl", row(query_id=["q"], query="x", positive_passages=[{"docid": "d", "text": "p"}]),
     "string or an integer"),
    ("tuples", "t.jsonl", row(query_id="q", query="x", positive_passages=[{"docid": "d\n", "text": "p"}]),
     "control or line-break"),
    ("tuples", "t.jsonl", row(query_id="q", query="x", positive_passages=[{"docid": "d", "text": "p", "title": 5}]),
     "title"),
    ("agent-runs", "runs.jsonl", row(query_id="q", tool_call_counts={"search": -1}), "non-negative integer"),
    ("agent-runs", "runs.jsonl", row(query_id="q", tool_call_counts={"search": 2.5}), "non-negative integer"),
    ("agent-runs", "runs.jsonl", '{"query_id": "q", "tool_call_counts": {"search": Infinity}}', "infinite"),
    ("agent-runs", "runs.jsonl", row(query_id="q", tool_call_counts=["search"]), "'tool_call_counts' as an object"),
    ("agent-runs", "runs.jsonl", row(query_id="q", tool_call_counts="{'search': [oops"), "'tool_call_counts'"),
    ("agent-runs", "runs.jsonl", row(query_id={"id": 1}), "'query_id' as a string or an integer"),
    ("agent-runs", "runs.jsonl", row(query_id="q", status=5), "a string 'status'"),
    ("agent-runs", "runs.jsonl", row(query_id="q", result=[1, 2]), "'result' as a list of step objects"),
    ("agent-runs", "runs.jsonl", row(query_id="q", retrieved_docids=[True]), "'retrieved_docids' as a list"),
    ("agent-runs", "runs.jsonl", row(query_id="q", surfaced_docids=[{"d": 1}]), "'surfaced_docids' as a list"),
    ("judgements-csv", "j.csv", "q9,yes," + "9" * 200_000, "field larger than field limit"),
    ("judgements-csv", "j.csv", ",yes,90", "'query_id'"),
    ("duplicate-groups", "g.jsonl", row(doc_id="a\nb", exact_duplicates=[]), "control or line-break"),
    ("duplicate-groups", "g.jsonl", row(doc_id="a", exact_duplicates=["b\r"]), "control or line-break"),
    ("duplicate-groups", "g.jsonl", row(doc_id="a", near_duplicates=[{"doc_id": "b", "jaccard": float("nan")}]),
     "'near_duplicates' entries"),
]


@pytest.mark.parametrize("name, filename, bad, needle", FIELD_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(FIELD_CASES)])
def test_a_bad_field_names_file_and_line(tmp_path, name, filename, bad, needle):
    path = tmp_path / filename
    path.write_text(lines(name, 1) + bad + "\n" + lines(name, 3), encoding="utf-8")
    refused(READERS[name][2], path, 2, needle)


def test_duplicates_across_shards_and_docid_spellings(tmp_path):
    shards = tmp_path / "shards"
    shards.mkdir()
    (shards / "part_0.jsonl").write_text(row(_id="shard_00045_6622", text="a") + "\n")
    (shards / "part_1.jsonl").write_text(row(_id="x", text="b") + "\n" + row(_id="shard_00045_06622", text="c") + "\n")
    err = refused(lambda _: list(read_corpus(shards)), shards / "part_1.jsonl", 2, "unique document ids",
                  "part_0.jsonl:1")  # two spellings of one ClimbMix document, in two shard files
    assert err.path.endswith("part_1.jsonl")
    assert len(list(read_corpus(shards, unique=False))) == 3  # count_documents' constant-memory pass


def test_parquet_corpus_rows_are_checked(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"_id": ["a", "b\nc"], "text": ["x", "y"]}), tmp_path / "c.parquet")
    refused(lambda p: list(read_corpus(p)), tmp_path / "c.parquet", 2, "control or line-break")
    data = (tmp_path / "c.parquet").read_bytes()
    (tmp_path / "cut.parquet").write_bytes(data[: len(data) // 2])
    refused(lambda p: list(read_corpus(p)), tmp_path / "cut.parquet", None, "a readable parquet file")


def test_what_stays_accepted(tmp_path):
    """The checks refuse what cannot be right, not what is merely unusual."""
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 d1 2.0\nq1 0 d1 2\nq1 0 d2 -1\nq1 0 d3 +1\n")  # a repeat with the same grade is fine
    assert read_qrels(qrels) == {"q1": {"d1": 2, "d2": -1, "d3": 1}}  # TREC's negative levels read
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(row(_id="a b", text="t") + "\n" + row(id=7, text="u") + "\n")
    assert [d.docid for d in read_corpus(corpus)] == ["a b", "7"]  # a space is fine in a corpus
    run = tmp_path / "run.trec"
    run.write_text("q1 Q0 d1 0 -3.5e2 t\n")
    assert read_run(run) == {"q1": {"d1": -350.0}}
    judged = tmp_path / "j.jsonl"
    judged.write_text(row(query_id="q", judge_result={"correct": True}, confidence="nan") + "\n")
    assert read_judgements(judged)[0].confidence is None  # a non-finite confidence is no confidence


# -- the run writer -----------------------------------------------------------------------------------
@pytest.mark.parametrize("qid, docs, tag, needle", [
    ("q1", {"a b": 1.0}, "t", "without whitespace"),
    ("q1", {"a\nb": 1.0}, "t", "control or line-break"),
    ("q 1", {"d": 1.0}, "t", "query id"),
    ("q1", {"d": float("nan")}, "t", "not a finite number"),
    ("q1", {"d": float("inf")}, "t", "not a finite number"),
    ("q1", {"d": "high"}, "t", "not a finite number"),
    ("q1", {"d": 1.0}, "my run", "run tag"),
])
def test_run_writer_refuses_a_line_it_cannot_write(tmp_path, qid, docs, tag, needle):
    out = tmp_path / "r.trec"
    with pytest.raises(UsageError, match="r.trec") as info, RunWriter(out, tag=tag) as writer:
        writer.write("ok", {"d0": 0.5})
        writer.write(qid, docs)
    assert needle in str(info.value) and not out.exists()
    assert not list(tmp_path.iterdir())  # nothing half-written


# -- through the CLI ----------------------------------------------------------------------------------
BAD_RUNS = {
    "nan.trec": b"q1 Q0 d1 1 0.5 t\nq1 Q0 d2 2 nan t\n",
    "latin1.trec": b"q1 Q0 d1 1 0.5 t\nq1 Q0 caf\xe9 2 0.4 t\n",
    "control.trec": b"q1 Q0 d1 1 0.5 t\nq1 Q0 d\x012 2 0.4 t\n",
    "cut.trec.gz": gzip.compress("".join(f"q1 Q0 d{i} 1 {i}.5 t\n" for i in range(4000)).encode())[:9000],
}


def _one_error_line(err: str, name: str) -> None:
    assert err.count("\n") == 1 and name in err and "Traceback" not in err, err


@pytest.mark.parametrize("name", BAD_RUNS)
def test_eval_with_a_bad_run_exits_2_with_one_line(tmp_path, cli, name):
    (tmp_path / name).write_bytes(BAD_RUNS[name])
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    code, _, err = cli("eval", "--run", tmp_path / name, "--qrels", qrels)
    assert code == 2
    _one_error_line(err, name)


def test_eval_with_fractional_grades_exits_2(tmp_path, cli):
    (tmp_path / "run.trec").write_text("q1 Q0 d1 1 0.5 t\n")
    (tmp_path / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t0.9\n")
    code, _, err = cli("eval", "--run", tmp_path / "run.trec", "--qrels", tmp_path / "qrels.tsv")
    assert code == 2 and "qrels.tsv:2" in err and "not a fraction" in err
    _one_error_line(err, "qrels.tsv")


@pytest.mark.parametrize("bad, needle", [
    (row(_id="b\nc", text="y"), "corpus.jsonl:2"),
    (row(_id="a", text="again"), "corpus.jsonl:2"),
    ("[" * 100_000, "corpus.jsonl:2"),
])
def test_bm25_index_refuses_a_bad_corpus(tmp_path, cli, bad, needle):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(row(_id="a", text="x") + "\n" + bad + "\n")
    code, _, err = cli("bm25-index", "--corpus", corpus, "--out", tmp_path / "idx")
    assert code == 2 and needle in err and "Traceback" not in err
    assert err.count("hopscotch bm25-index: error:") == 1 and not (tmp_path / "idx").exists()


def test_subprocess_bad_bytes_have_no_traceback(tmp_path):
    run = tmp_path / "run.trec"
    run.write_bytes(b"q1 Q0 d1 1 0.5 t\n\xff\xfe Q0 d2 2 0.4 t\n")
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    proc = subprocess.run([sys.executable, "-m", "hopscotch.retriever.cli", "eval", "--run", str(run),
                           "--qrels", str(qrels)], check=False, capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and "run.trec:2: expected UTF-8 text" in proc.stderr
