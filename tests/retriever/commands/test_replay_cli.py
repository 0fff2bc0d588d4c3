"""``hopscotch replay`` end to end: the small world's traces replayed with BM25 and a dense retriever, per-call
scores equal to ``hopscotch search`` + ``hopscotch eval`` on the same calls, the comparison and its plot,
replays without qrels, skipped calls, errors, and the shared QAMPARI/Tongyi run records."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from hopscotch.retriever.evaluation.discovery_plot import png_text
from hopscotch.retriever.io.runs import read_run


@pytest.fixture(scope="module")
def bm25_dir(small_world, tmp_path_factory) -> Path:
    from hopscotch.retriever.index.bm25 import BM25Index
    from hopscotch.retriever.io.corpus import read_corpus

    out = tmp_path_factory.mktemp("replay_bm25") / "bm25"
    BM25Index.build(read_corpus(small_world / "corpus.jsonl"), show_progress=False).save(out)
    return out


@pytest.fixture(scope="module")
def call_files(small_world, tmp_path_factory) -> tuple[Path, Path, dict]:
    """Written here from the world's files, independently of replay: every trace step as a query
    ``<question>#<n>`` (with its reasoning), each judged by its question's qrels."""
    out = tmp_path_factory.mktemp("replay_calls")
    qrels = defaultdict(dict)
    for line in (small_world / "qrels.tsv").read_text().splitlines()[1:]:
        qid, docid, grade = line.split("\t")
        qrels[qid][docid] = int(grade)
    counts, rows, qrel_lines = defaultdict(int), [], []
    for line in (small_world / "traces.jsonl").read_text().splitlines():
        step = json.loads(line)
        q = step["question_id"]
        counts[q] += 1
        cid = f"{q}#{counts[q]}"
        rows.append({"_id": cid, "text": step["query"].strip(), "reasoning": step["reasoning"].strip()})
        qrel_lines += [f"{cid}\t{d}\t{g}" for d, g in qrels[q].items()]
    (out / "calls.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (out / "calls_qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(qrel_lines) + "\n")
    return out / "calls.jsonl", out / "calls_qrels.tsv", dict(qrels)


def _replay(*argv) -> int:
    from hopscotch.retriever.cli import main

    return main(["replay", *map(str, argv)])


