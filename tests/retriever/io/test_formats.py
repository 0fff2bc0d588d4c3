"""Readers on good and malformed input: corpora, queries, qrels, runs."""

from __future__ import annotations

import gzip
import json

import pytest

from hopscotch.retriever.errors import FormatError
from hopscotch.retriever.io.corpus import climbmix_id, corpus_files, count_documents, read_corpus
from hopscotch.retriever.io.qrels import expand_qrels_with_duplicates, read_qrels
from hopscotch.retriever.io.queries import read_queries
from hopscotch.retriever.io.runs import RunWriter, read_run, write_run


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


# -- corpus ---------------------------------------------------------------------------------------
def test_corpus_jsonl_id_and_text_variants(tmp_path):
    f = write(tmp_path / "c.jsonl", "\n".join([
        json.dumps({"_id": "a", "title": "T", "text": "x"}),
        json.dumps({"docid": "b", "contents": "y"}),
        "",
        json.dumps({"id": 3, "text": "z", "url": "http://u"}),
    ]))
    docs = list(read_corpus(f))
    assert [(d.docid, d.title, d.text) for d in docs] == [("a", "T", "x"), ("b", "", "y"), ("3", "", "z")]


def test_corpus_gzip(tmp_path):
    p = tmp_path / "c.jsonl.gz"
    with gzip.open(p, "wt") as fh:
        fh.write(json.dumps({"_id": "a", "text": "x"}) + "\n")
    assert [d.docid for d in read_corpus(p)] == ["a"]


def test_corpus_beir_folder(tmp_path):
    write(tmp_path / "corpus.jsonl", json.dumps({"_id": "d1", "title": "t", "text": "x"}) + "\n")
    assert [d.docid for d in read_corpus(tmp_path)] == ["d1"]


def test_corpus_parquet(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"docid": ["p1", "p2"], "text": ["one", "two"], "title": ["A", None]}), tmp_path / "c.parquet")
    docs = list(read_corpus(tmp_path / "c.parquet"))
    assert [(d.docid, d.title, d.text) for d in docs] == [("p1", "A", "one"), ("p2", "", "two")]


def test_climbmix_shard_ids(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path / "climbmix"
    folder.mkdir()
    pq.write_table(pa.table({"text": ["a", "b", "c"]}), folder / "part_00002.parquet")
    write(folder / "part_00000.jsonl", "\n".join(json.dumps({"text": t}) for t in ["x", "y"]) + "\n")
    ids = [d.docid for d in read_corpus(folder)]
    assert ids == ["shard_00000_0", "shard_00000_1", "shard_00002_0", "shard_00002_1", "shard_00002_2"]
    assert climbmix_id(12, 345) == "shard_00012_345"
    assert count_documents(folder) == 5


def test_climbmix_shard_index_falls_back_to_position(tmp_path):
    folder = tmp_path / "s"
    folder.mkdir()
    for name in ("b.jsonl", "a.jsonl"):
        write(folder / name, json.dumps({"text": name}) + "\n")
    assert [i for i, _ in corpus_files(folder)] == [0, 1]
    assert [d.docid for d in read_corpus(folder)] == ["shard_00000_0", "shard_00001_0"]


@pytest.mark.parametrize("line, expected", [
    ("{not json", "invalid JSON"),
    ("[1, 2]", "list"),
    (json.dumps({"_id": "x"}), "'text'"),
    (json.dumps({"_id": "x", "text": 5}), "'text'"),
    (json.dumps({"_id": "x", "text": "t", "title": 3}), "'title'"),
])
def test_corpus_malformed_names_file_and_line(tmp_path, line, expected):
    f = write(tmp_path / "bad.jsonl", json.dumps({"_id": "ok", "text": "fine"}) + "\n" + line + "\n")
    with pytest.raises(FormatError) as err:
        list(read_corpus(f))
    assert err.value.line == 2 and err.value.path.endswith("bad.jsonl")
    assert "bad.jsonl:2" in str(err.value) and expected in str(err.value)


def test_corpus_missing_path(tmp_path):
    with pytest.raises(FormatError, match="no such path"):
        list(read_corpus(tmp_path / "nope.jsonl"))


def test_corpus_parquet_without_text_column(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"body": ["x"]}), tmp_path / "c.parquet")
    with pytest.raises(FormatError, match="'text' or 'contents'"):
        list(read_corpus(tmp_path / "c.parquet"))


