"""``hopscotch bm25-index --backend auto|bm25s|disk`` and everything ``--bm25 DIR`` reaches with a disk folder:
search (plain and reasoning-aware), hybrid, serve, the plan, an identical rerun, and one-line errors (exit 2)."""

from __future__ import annotations

import json

import pytest
import requests

from hopscotch.retriever.io.runs import read_run
from hopscotch.retriever.io.queries import queries_of


@pytest.fixture(scope="module")
def built(small_world, tmp_path_factory):
    from hopscotch.retriever.cli import main

    root = tmp_path_factory.mktemp("bm25_backends")
    corpus = small_world / "corpus.jsonl"
    for backend in ("bm25s", "disk"):
        assert main(["bm25-index", "--corpus", str(corpus), "--out", str(root / backend), "--backend", backend,
                     *(["--batch-docs", "70"] if backend == "disk" else [])]) == 0
    return {"root": root, "corpus": corpus, "queries": small_world / "queries.jsonl",
            "qrels": small_world / "qrels.tsv"}


def _same_run(a, b):
    for qid in a:
        assert [round(s, 4) for s in sorted(a[qid].values(), reverse=True)] == \
               [round(s, 4) for s in sorted(b[qid].values(), reverse=True)], qid


def test_search_picks_the_backend_by_the_folder_and_both_rank_alike(built, cli, tmp_path):
    for backend in ("bm25s", "disk"):
        code, _, err = cli("search", "--queries", built["queries"], "--bm25", built["root"] / backend, "--k", 50,
                           "--out", tmp_path / f"{backend}.trec")
        assert code == 0, err
    _same_run(read_run(tmp_path / "disk.trec"), read_run(tmp_path / "bm25s.trec"))
    scores = {}
    for backend in ("bm25s", "disk"):
        code, out, _ = cli("eval", "--run", tmp_path / f"{backend}.trec", "--qrels", built["qrels"], "--metrics",
                           "ndcg@10", "--json", tmp_path / f"{backend}.json")
        scores[backend] = json.loads((tmp_path / f"{backend}.json").read_text())["metrics"]["ndcg@10"]
    assert scores["disk"] == pytest.approx(scores["bm25s"], abs=1e-9)


def test_reasoning_aware_expansion_and_hybrid_reach_the_disk_backend(built, small_world_index, tmp_path):
    from hopscotch.retriever.searchers import build_searcher

    rows = [json.loads(line) for line in built["queries"].read_text().splitlines()][:6]
    texts = [r["text"] for r in rows]
    reasonings = [f"I should look for {r['text'].split()[-1]} and its river." for r in rows]
    results = {}
    for backend in ("bm25s", "disk"):
        searcher = build_searcher("bm25", bm25=built["root"] / backend, corpus=built["corpus"])
        assert searcher.index.backend == backend
        results[backend] = searcher.search_batch(queries_of(texts, reasonings, True), 10)
    for a, b in zip(results["disk"], results["bm25s"]):
        assert [round(s, 4) for _, s in a] == [round(s, 4) for _, s in b]
    hybrid = build_searcher("hybrid", bm25=built["root"] / "disk", index=small_world_index)
    assert hybrid.bm25.index.backend == "disk"
    hits = hybrid.search(texts[0], k=5)
    assert len(hits) == 5 and all(h["text"] for h in hits)


def test_serve_answers_from_a_disk_folder(built):
    from hopscotch.retriever.searchers import build_searcher
    from hopscotch.retriever.serving.server import make_server, serve_in_thread

    searcher = build_searcher("bm25", bm25=built["root"] / "disk", corpus=built["corpus"])
    server = make_server({"w": searcher}, port=0)
    serve_in_thread(server)
    try:
        answer = requests.get(f"{server.url}/v1/w/search", params={"query": "river empire", "hits": 3},
                              timeout=30).json()
        assert len(answer["candidates"]) == 3 and answer["candidates"][0]["doc"]
        docid = answer["candidates"][0]["docid"]
        assert requests.get(f"{server.url}/v1/w/doc/{docid}", timeout=30).json()["docid"] == docid
    finally:
        server.shutdown_and_close()


def test_auto_builds_by_the_corpus_size(built, cli, tmp_path, monkeypatch):
    import hopscotch.retriever.index.bm25.memory as bm25

    assert cli("bm25-index", "--corpus", built["corpus"], "--out", tmp_path / "small")[0] == 0
    assert json.loads((tmp_path / "small" / "hopscotch_bm25.json").read_text())["backend"] == "bm25s"
    monkeypatch.setattr(bm25, "AUTO_DISK_DOCS", 100)
    code, out, _ = cli("bm25-index", "--corpus", built["corpus"], "--out", tmp_path / "large")
    assert code == 0 and "(disk)" in out
    assert json.loads((tmp_path / "large" / "hopscotch_bm25.json").read_text())["backend"] == "disk"


