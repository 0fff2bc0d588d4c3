"""Multi-vector reranking over any first stage: MaxSim scores, a permutation of the first stage's top depth,
late fusion, windows, the on-disk token cache (hit, invalidated by another model) and the CLI flags."""

from __future__ import annotations

import json

import pytest
import torch

from hopscotch.retriever.io.runs import read_run
from hopscotch.retriever.io.queries import queries_of


@pytest.fixture(scope="module")
def world(small_world, tiny_bert_dir, tmp_path_factory):
    """A BM25 index of the small world, 6 of its queries (half with reasoning) and two saved tiny multi-vector
    models that differ only in their projection's seed."""
    from hopscotch.retriever.cli import main
    from hopscotch.retriever.model.multi_vector import build_multi_vector_model

    root = tmp_path_factory.mktemp("rerank")
    corpus = small_world / "corpus.jsonl"
    assert main(["bm25-index", "--corpus", str(corpus), "--out", str(root / "bm25")]) == 0
    rows = [json.loads(line) for line in (small_world / "queries.jsonl").read_text().splitlines()][:6]
    for i, row in enumerate(rows):
        if i % 2 == 0:
            row["reasoning"] = f"I should look up facts about {row['text'].split()[-1]} first, then the rest."
    queries = root / "queries.jsonl"
    queries.write_text("".join(json.dumps(r) + "\n" for r in rows))
    models = []
    for seed in (0, 1):
        model = build_multi_vector_model(tiny_bert_dir, dim=16, query_max_len=48, passage_max_len=64,
                                         query_augmentation=16, seed=seed, device="cpu")
        model.save(root / f"mv{seed}")
        models.append(model)
    return {"root": root, "corpus": corpus, "bm25": root / "bm25", "queries": queries, "rows": rows,
            "models": models, "mv": root / "mv0", "other": root / "mv1"}


def first_stage(world):
    from hopscotch.retriever.searchers import build_searcher

    return build_searcher("bm25", bm25=str(world["bm25"]), corpus=str(world["corpus"]))


def texts(world):
    return [r["text"] for r in world["rows"]], [r.get("reasoning") for r in world["rows"]]


def direct_scores(model, query, reasoning, docs, late_fusion=None):
    """MaxSim computed here from the model's own encodings (documents rounded to float16 as the reranker does)."""
    from hopscotch.retriever.model.multi_vector import late_fusion_scores, maxsim

    d = [e.half().float() for e in model.encode_documents([(doc.get("title"), doc["text"]) for doc in docs])]
    q = model.encode_queries([query], [reasoning], reasoning_aware=reasoning is not None)[0]
    if late_fusion is None:
        return maxsim(q, d)
    plain = model.encode_queries([query], reasoning_aware=False)[0]
    return late_fusion_scores(q, plain, d, late_fusion)


@pytest.mark.parametrize("late_fusion", [None, 0.3])
def test_reranked_lists_are_maxsim_permutations_of_the_first_stage(world, late_fusion):
    from hopscotch.retriever.searchers.rerank import MultiVectorReranker, RerankedSearcher

    model = world["models"][0]
    first = first_stage(world)
    # the pure MaxSim reorder (first_weight 0; the default interpolates with the first stage: the next test)
    searcher = RerankedSearcher(first, MultiVectorReranker(model, depth=12, late_fusion=late_fusion, first_weight=0.0))
    queries, reasonings = texts(world)
    aware = [r is not None for r in reasonings]
    reranked = searcher.search_batch(queries_of(queries, reasonings, aware), 12)
    top5 = searcher.search_batch(queries_of(queries, reasonings, aware), 5)
    before = first.search_batch(queries_of(queries, reasonings, aware), 12)  # the first stage sees the reasoning too
    for q, r, ranked, short, cands in zip(queries, reasonings, reranked, top5, before):
        assert sorted(d for d, _ in ranked) == sorted(d for d, _ in cands)  # a permutation of the top depth
        assert short == ranked[:5]
        scores = [s for _, s in ranked]
        assert scores == sorted(scores, reverse=True)
        expected = direct_scores(model, q, r, [first.get_document(d) for d, _ in ranked], late_fusion)
        assert torch.allclose(torch.tensor(scores), expected, atol=1e-5)
    assert [d for d, _ in reranked[1]] != [d for d, _ in before[1]]  # it did reorder
    hits = searcher.search(queries[0], 3, reasonings[0])  # the harness interface goes through it too
    assert [h["docid"] for h in hits] == [d for d, _ in reranked[0][:3]] and hits[0]["text"]