# -- queries --------------------------------------------------------------------------------------
def test_queries_jsonl_variants_keep_reasoning_and_extra(tmp_path):
    f = write(tmp_path / "q.jsonl", "\n".join([
        json.dumps({"_id": "1", "text": "a", "answers": ["x"]}),
        json.dumps({"query_id": "2", "query": "b", "reasoning": "because"}),
        json.dumps({"id": 3, "text": "c"}),
    ]))
    qs = list(read_queries(f))
    assert [(q.qid, q.text, q.reasoning) for q in qs] == [("1", "a", None), ("2", "b", "because"), ("3", "c", None)]
    assert qs[0].extra == {"answers": ["x"]}


def test_queries_tsv(tmp_path):
    f = write(tmp_path / "q.tsv", "0\tWhat manga?\n1\tWho\tdirected it?\n")
    assert [(q.qid, q.text) for q in read_queries(f)] == [("0", "What manga?"), ("1", "Who\tdirected it?")]


def test_queries_malformed(tmp_path):
    with pytest.raises(FormatError, match=r"q.tsv:2"):
        list(read_queries(write(tmp_path / "q.tsv", "0\tok\nno-tab-here\n")))
    with pytest.raises(FormatError, match=r"q.jsonl:1.*'_id'"):
        list(read_queries(write(tmp_path / "q.jsonl", json.dumps({"text": "no id"}) + "\n")))
    with pytest.raises(FormatError, match=r"q.jsonl:1.*'reasoning'"):
        list(read_queries(write(tmp_path / "q.jsonl", json.dumps({"_id": 1, "text": "t", "reasoning": 4}) + "\n")))


# -- qrels ----------------------------------------------------------------------------------------
def test_qrels_trec_and_beir(tmp_path):
    trec = write(tmp_path / "q.trec", "q1 Q0 d1 1\nq1 Q0 d2 0\nq2 0 d3 2\n")
    beir = write(tmp_path / "q.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td3\t2\n")
    assert read_qrels(trec) == {"q1": {"d1": 1, "d2": 0}, "q2": {"d3": 2}}
    assert read_qrels(beir) == {"q1": {"d1": 1}, "q2": {"d3": 2}}


def test_qrels_jsonl_shapes(tmp_path):
    rows = write(tmp_path / "a.jsonl", json.dumps({"query_id": "1", "doc_id": "shard_00000_4", "relevance": 1}) + "\n")
    lists = write(tmp_path / "b.jsonl", json.dumps({"record_id": 7, "qrel": ["x", "y"]}) + "\n")
    assert read_qrels(rows) == {"1": {"shard_00000_4": 1}}
    assert read_qrels(lists) == {"7": {"x": 1, "y": 1}}


def test_qrels_duplicate_expansion(tmp_path):
    groups = write(tmp_path / "g.jsonl", json.dumps(
        {"doc_id": "a", "exact_duplicates": ["a2"], "near_duplicates": [{"doc_id": "a3", "jaccard": 0.9},
                                                                        {"doc_id": "a4", "jaccard": 0.5}]}) + "\n")
    assert expand_qrels_with_duplicates({"q": {"a": 1}}, groups) == {"q": {"a": 1, "a2": 1}}
    assert expand_qrels_with_duplicates({"q": {"a": 1}}, groups, min_jaccard=0.8) == {"q": {"a": 1, "a2": 1, "a3": 1}}


