"""The evaluation manifest (what ``eval --json`` records) and ``hopscotch compare`` on two results."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.evaluation import manifest
from hopscotch.retriever.evaluation.manifest import check_comparable, make_manifest, qrels_fingerprint
from hopscotch.retriever.io.qrels import read_qrels


def test_make_manifest_records_every_field_and_hashes_qrels_content(tmp_path):
    unpadded, padded = tmp_path / "a.tsv", tmp_path / "b.trec"
    unpadded.write_text("q1\tshard_00001_7\t1\nq2\tshard_00001_70000\t2\n")
    padded.write_text("q2 0 shard_00001_70000 2\nq1 0 shard_00001_00007 1\n")  # other order, other spelling
    m = make_manifest("eval", corpus=Path("corpus"), qrels_path=unpadded, qrels=read_qrels(unpadded), k=100,
                      protocol="trec_eval", queries_expected=2, queries_evaluated=2, run="r.trec")
    assert m == {"command": "eval", "corpus": "corpus",
                 "qrels": {"path": str(unpadded), "sha256": qrels_fingerprint(read_qrels(padded))},
                 "k": 100, "snippet_chars": None, "query_input": None, "judge": None, "protocol": "trec_eval",
                 "queries_expected": 2, "queries_evaluated": 2, "run": "r.trec"}
    assert qrels_fingerprint({"q1": {"d": 1}}) != qrels_fingerprint({"q1": {"d": 2}})
    # what is compared: not the command, the qrels path or extra keys
    other = make_manifest("replay", corpus="corpus", qrels_path=padded, qrels=read_qrels(padded), k=100,
                          protocol="trec_eval", queries_expected=2, queries_evaluated=2, run="other.trec")
    check_comparable(m, other)
    with pytest.raises(UsageError, match="'k'"):
        check_comparable(m, {**other, "k": 10}, "a.json", "b.json")


@pytest.fixture(scope="module")
def world_runs(small_world, tmp_path_factory) -> dict:
    """A BM25 run of the small world and a worse one (each query's top 10 reversed)."""
    from hopscotch.retriever.index.bm25 import BM25Index
    from hopscotch.retriever.io.corpus import read_corpus
    from hopscotch.retriever.io.queries import read_queries
    from hopscotch.retriever.io.runs import write_run

    out = tmp_path_factory.mktemp("runs")
    index = BM25Index.build(read_corpus(small_world / "corpus.jsonl"))
    queries = list(read_queries(small_world / "queries.jsonl"))
    hits = [dict(h) for h in index.search([q.text for q in queries], k=100)]
    write_run(out / "bm25.trec", {q.qid: h for q, h in zip(queries, hits)})
    worse = {}
    for q, h in zip(queries, hits):
        ranked = sorted(h, key=lambda d: -h[d])
        worse[q.qid] = {d: float(100 - i) for i, d in enumerate(ranked[:10][::-1] + ranked[10:])}
    write_run(out / "worse.trec", worse)
    return {"dir": out, "qrels": small_world / "qrels.tsv", "bm25": out / "bm25.trec", "worse": out / "worse.trec"}


def _eval(cli, run, qrels, out, *extra):
    code, _, err = cli("eval", "--run", run, "--qrels", qrels, "--json", out, *extra)
    assert code == 0, err
    return json.loads(Path(out).read_text())


def test_eval_json_carries_the_manifest_and_its_old_keys(world_runs, tmp_path, cli):
    qrels = tmp_path / "qrels.tsv"  # the world's qrels plus a query with no relevant document
    qrels.write_text(world_runs["qrels"].read_text() + "nobody\tw000001\t0\n")
    report = _eval(cli, world_runs["bm25"], qrels, tmp_path / "r.json", "--metrics", "ndcg@10,mrr@10,recall@50",
                   "--corpus", "world/corpus.jsonl")
    assert {"manifest", "metrics", "ci95", "num_queries", "per_query"} <= set(report)
    m = report["manifest"]
    judged = {q for q, d in read_qrels(qrels).items() if any(g > 0 for g in d.values())}
    assert (m["command"], m["corpus"], m["k"], m["protocol"]) == ("eval", "world/corpus.jsonl", 50, "trec_eval")
    assert m["qrels"] == {"path": str(qrels), "sha256": qrels_fingerprint(read_qrels(qrels))}
    assert m["queries_expected"] == len(judged) + 1 and m["queries_evaluated"] == len(judged) == report["num_queries"]
    assert m["metrics"] == ["ndcg@10", "mrr@10", "recall@50"] and m["run"] == str(world_runs["bm25"])
    assert m["duplicates"] is None and m["snippet_chars"] is None


@pytest.fixture(scope="module")
def two_results(world_runs, tmp_path_factory) -> tuple[Path, Path]:
    from hopscotch.retriever.cli import main

    out = tmp_path_factory.mktemp("results")
    for name in ("bm25", "worse"):
        assert main(["eval", "--run", str(world_runs[name]), "--qrels", str(world_runs["qrels"]),
                     "--metrics", "ndcg@10,recall@100,mrr@10", "--json", str(out / f"{name}.json")]) == 0
    return out / "bm25.json", out / "worse.json"


def test_compare_two_eval_outputs_of_the_same_qrels(world_runs, two_results, tmp_path, cli):
    from hopscotch.retriever.evaluation.metrics import compare_runs, evaluate
    from hopscotch.retriever.io.runs import read_run

    a, b = two_results
    code, out, err = cli("compare", a, b, "--json", tmp_path / "c.json")
    assert code == 0, err
    qrels = read_qrels(world_runs["qrels"])
    base = evaluate(read_run(world_runs["bm25"]), qrels, ["ndcg@10", "recall@100", "mrr@10"])
    worse = evaluate(read_run(world_runs["worse"]), qrels, ["ndcg@10", "recall@100", "mrr@10"])
    report = json.loads((tmp_path / "c.json").read_text())
    assert set(report["tests"]) == {"ndcg@10", "recall@100", "mrr@10"}  # default: every shared metric
    assert report["num_queries"] == len(base.per_query) and f"{len(base.per_query)} shared queries" in out
    for metric in ("ndcg@10", "recall@100", "mrr@10"):
        expected = compare_runs(base, worse, metric)
        got = report["tests"][metric]
        assert got["delta"] == pytest.approx(expected.delta)
        assert got["p_randomization"] == pytest.approx(expected.p_randomization)
        assert got["p_ttest"] == pytest.approx(expected.p_ttest, nan_ok=True)
        assert f"{expected.delta:+8.4f}" in out
    assert report["tests"]["ndcg@10"]["delta"] < 0 and report["tests"]["recall@100"]["delta"] == 0
    assert report["tests"]["ndcg@10"]["p_randomization"] < 0.05
    code, out, _ = cli("compare", a, b, "--metric", "mrr@10")
    assert code == 0 and "mrr@10" in out and "ndcg@10" not in out
    code, _, err = cli("compare", a, b, "--metric", "map@100")
    assert code == 2 and "map@100" in err


@pytest.mark.parametrize("field", manifest.COMPARED_FIELDS)
def test_compare_refuses_results_whose_manifests_differ(two_results, tmp_path, cli, field):
    a, _ = two_results
    result = json.loads(a.read_text())
    changed = copy.deepcopy(result)
    if field == "qrels":
        changed["manifest"]["qrels"]["sha256"] = "0" * 64
    else:
        changed["manifest"][field] = "something else"
    b = tmp_path / "changed.json"
    b.write_text(json.dumps(changed))
    code, out, err = cli("compare", a, b)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and f"differ in '{field}'" in err and "changed.json" in err


def test_compare_refuses_real_evaluations_of_different_qrels_or_depths(world_runs, two_results, tmp_path, cli):
    a, _ = two_results
    fewer = tmp_path / "fewer.tsv"
    fewer.write_text("".join(world_runs["qrels"].read_text().splitlines(keepends=True)[:-3]))
    other = tmp_path / "other.json"
    _eval(cli, world_runs["worse"], fewer, other, "--metrics", "ndcg@10,recall@100,mrr@10")
    code, _, err = cli("compare", a, other)
    assert code == 2 and "'qrels'" in err
    _eval(cli, world_runs["worse"], world_runs["qrels"], other, "--metrics", "ndcg@10,recall@10", "--overwrite")
    code, _, err = cli("compare", a, other)
    assert code == 2 and "'k'" in err and "100" in err


def test_compare_needs_results_with_a_manifest(two_results, tmp_path, cli):
    a, _ = two_results
    legacy = tmp_path / "legacy.json"
    legacy.write_text(json.dumps({"metrics": {"ndcg@10": 0.5}, "per_query": {"q": {"ndcg@10": 0.5}}}))
    code, _, err = cli("compare", a, legacy)
    assert code == 2 and "legacy.json" in err and "manifest" in err
    code, _, err = cli("compare", a, tmp_path / "missing.json")
    assert code == 2 and "missing.json" in err


def test_per_query_table_reads_mappings_and_rows(tmp_path):
    mapping = {"per_query": {"q": {"ndcg@10": 1, "note": "x", "ok": True}}}
    assert manifest.per_query_table(mapping) == {"q": {"ndcg@10": 1.0}}
    rows = {"per_query_metrics": [{"query_id": 7, "recall": 14.29, "correct": True}]}
    assert manifest.per_query_table(rows) == {"7": {"recall": 14.29}}
    from hopscotch.retriever.errors import FormatError

    with pytest.raises(FormatError, match="per_query"):
        manifest.per_query_table({"metrics": {}}, tmp_path / "r.json")