def test_first_weight_interpolates_min_max_normalised_scores(world):
    """``first_weight`` w: each candidate scores w * minmax(first stage) + (1 - w) * minmax(MaxSim) over the query's
    candidates (computed here by hand); w = 1 keeps the first stage's order, w = 0 is the MaxSim reorder."""
    from hopscotch.retriever.searchers.rerank import MultiVectorReranker, RerankedSearcher

    model, first = world["models"][0], first_stage(world)
    queries, reasonings = texts(world)
    before = first.search_batch(queries, 10)
    pure = RerankedSearcher(first, MultiVectorReranker(model, depth=10, first_weight=0.0)).search_batch(queries, 10)
    default = RerankedSearcher(first, MultiVectorReranker(model, depth=10)).search_batch(queries, 10)
    kept = RerankedSearcher(first, MultiVectorReranker(model, depth=10, first_weight=1.0)).search_batch(queries, 10)
    mixed = RerankedSearcher(first, MultiVectorReranker(model, depth=10, first_weight=0.4)).search_batch(queries, 10)

    def minmax(pairs):
        lo, hi = min(v for _, v in pairs), max(v for _, v in pairs)
        return {d: (v - lo) / (hi - lo) if hi > lo else 0.0 for d, v in pairs}

    for cands, got in zip(before, kept):  # the first stage's order (up to its ties)
        f = minmax(cands)
        assert sorted(d for d, _ in got) == sorted(f)
        assert [round(f[d], 6) for d, _ in got] == sorted((round(v, 6) for v in f.values()), reverse=True)

    for cands, maxsim, got in zip(before, pure, mixed):
        f, m = minmax(cands), minmax(maxsim)
        want = {d: 0.4 * f[d] + 0.6 * m[d] for d in f}
        order = [d for d, _ in got]
        assert sorted(order) == sorted(want)
        assert [round(want[d], 6) for d in order] == sorted((round(v, 6) for v in want.values()), reverse=True)
    assert any([d for d, _ in a] != [d for d, _ in b] for a, b in zip(mixed, pure))
    from hopscotch.retriever.searchers.rerank import DEFAULT_FIRST_WEIGHT

    assert DEFAULT_FIRST_WEIGHT == 0.25  # chosen on the question-level dev sets (docs/benchmarks.md)
    for cands, maxsim, got in zip(before, pure, default):  # the default interpolates with that weight
        f, m = minmax(cands), minmax(maxsim)
        want = {d: 0.25 * f[d] + 0.75 * m[d] for d in f}
        assert [round(want[d], 6) for d, _ in got] == sorted((round(v, 6) for v in want.values()), reverse=True)


def test_cache_is_hit_the_second_time_and_not_shared_with_another_model(world, tmp_path):
    from hopscotch.retriever.model.multi_vector import load_multi_vector_model
    from hopscotch.retriever.searchers.rerank import MultiVectorReranker, RerankedSearcher

    encoded = []

    def counting(model):
        original = model.encode_documents

        def encode_documents(documents, batch_size=32):
            encoded.append(len(documents))
            return original(documents, batch_size)

        model.encode_documents = encode_documents
        return model

    queries, reasonings = texts(world)
    first = first_stage(world)
    candidates = {d for hits in first.search_batch(queries_of(queries, reasonings, True), 10) for d, _ in hits}
    cache = tmp_path / "cache"

    def run(model, **kw):
        searcher = RerankedSearcher(first, MultiVectorReranker(counting(model), depth=10, cache_dir=cache, **kw))
        encoded.clear()
        return searcher.search_batch(queries_of(queries, reasonings, True), 10), sum(encoded)

    model = load_multi_vector_model(world["mv"], device="cpu")
    fresh, n_fresh = run(model)
    assert n_fresh == len(candidates)
    cached, n_cached = run(load_multi_vector_model(world["mv"], device="cpu"))  # a new process would do the same
    assert n_cached == 0 and cached == fresh
    other, n_other = run(load_multi_vector_model(world["other"], device="cpu"))  # another model: its own entries
    assert n_other == len(candidates) and other != fresh
    _, n_windows = run(model, windows=3)  # other windows: other vectors
    assert n_windows >= len(candidates)
    assert len([p for p in cache.iterdir() if p.is_dir()]) == 3
    about = json.loads(next(cache.glob("*/cache.json")).read_text())
    assert about["dtype"] == "float16" and about["dim"] == 16