def test_an_identical_rerun_does_nothing_and_overwrite_rebuilds(built, cli, tmp_path):
    args = ["bm25-index", "--corpus", built["corpus"], "--out", tmp_path / "d", "--backend", "disk"]
    assert cli(*args)[0] == 0
    stamp = (tmp_path / "d" / "postings.impacts.npy").stat().st_mtime_ns
    code, out, _ = cli(*args, "--workers", 2)  # workers change nothing in the index
    assert code == 0 and "up to date" in out
    assert (tmp_path / "d" / "postings.impacts.npy").stat().st_mtime_ns == stamp
    code, out, _ = cli(*args, "--overwrite")
    assert code == 0 and "written" in out
    code, _, err = cli(*args[:-2], "--backend", "bm25s")  # another run's output
    assert code == 2 and "--overwrite" in err


def test_the_plan_prints_both_backends(built, cli):
    code, out, _ = cli("bm25-index", "--plan", "--docs", 553_000_000, "--avg-doc-bytes", 3000)
    assert code == 0 and "disk backend" in out and "bm25s backend" in out and "TiB" in out and "q/s" in out
    code, out, _ = cli("bm25-index", "--plan", "--corpus", built["corpus"])
    assert code == 0 and "measured on the first" in out and "BM25 plan: 300 documents" in out
    code, out, _ = cli("index", "--plan", "--docs", 1_000_000, "--dim", 384)
    assert code == 0 and "BM25 beside it" in out


@pytest.mark.parametrize("argv,needle", [
    (["--backend", "bm25s", "--workers", "2"], "--workers applies to the disk backend only"),
    (["--backend", "disk", "--stemmer", "klingon"], "PyStemmer has no stemmer 'klingon'"),
    (["--stopwords", "xx"], "no stopword list 'xx'"),
    (["--docs", "5"], "--docs applies to --plan only"),
    (["--backend", "disk", "--batch-docs", "0"], "--batch-docs"),
])
def test_bad_flags_are_one_line_errors(built, cli, capsys, tmp_path, argv, needle):
    try:
        code, _, err = cli("bm25-index", "--corpus", built["corpus"], "--out", tmp_path / "x", *argv)
    except SystemExit as exc:  # argparse's own refusals (a flag's type)
        code, err = exc.code, capsys.readouterr().err
    assert code == 2 and needle in err and err.count("\n") == 1
    assert not (tmp_path / "x").exists()


def test_bad_plans_and_damaged_folders_are_one_line_errors(built, cli, tmp_path):
    import shutil

    code, _, err = cli("bm25-index", "--plan")
    assert code == 2 and "--plan needs --docs N" in err and err.count("\n") == 1
    code, _, err = cli("bm25-index", "--out", tmp_path / "y")
    assert code == 2 and "--corpus" in err and err.count("\n") == 1
    damaged = tmp_path / "damaged"
    shutil.copytree(built["root"] / "disk", damaged)
    (damaged / "postings.impacts.npy").unlink()
    code, _, err = cli("search", "--queries", built["queries"], "--bm25", damaged, "--out", tmp_path / "r.trec")
    assert code == 2 and "postings.impacts.npy: missing" in err and err.count("\n") == 1
    meta = json.loads((damaged / "hopscotch_bm25.json").read_text())
    (damaged / "hopscotch_bm25.json").write_text(json.dumps({**meta, "backend": "lucene"}))
    code, _, err = cli("search", "--queries", built["queries"], "--bm25", damaged, "--out", tmp_path / "r.trec")
    assert code == 2 and "'backend' must be one of bm25s, disk" in err and err.count("\n") == 1


def test_a_merge_range_is_planned_to_hold_the_most_frequent_terms_postings():
    from hopscotch.retriever.index.bm25.plan import CorpusFigures, plan_bm25

    figures = CorpusFigures(590.0, 50.0, 60.0, top_term_share=0.5)
    rows = {item: size for _, item, size in plan_bm25(100_000_000, figures=figures)["disk"]["rows"]}
    merge = next(size for item, size in rows.items() if item.startswith("merge"))
    assert merge >= 40 * 0.5 * 100_000_000  # one term in half the documents: 2 GB, above the 800 MB range budget
    small = plan_bm25(100_000_000, figures=CorpusFigures(590.0, 50.0, 60.0, top_term_share=0.001))
    merge_small = next(s for _, item, s in small["disk"]["rows"] if item.startswith("merge"))
    assert merge_small < 40 * 20_000_000 * 1.1  # the range budget rules when no term is that frequent