@pytest.fixture(scope="module")
def bm25_replay(small_world, bm25_dir, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("replay_out") / "bm25"
    assert _replay("--runs", small_world / "traces.jsonl", "--qrels", small_world / "qrels.tsv",
                   "--searcher", "bm25", "--bm25", bm25_dir, "--k", 10, "--out", out) == 0
    return out


def _search_and_eval(cli, tmp_path: Path, call_files, name: str, *searcher_flags) -> dict:
    queries, qrels, _ = call_files
    run = tmp_path / f"{name}.trec"
    code, _, err = cli("search", "--queries", queries, "--out", run, "--k", 10, *searcher_flags)
    assert code == 0, err
    code, _, err = cli("eval", "--run", run, "--qrels", qrels, "--metrics", "ndcg@10,recall@10",
                       "--json", tmp_path / f"{name}.json")
    assert code == 0, err
    return json.loads((tmp_path / f"{name}.json").read_text())


def _trec_rows(path: Path) -> list[tuple[str, ...]]:
    return [tuple(line.split()[:5]) for line in path.read_text().splitlines()]


def _assert_same_scores(result: dict, evaluated: dict) -> None:
    per_query = evaluated["per_query"]
    assert set(result["per_call"]) == set(per_query) and len(per_query) == result["calls"]["replayed"]
    for cid, row in result["per_call"].items():
        assert row["ndcg@10"] == per_query[cid]["ndcg@10"], cid
        assert row["recall@10"] == per_query[cid]["recall@10"], cid
    assert result["metrics"]["ndcg@10"]["mean"] == pytest.approx(evaluated["metrics"]["ndcg@10"], abs=1e-12)
    assert result["per_query"] == per_query  # the same table as eval --json writes


def test_bm25_per_call_scores_equal_search_and_eval(bm25_replay, bm25_dir, call_files, cli, tmp_path):
    result = json.loads((bm25_replay / "replay.json").read_text())
    evaluated = _search_and_eval(cli, tmp_path, call_files, "bm25", "--bm25", bm25_dir)
    _assert_same_scores(result, evaluated)
    assert _trec_rows(bm25_replay / "calls.trec") == _trec_rows(tmp_path / "bm25.trec")
    # trajectory evidence recall: the union of a question's calls' top 10 against its qrels
    run, qrels = read_run(tmp_path / "bm25.trec"), call_files[2]
    for q, traj in result["per_trajectory"].items():
        found = set().union(*(set(run.get(f"{q}#{n}", {})) for n in range(1, traj["calls"] + 1)))
        assert traj["evidence_recall"] == pytest.approx(len(found & set(qrels[q])) / len(qrels[q]))
        assert all(n is None or 1 <= n <= traj["calls"] for n in traj["first_found"].values())
    finals = [t["evidence_recall"] for t in result["per_trajectory"].values()]
    assert result["discovery_curve"]["evidence_recall"][-1] == pytest.approx(sum(finals) / len(finals))
    manifest = result["manifest"]
    assert manifest["command"] == "replay" and manifest["protocol"] == "hopscotch" and manifest["k"] == 10
    assert manifest["query_input"] == "query" and manifest["queries_expected"] == result["calls"]["replayed"]
    assert result["off_policy"].startswith("off-policy")
    assert result["plot"]["lines"] == 1 and png_text(bm25_replay / "discovery.png")["hopscotch:lines"] == "1"


def test_reasoning_aware_bm25_replay_equals_search_and_eval(bm25_replay, small_world, bm25_dir, call_files, cli,
                                                           tmp_path):
    out = tmp_path / "bm25r"
    code, _, err = cli("replay", "--runs", small_world / "traces.jsonl", "--qrels", small_world / "qrels.tsv",
                       "--searcher", "bm25", "--bm25", bm25_dir, "--reasoning", "--out", out)
    assert code == 0, err
    result = json.loads((out / "replay.json").read_text())
    assert result["manifest"]["query_input"].startswith("bm25 query x")
    _assert_same_scores(result, _search_and_eval(cli, tmp_path, call_files, "bm25r", "--bm25", bm25_dir,
                                                 "--reasoning"))
    assert _trec_rows(out / "calls.trec") == _trec_rows(tmp_path / "bm25r.trec")
    assert _trec_rows(out / "calls.trec") != _trec_rows(bm25_replay / "calls.trec")   # the reasoning was used


def test_dense_reasoning_replay_compared_with_bm25(bm25_replay, small_world, small_world_index, call_files, cli,
                                                   tmp_path):
    out = tmp_path / "dense"
    code, stdout, err = cli("replay", "--runs", small_world / "traces.jsonl", "--qrels", small_world / "qrels.tsv",
                            "--searcher", "dense", "--index", small_world_index, "--query-input", "reasoning",
                            "--compare", bm25_replay / "replay.json", "--permutations", 500, "--out", out)
    assert code == 0, err
    result = json.loads((out / "replay.json").read_text())
    assert result["manifest"]["query_input"] == "reasoning" and result["retriever"]["label"] == "dense (reasoning)"
    _assert_same_scores(result, _search_and_eval(cli, tmp_path, call_files, "dense", "--index", small_world_index,
                                                 "--query-input", "reasoning"))
    # the reasoning reached the encoder: plain queries rank differently
    _search_and_eval(cli, tmp_path, call_files, "plain", "--index", small_world_index)
    assert _trec_rows(out / "calls.trec") != _trec_rows(tmp_path / "plain.trec")
    # paired tests against the bm25 replay, on the same calls and trajectories
    (comp,) = result["compare"]
    assert comp["label"] == "bm25" and set(comp["tests"]) == {"ndcg@10", "recall@10", "evidence_recall", "redundancy"}
    bm25 = json.loads((bm25_replay / "replay.json").read_text())
    t = comp["tests"]["ndcg@10"]
    assert t["n"] == result["calls"]["scored"] and 0 < t["p_randomization"] <= 1
    assert t["mean_a"] == pytest.approx(result["metrics"]["ndcg@10"]["mean"])
    assert t["mean_b"] == pytest.approx(bm25["metrics"]["ndcg@10"]["mean"])
    assert comp["tests"]["evidence_recall"]["n"] == result["calls"]["trajectories"]
    assert "paired comparison (bm25 - dense (reasoning))" in stdout
    # one line per retriever in the plot
    meta = png_text(out / "discovery.png")
    assert meta["hopscotch:lines"] == "2" and result["plot"]["lines"] == 2
    assert json.loads(meta["hopscotch:labels"]) == ["dense (reasoning)", "bm25"]


def test_replay_without_qrels(bm25_replay, small_world, bm25_dir, cli, tmp_path):
    code, stdout, _ = cli("replay", "--runs", small_world / "traces.jsonl", "--bm25", bm25_dir, "--out", tmp_path)
    assert code == 0 and "off-policy" in stdout and "no --qrels" in stdout
    result = json.loads((tmp_path / "replay.json").read_text())
    assert set(result["metrics"]) == {"redundancy", "calls", "unique_docs"} and "per_query" not in result
    assert result["plot"] is None and not (tmp_path / "discovery.png").exists()
    assert result["manifest"]["qrels"] is None and result["off_policy"].startswith("off-policy")
    scored = json.loads((bm25_replay / "replay.json").read_text())
    for q, traj in result["per_trajectory"].items():
        assert traj["evidence_recall"] is None
        assert (traj["calls"], traj["redundancy"]) == (scored["per_trajectory"][q]["calls"],
                                                       scored["per_trajectory"][q]["redundancy"])


def test_skipped_calls_and_numbering(bm25_dir, cli, tmp_path):
    steps = tmp_path / "steps.jsonl"
    rows = [{"query_id": "t1", "reasoning": "think", "search_query": "released film", "valid": True},
            {"query_id": "t1", "reasoning": "", "search_query": None},
            {"query_id": "t1", "reasoning": "more", "search_query": ["founded company", "river city"], "valid": False},
            {"query_id": "t1", "reasoning": "last", "search_query": "university campus", "valid": True}]
    steps.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, stdout, _ = cli("replay", "--runs", steps, "--bm25", bm25_dir, "--k", 3, "--out", tmp_path / "a")
    assert code == 0 and "1 calls without a query, 2 failed calls" in stdout
    result = json.loads((tmp_path / "a" / "replay.json").read_text())
    assert [(r["call"], r["step"], r["query"]) for r in result["per_call"].values()] == [
        (1, 1, "released film"), (2, 5, "university campus")]
    assert set(read_run(tmp_path / "a" / "calls.trec")) == {"t1#1", "t1#2"}
    code, _, _ = cli("replay", "--runs", steps, "--bm25", bm25_dir, "--include-failed", "--out", tmp_path / "b")
    result = json.loads((tmp_path / "b" / "replay.json").read_text())
    assert [r["query"] for r in result["per_call"].values()] == [
        "released film", "founded company", "river city", "university campus"]
    assert result["calls"]["skipped"] == {"empty_query": 1, "failed": 0}


def test_errors_are_one_line_exit_2(bm25_replay, small_world, bm25_dir, cli, tmp_path):
    code, _, err = cli("replay", "--runs", tmp_path / "nope.jsonl", "--bm25", bm25_dir, "--out", tmp_path / "x")
    assert code == 2 and "nope.jsonl" in err and err.count("\n") == 1
    other = tmp_path / "qrels.tsv"
    other.write_text("query-id\tcorpus-id\tscore\nzz1\tw000001\t1\n")
    runs = ("--runs", small_world / "traces.jsonl", "--bm25", bm25_dir)
    code, _, err = cli("replay", *runs, "--qrels", other, "--out", tmp_path / "x")
    assert code == 2 and "none of the" in err and err.count("\n") == 1
    code, _, err = cli("replay", *runs, "--qrels", small_world / "qrels.tsv", "--k", 5, "--no-plot",
                       "--compare", bm25_replay / "replay.json", "--out", tmp_path / "k5")
    assert code == 2 and "'k'" in err and err.count("\n") == 1
    not_replay = tmp_path / "eval.json"
    not_replay.write_text(json.dumps({"manifest": {"command": "eval"}, "per_query": {}}))
    code, _, err = cli("replay", *runs, "--no-plot", "--compare", not_replay, "--out", tmp_path / "y")
    assert code == 2 and "not a replay.json" in err


@pytest.mark.shared_data
def test_shared_qampari_runs_replayed_without_qrels(shared_data, cli, tmp_path):
    from hopscotch.retriever.index.bm25 import BM25Index
    from hopscotch.retriever.io.corpus import read_corpus

    folder = shared_data / "qampari_tongyi"
    runs, snippets = folder / "runs" / "infly.jsonl", folder / "doc_snippets.jsonl"
    if not runs.is_file() or not snippets.is_file():
        pytest.skip("qampari_tongyi/runs/infly.jsonl or doc_snippets.jsonl not in the shared data")
    BM25Index.build(read_corpus(snippets), show_progress=False).save(tmp_path / "bm25")
    code, stdout, err = cli("replay", "--runs", runs, "--searcher", "bm25", "--bm25", tmp_path / "bm25", "--k", 5,
                            "--out", tmp_path / "out")
    assert code == 0, err
    assert "off-policy" in stdout and "no --qrels" in stdout
    result = json.loads((tmp_path / "out" / "replay.json").read_text())
    assert set(result["metrics"]) == {"redundancy", "calls", "unique_docs"} and result["discovery_curve"] is None
    records = [json.loads(line) for line in runs.read_text().splitlines() if line.strip()]
    assert set(result["per_trajectory"]) == {str(r["query_id"]) for r in records}
    # the replayed calls are the queries the original retriever served (the record's retrieved_docids log)
    for record in records:
        served = []
        for entry in record["retrieved_docids"]:
            for key in entry:
                query = json.loads(key)["query"]
                served += [q.strip() for q in (query if isinstance(query, list) else [query])]
        q = str(record["query_id"])
        traj = result["per_trajectory"][q]
        assert [result["per_call"][f"{q}#{n}"]["query"] for n in range(1, traj["calls"] + 1)] == served
        assert 0.0 <= traj["redundancy"] <= 1.0 and 0 < traj["unique_docs"] <= traj["retrieved"] <= 5 * len(served)
    run = read_run(tmp_path / "out" / "calls.trec")
    assert len(result["per_call"]) == result["calls"]["replayed"] == sum(t["calls"] for t in
                                                                         result["per_trajectory"].values())
    assert set(run) <= set(result["per_call"])  # a call BM25 found nothing for has no line
    assert all(row["retrieved"] == len(run.get(cid, {})) for cid, row in result["per_call"].items())
    assert result["calls"]["skipped"]["failed"] > 0


def test_missing_matplotlib_fails_before_searching_unless_no_plot(small_world, bm25_dir, cli, tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib.backends.backend_agg", None)
    runs = ("--runs", small_world / "traces.jsonl", "--qrels", small_world / "qrels.tsv", "--bm25", bm25_dir)
    code, _, err = cli("replay", *runs, "--out", tmp_path / "a")
    assert code == 2 and "matplotlib" in err and "--no-plot" in err and err.count("\n") == 1
    assert not (tmp_path / "a" / "calls.trec").exists()
    code, _, _ = cli("replay", *runs, "--no-plot", "--out", tmp_path / "b")
    result = json.loads((tmp_path / "b" / "replay.json").read_text())
    assert code == 0 and result["plot"] is None and result["metrics"]["ndcg@10"]["n"] > 0
    assert not (tmp_path / "b" / "discovery.png").exists()