def test_long_documents_score_by_their_best_window(world):
    from hopscotch.retriever.model.multi_vector import maxsim
    from hopscotch.retriever.searchers.rerank import MultiVectorReranker

    model = world["models"][0]
    reranker = MultiVectorReranker(model, depth=5, windows=16, window_stride=64)  # stride: capped to the budget
    body = " ".join(f"word{i} filler text about nothing in particular." for i in range(60))
    doc = {"title": "Long", "text": body + " Harmony Korine directed Gummo in Nashville."}
    vectors = reranker.document_vectors(["long"], lambda _: doc)["long"]
    assert 8 <= len(vectors) < 16  # ~550 tokens in windows of ~58
    q = model.encode_queries(["who directed Gummo in Nashville"], reasoning_aware=False)[0]
    per_window = maxsim(q, vectors)
    assert reranker.scorer.scores(q, None, [vectors]) == [pytest.approx(float(per_window.max()), abs=1e-6)]
    windows = reranker._windows_of({"docid": "long", **doc})
    assert windows[0] == ("Long", doc["text"]) and windows[-1][1].endswith("directed Gummo in Nashville.")


def test_cli_reranks_any_first_stage(cli, world, small_world_index, tiny_bert_dir, tmp_path):
    common = ["--queries", world["queries"], "--k", 8, "--rerank-model", world["mv"], "--rerank-depth", 15,
              "--rerank-cache", tmp_path / "cache", "--reasoning"]
    first = tmp_path / "bm25.trec"
    assert cli("search", "--queries", world["queries"], "--bm25", world["bm25"], "--corpus", world["corpus"],
               "--k", 15, "--out", first, "--reasoning")[0] == 0   # the first stage: reasoning-aware BM25
    code, out, err = cli("search", *common, "--bm25", world["bm25"], "--corpus", world["corpus"],
                         "--out", tmp_path / "bm25_rr.trec")
    assert code == 0, err
    assert "reranking the top 15 by MaxSim" in err and "(bm25+rerank)" in out
    reranked, before = read_run(tmp_path / "bm25_rr.trec"), read_run(first)
    assert list(reranked) == list(before) and all(len(v) == 8 for v in reranked.values())
    assert all(set(reranked[q]) <= set(before[q]) for q in reranked)
    code, _, err = cli("search", *common, "--index", small_world_index, "--model", tiny_bert_dir,
                       "--rerank-query-mix", 0.5, "--out", tmp_path / "dense_rr.trec")
    assert code == 0, err
    assert "query mix 0.5" in err and all(len(v) == 8 for v in read_run(tmp_path / "dense_rr.trec").values())


@pytest.mark.parametrize("flags, message", [
    (["--rerank-depth", "0"], "argument --rerank-depth: expected an integer >= 1, got '0'"),
    (["--rerank-query-mix", "2"], "argument --rerank-query-mix"),
    (["--rerank-first-weight", "1.5"], "argument --rerank-first-weight"),
    (["--rerank-first-weight", "0.5"], "--rerank-first-weight needs --rerank-model"),
    (["--rerank-depth", "5"], "--rerank-depth needs --rerank-model"),
])
def test_cli_bad_rerank_flags_exit_2_with_one_line(cli, capsys, world, tmp_path, flags, message):
    try:  # argparse's own errors exit; the others return 2
        code, _, err = cli("search", "--queries", world["queries"], "--bm25", world["bm25"], "--corpus",
                           world["corpus"], "--out", tmp_path / "run.trec", *flags)
    except SystemExit as exc:
        code, err = exc.code, capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err


def test_cli_refuses_a_single_vector_rerank_model(cli, world, tiny_bert_dir, tmp_path):
    code, _, err = cli("search", "--queries", world["queries"], "--bm25", world["bm25"], "--corpus",
                       world["corpus"], "--out", tmp_path / "run.trec", "--rerank-model", tiny_bert_dir)
    assert code == 2 and "not a multi-vector" in err and len(err.strip().splitlines()) == 1