@pytest.mark.parametrize("name, text, expected", [
    ("q.trec", "q1 Q0 d1\n", "q.trec:1"),
    ("q.trec", "q1 Q0 d1 one\n", "integer relevance"),
    ("q.jsonl", json.dumps({"query_id": "1"}) + "\n", "q.jsonl:1"),
])
def test_qrels_malformed(tmp_path, name, text, expected):
    with pytest.raises(FormatError, match=expected):
        read_qrels(write(tmp_path / name, text))


# -- runs -----------------------------------------------------------------------------------------
def test_run_roundtrip_and_order(tmp_path):
    run = {"q1": {"d1": 0.5, "d2": 2.0, "d0": 0.5}, "q2": {"x": 1.0}}
    write_run(tmp_path / "r.trec", run, tag="t")
    lines = (tmp_path / "r.trec").read_text().splitlines()
    assert lines[:3] == ["q1 Q0 d2 1 2.000000 t", "q1 Q0 d0 2 0.500000 t", "q1 Q0 d1 3 0.500000 t"]
    assert read_run(tmp_path / "r.trec") == run


def test_run_writer_streams_the_same_bytes_as_write_run(tmp_path):
    run = {"q1": {"d1": 0.5, "d2": 2.0, "d0": 0.5}, "q2": {"x": 1.0, "y": -3.25, "z": 1.0}}
    write_run(tmp_path / "whole.trec", run, tag="t", k=2)
    with RunWriter(tmp_path / "streamed.trec", tag="t", k=2) as out:
        assert not (tmp_path / "streamed.trec").exists()  # appears only when the block ends
        out.write("q1", run["q1"])
        out.write("q2", list(run["q2"].items()))  # (docid, score) pairs work too
    assert (tmp_path / "streamed.trec").read_bytes() == (tmp_path / "whole.trec").read_bytes()
    assert read_run(tmp_path / "streamed.trec") == {"q1": {"d2": 2.0, "d0": 0.5}, "q2": {"x": 1.0, "z": 1.0}}


def test_run_writer_leaves_nothing_on_error(tmp_path):
    write_run(tmp_path / "r.trec", {"q": {"d": 1.0}})
    with pytest.raises(KeyError), RunWriter(tmp_path / "r.trec") as out:
        out.write("q", {"other": 2.0})
        raise KeyError("boom")
    assert read_run(tmp_path / "r.trec") == {"q": {"d": 1.0}}  # the old file is untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.trec"]  # no temporary left behind
    with pytest.raises(RuntimeError, match="outside"):
        out.write("q", {"d": 1.0})


def test_run_malformed(tmp_path):
    with pytest.raises(FormatError, match="r.trec:2.*6 columns"):
        read_run(write(tmp_path / "r.trec", "q Q0 d 1 1.0 t\nq Q0 d 1\n"))
    with pytest.raises(FormatError, match="numeric score"):
        read_run(write(tmp_path / "r.trec", "q Q0 d 1 high t\n"))


def test_real_shared_data_reads(shared_data):
    hp = shared_data / "hotpotqa_ircot"
    assert count_documents(hp / "corpus.jsonl") == 4858
    qs = list(read_queries(hp / "queries.jsonl"))
    assert len(qs) == 500 and qs[0].extra["answers"]
    assert sum(len(v) for v in read_qrels(hp / "qrels.tsv").values()) == 1000
    assert len(list(read_queries(shared_data / "qampari_tongyi" / "questions.tsv"))) == 1000


@pytest.mark.parametrize("name", ["runs/dr_synth_hotpot.jsonl", "missing/tuples.jsonl.gz"])
def test_a_missing_tuple_file_shaped_like_a_hub_id_is_no_such_file(name, tmp_path, monkeypatch):
    """``runs/x.jsonl`` (a recipe's relative default, run from another folder) is a file, never asked of the hub."""
    from hopscotch.retriever.errors import UsageError
    from hopscotch.retriever.io.tuples import read_training_tuples

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    with pytest.raises(UsageError, match=f"data.train: {name}: no such file or folder"):
        read_training_tuples(name)
