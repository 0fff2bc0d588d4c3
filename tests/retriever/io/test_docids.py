"""One docid per ClimbMix document whatever the spelling (readers, eval), duplicate closure, cmass queries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hopscotch.retriever.errors import FormatError, UsageError
from hopscotch.retriever.io.corpus import read_corpus
from hopscotch.retriever.io.docids import canonical_docid
from hopscotch.retriever.io.qrels import expand_qrels_with_duplicates, read_qrels
from hopscotch.retriever.io.queries import read_queries
from hopscotch.retriever.io.runs import read_run, write_run
from hopscotch.retriever.io.tuples import read_training_tuples

SHARD = 45


def padded(docid: str) -> str:
    """cmass corpus analysis's spelling: the row zero-padded to 5 digits."""
    shard, row = docid.split("_")[1:]
    return f"shard_{shard}_{int(row):05d}"


def write_lines(path: Path, rows) -> Path:
    path.write_text("".join((json.dumps(r) if isinstance(r, dict) else r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("raw, canonical", [
    ("shard_00045_06622", "shard_00045_6622"), ("shard_00045_6622", "shard_00045_6622"),
    ("shard_45_00000", "shard_00045_0"), ("shard_00045_16622", "shard_00045_16622"),
    ("w000094", "w000094"), ("shard_00045_x", "shard_00045_x"), ("doc_00045_00001", "doc_00045_00001"),
])
def test_canonical_docid(raw, canonical):
    assert canonical_docid(raw) == canonical


@pytest.fixture(scope="module")
def climbmix_world(small_world, tmp_path_factory) -> dict:
    """The small world as a ClimbMix shard folder (ids from positions), with unpadded TREC qrels."""
    out = tmp_path_factory.mktemp("climbmix")
    docs = [json.loads(line) for line in (small_world / "corpus.jsonl").read_text().splitlines()]
    ids = {d["_id"]: f"shard_{SHARD:05d}_{row}" for row, d in enumerate(docs)}
    (out / "shards").mkdir()
    write_lines(out / "shards" / f"part_{SHARD:05d}.jsonl", [{"title": d["title"], "text": d["text"]} for d in docs])
    qrels = read_qrels(small_world / "qrels.tsv")
    (out / "qrels.trec").write_text("".join(f"{q} Q0 {ids[d]} {g}\n" for q, ds in qrels.items() for d, g in ds.items()))
    return {"dir": out, "docs": docs, "ids": ids, "queries": small_world / "queries.jsonl"}


def test_every_corpus_reader_yields_the_canonical_id(climbmix_world, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    docs, ids = climbmix_world["docs"], climbmix_world["ids"]
    expected = [ids[d["_id"]] for d in docs]
    assert [d.docid for d in read_corpus(climbmix_world["dir"] / "shards")] == expected
    rows = [{"id": padded(ids[d["_id"]]), "title": d["title"], "text": d["text"]} for d in docs]
    assert [d.docid for d in read_corpus(write_lines(tmp_path / "c.jsonl", rows))] == expected
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "c.parquet")
    assert [d.docid for d in read_corpus(tmp_path / "c.parquet")] == expected
    (tmp_path / "beir").mkdir()
    write_lines(tmp_path / "beir" / "corpus.jsonl", [{"_id": r["id"], "text": r["text"]} for r in rows])
    assert [d.docid for d in read_corpus(tmp_path / "beir")] == expected


def test_qrels_runs_and_tuples_read_either_spelling_as_one(tmp_path):
    a, b = "shard_00045_6622", "shard_00045_17"
    trec = tmp_path / "q.trec"
    trec.write_text(f"1 0 {padded(a)} 2\n1 0 {b} 1\n1 0 {padded(b)} 0\n")  # b twice, both spellings: max grade
    beir = tmp_path / "q.tsv"
    beir.write_text(f"query-id\tcorpus-id\tscore\n1\t{a}\t2\n1\t{padded(b)}\t1\n")
    rows = write_lines(tmp_path / "rows.jsonl", [{"query_id": "1", "doc_id": padded(a), "relevance": 2},
                                                 {"query_id": "1", "doc_id": b, "relevance": 1}])
    lists = write_lines(tmp_path / "lists.jsonl", [{"record_id": 1, "qrel": [padded(a), padded(b)]}])
    expected = {"1": {a: 2, b: 1}}
    assert read_qrels(trec) == read_qrels(beir) == read_qrels(rows) == expected
    assert read_qrels(lists) == {"1": {a: 1, b: 1}}

    run = tmp_path / "run.trec"
    run.write_text(f"1 Q0 {padded(a)} 1 3.0 t\n1 Q0 {b} 2 2.0 t\n1 Q0 {padded(b)} 3 1.0 t\n")
    assert read_run(run) == {"1": {a: 3.0, b: 2.0}}

    tuples = write_lines(tmp_path / "t.jsonl", [{"query_id": "q", "query": "x",
                                                 "positive_passages": [{"docid": padded(a), "text": "p"}],
                                                 "negative_passages": [{"docid": padded(b), "text": "n"},
                                                                       {"docid": a, "text": "dup of positive"}]}])
    (t,) = read_training_tuples(tuples)
    assert [p.docid for p in t.positives] == [a] and [n.docid for n in t.negatives] == [b]


def test_padded_run_scores_as_the_unpadded_run_through_eval(climbmix_world, tmp_path, cli):
    from hopscotch.retriever.index.bm25 import BM25Index

    world = climbmix_world["dir"]
    index = BM25Index.build(read_corpus(world / "shards"))
    queries = list(read_queries(climbmix_world["queries"]))
    hits = index.search([q.text for q in queries], k=100)
    write_run(tmp_path / "plain.trec", {q.qid: dict(h) for q, h in zip(queries, hits)})
    (tmp_path / "padded.trec").write_text("".join(
        f"{q.qid} Q0 {padded(d)} {r} {s:.6f} bm25\n" for q, h in zip(queries, hits)
        for r, (d, s) in enumerate(h, start=1)))
    assert "shard_00045_00" in (tmp_path / "padded.trec").read_text()
    # padded qrels too: every combination of spellings gives the same scores
    (tmp_path / "padded_qrels.trec").write_text("".join(
        f"{p[0]} Q0 {padded(p[2])} {p[3]}\n" for p in (line.split() for line in (world / "qrels.trec").open())))
    reports = []
    for run, qrels in (("plain", world / "qrels.trec"), ("padded", world / "qrels.trec"),
                       ("padded", tmp_path / "padded_qrels.trec"), ("plain", tmp_path / "padded_qrels.trec")):
        out = tmp_path / f"{run}_{qrels.stem}.json"
        code, _, err = cli("eval", "--run", tmp_path / f"{run}.trec", "--qrels", qrels, "--json", out,
                           "--metrics", "ndcg@10,recall@100", "--strict")
        assert code == 0 and "warning" not in err
        reports.append(json.loads(out.read_text()))
    assert 0.2 < reports[0]["metrics"]["ndcg@10"] < 1
    for report in reports[1:]:
        assert report["metrics"] == reports[0]["metrics"] and report["per_query"] == reports[0]["per_query"]
        assert report["manifest"]["qrels"]["sha256"] == reports[0]["manifest"]["qrels"]["sha256"]


def test_eval_warns_when_docids_barely_meet_the_qrels_and_strict_refuses(tmp_path, cli):
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("".join(f"q{i}\tshard_00001_{i}\t1\n" for i in range(40)))
    good = tmp_path / "good.trec"  # 38 of 40 queries reach a judged docid
    good.write_text("".join(f"q{i} Q0 {'shard_00001_' + str(i) if i < 38 else 'x'} 1 1.0 t\n" for i in range(40)))
    wrong = tmp_path / "wrong.trec"  # another corpus's ids, one query judged-hit: 1 of 40 < 5%
    wrong.write_text("".join(f"q{i} Q0 {'shard_00001_0' if i == 0 else 'doc' + str(i)} 1 1.0 t\n"
                             for i in range(40)) + "extra Q0 doc1 1 1.0 t\n")
    code, _, err = cli("eval", "--run", good, "--qrels", qrels)
    assert code == 0 and "warning" not in err
    code, out, err = cli("eval", "--run", wrong, "--qrels", qrels)
    assert code == 0 and "40 queries" in out
    assert "only 1 of the 40 evaluated queries" in err and "docid spellings or corpora" in err
    assert "1 run queries have no relevant document in the qrels" in err and "'extra'" in err
    code, _, err = cli("eval", "--run", wrong, "--qrels", qrels, "--strict")
    assert code == 2 and err.count("\n") == 1 and "--strict" in err
    # the compared run is checked too
    code, _, err = cli("eval", "--run", good, "--compare", wrong, "--qrels", qrels, "--strict")
    assert code == 2 and "wrong.trec" in err
    # qrels queries the run lacks are named (they score 0)
    partial = tmp_path / "partial.trec"
    partial.write_text("".join(f"q{i} Q0 shard_00001_{i} 1 1.0 t\n" for i in range(30)))
    code, _, err = cli("eval", "--run", partial, "--qrels", qrels, "--strict")
    assert code == 0 and "10 of 40 qrels queries have no line in the run (scored 0)" in err


def test_duplicate_closure_with_padded_groups(tmp_path):
    a, b, c, d, d2, e = (f"shard_00003_{row}" for row in (11, 222, 3333, 44, 55, 66))
    groups = write_lines(tmp_path / "groups.jsonl", [
        # a = b on one row and b = c on another: the closure puts a, b, c in one class
        {"doc_id": padded(a), "exact_duplicates": [padded(b)], "near_duplicates": [{"doc_id": padded(d),
                                                                                       "jaccard": 0.9}]},
        {"doc_id": padded(b), "exact_duplicates": [padded(c)], "near_duplicates": []},
        {"doc_ids": [padded(d), padded(d2)]},  # an exact group row (cmass duplicate_groups.jsonl)
        {"doc_id": padded(d), "exact_duplicates": None, "near_duplicates": [{"doc_id": padded(e), "jaccard": 0.95}]},
    ])
    qrels = {"q": {a: 2, "other": 1}, "r": {c: 1, "x": 0}, "s": {"x": 0}}
    exact = expand_qrels_with_duplicates(qrels, groups)
    assert exact == {"q": {a: 2, b: 2, c: 2, "other": 1}, "r": {a: 1, b: 1, c: 1, "x": 0}, "s": {"x": 0}}
    # near duplicates: direct neighbours of the class (with their own exact class), not chained to e
    near = expand_qrels_with_duplicates(qrels, groups, min_jaccard=0.8)
    assert near["q"] == {a: 2, b: 2, c: 2, d: 2, d2: 2, "other": 1}
    assert expand_qrels_with_duplicates({"q": {e: 1}}, groups, min_jaccard=0.8)["q"] == {e: 1, d: 1, d2: 1}
    assert expand_qrels_with_duplicates(qrels, groups, min_jaccard=0.95) == exact
    # a judged grade above the one spread to it is kept
    assert expand_qrels_with_duplicates({"q": {a: 1, c: 3}}, groups)["q"] == {a: 3, b: 3, c: 3}


def test_parquet_groups_expand_like_jsonl(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"doc_id": "shard_00003_00011", "exact_duplicates": ["shard_00003_00222"],
             "near_duplicates": [{"doc_id": "shard_00003_00044", "jaccard": 0.75}], "n_exact": 1, "n_near": 1}]
    (tmp_path / "dups").mkdir()
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "dups" / "part_0000.parquet")
    out = expand_qrels_with_duplicates({"q": {"shard_00003_11": 1}}, tmp_path / "dups", min_jaccard=0.7)
    assert out == {"q": {"shard_00003_11": 1, "shard_00003_222": 1, "shard_00003_44": 1}}


@pytest.mark.parametrize("row, what", [
    ({"doc_id": "a", "exact_duplicates": "shard_00001_1"}, "'exact_duplicates' as a list"),
    ({"doc_id": "a", "exact_duplicates": ["b", 3]}, "'exact_duplicates' as a list"),
    ({"doc_id": "a", "near_duplicates": [{"doc_id": "b", "jaccard": "0.9"}]}, "'near_duplicates' entries"),
    ({"doc_id": "a", "near_duplicates": [{"doc_id": "b", "jaccard": 1.5}]}, "'near_duplicates' entries"),
    ({"doc_id": "a", "near_duplicates": {"doc_id": "b", "jaccard": 0.9}}, "'near_duplicates' as a list"),
    ({"doc_id": 17, "exact_duplicates": []}, "a string 'doc_id'"),
    ({"exact_duplicates": ["b"]}, "a string 'doc_id'"),
])
def test_bad_group_fields_name_file_and_line(tmp_path, row, what):
    groups = write_lines(tmp_path / "g.jsonl", [{"doc_id": "x", "exact_duplicates": ["y"]}, row])
    with pytest.raises(FormatError, match=r"g\.jsonl:2") as err:
        expand_qrels_with_duplicates({"q": {"a": 1}}, groups, min_jaccard=0.5)
    assert what in str(err.value)


def test_duplicates_through_eval(tmp_path, cli):
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("q1\tshard_00045_6622\t1\nq2\tshard_00045_7\t1\n")
    run = tmp_path / "run.trec"  # each query retrieves only a (padded) duplicate of its relevant document
    run.write_text("q1 Q0 shard_00045_09999 1 2.0 t\nq2 Q0 shard_00045_00008 1 2.0 t\n")
    groups = write_lines(tmp_path / "g.jsonl", [
        {"doc_id": "shard_00045_06622", "exact_duplicates": ["shard_00045_09999"]},
        {"doc_id": "shard_00045_00007", "exact_duplicates": [],
         "near_duplicates": [{"doc_id": "shard_00045_00008", "jaccard": 0.8}]}])
    scores = {}
    for name, extra in (("none", []), ("exact", ["--duplicates", groups]),
                        ("near", ["--duplicates", groups, "--near-duplicates-min-jaccard", "0.7"])):
        code, _, _ = cli("eval", "--run", run, "--qrels", qrels, "--metrics", "recall@100",
                         "--json", tmp_path / f"{name}.json", *extra)
        assert code == 0
        scores[name] = json.loads((tmp_path / f"{name}.json").read_text())
    assert [scores[n]["per_query"]["q1"]["recall@100"] for n in ("none", "exact", "near")] == [0.0, 0.5, 0.5]
    assert [scores[n]["per_query"]["q2"]["recall@100"] for n in ("none", "exact", "near")] == [0.0, 0.0, 0.5]
    assert scores["near"]["manifest"]["near_duplicates_min_jaccard"] == 0.7
    assert len({scores[n]["manifest"]["qrels"]["sha256"] for n in scores}) == 3
    bad = write_lines(tmp_path / "bad.jsonl", [{"doc_id": "shard_00045_6622", "exact_duplicates": "shard_00045_9999"}])
    code, _, err = cli("eval", "--run", run, "--qrels", qrels, "--duplicates", bad)
    assert code == 2 and "bad.jsonl:1" in err and err.count("\n") == 1
    code, _, err = cli("eval", "--run", run, "--qrels", qrels, "--near-duplicates-min-jaccard", "0.8")
    assert code == 2 and "needs --duplicates" in err
    with pytest.raises(UsageError, match="Jaccard"):
        expand_qrels_with_duplicates({}, groups, min_jaccard=1.5)


def test_cmass_queries_and_the_other_query_shapes(tmp_path):
    cmass = write_lines(tmp_path / "cmass.jsonl", [{"id": "25", "question": "Which river?", "answer": "Nile",
                                                   "canary": "c"}])
    (q,) = read_queries(cmass)
    assert (q.qid, q.text, q.extra) == ("25", "Which river?", {"answer": "Nile", "canary": "c"})
    beir = write_lines(tmp_path / "beir.jsonl", [{"_id": "a", "text": "t", "answers": ["x"]},
                                                 {"query_id": "b", "query": "u", "reasoning": "r"},
                                                 {"qid": 3, "text": "v", "question": "ignored beside text"}])
    got = [(q.qid, q.text, q.reasoning, q.extra) for q in read_queries(beir)]
    assert got == [("a", "t", None, {"answers": ["x"]}), ("b", "u", "r", {}), ("3", "v", None, {})]
    tsv = tmp_path / "q.tsv"
    tsv.write_text("qid\tquery\n1\thello there\n")
    assert [(q.qid, q.text) for q in read_queries(tsv)] == [("1", "hello there")]
    bad = write_lines(tmp_path / "bad.jsonl", [{"id": "1", "answer": "no question"}])
    with pytest.raises(FormatError, match=r"bad\.jsonl:1.*'question'"):
        list(read_queries(bad))
