"""The dense searcher's query mix (``--query-mix W``): W * reasoning-aware + (1 - W) * query-only scores."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hopscotch.retriever.io.queries import queries_of


@pytest.fixture(scope="module")
def steps(small_world):
    """The small world's queries as agent steps: half with a reasoning (and prior queries), half without."""
    rows = [json.loads(line) for line in (small_world / "queries.jsonl").read_text().splitlines()][:16]
    queries = [r["text"] for r in rows]
    reasonings = [f"Earlier I looked up {r['text'].split()[0]}; now {r['text'].split()[-1]} matters."
                  if i % 2 == 0 else None for i, r in enumerate(rows)]
    return queries, reasonings


def _search(index, model, queries, reasonings, **options):
    from hopscotch.retriever.searchers import build_searcher

    searcher = build_searcher("dense", index=index, model=model, **options)
    return searcher.search_batch(queries_of(queries, reasonings, True), 10)


def _brute_force(index, model, queries, reasonings, w, k=10):
    """Score every document by w * <q_r, d> + (1 - w) * <q_q, d> from the shard vectors."""
    from hopscotch.retriever.index.layout import IndexMeta, ShardIds, load_shard_embeddings
    from hopscotch.retriever.model.dense_encoder import DenseEncoder

    meta = IndexMeta.load(index)
    emb = np.concatenate([np.asarray(load_shard_embeddings(index, s), np.float32) for s in range(meta.num_shards)])
    enc = DenseEncoder(model, max_length=meta.max_length)
    q_r = enc.encode_queries(queries, reasonings, reasoning_aware=True)
    q_q = enc.encode_queries(queries, None, reasoning_aware=False)
    scores = w * (q_r @ emb.T) + (1 - w) * (q_q @ emb.T)
    ids = ShardIds(index, meta)
    out = []
    for row in scores:
        top = np.argsort(-row, kind="stable")[:k]
        out.append({ids.docid(int(r)): float(row[r]) for r in top})
    return out


def test_weight_one_is_reasoning_aware_and_zero_is_query_only(small_world_index, tiny_bert_dir, steps):
    queries, reasonings = steps
    aware = _search(small_world_index, tiny_bert_dir, queries, reasonings)
    plain = _search(small_world_index, tiny_bert_dir, queries, reasonings, query_input="query")
    assert aware != plain
    assert _search(small_world_index, tiny_bert_dir, queries, reasonings, late_fusion=1.0) == aware
    assert _search(small_world_index, tiny_bert_dir, queries, reasonings, late_fusion=0.0) == plain


@pytest.mark.parametrize("w", [0.3, 0.7])
def test_between_ranks_by_the_weighted_score(small_world_index, tiny_bert_dir, steps, w):
    queries, reasonings = steps
    got = _search(small_world_index, tiny_bert_dir, queries, reasonings, late_fusion=w)
    expected = _brute_force(small_world_index, tiny_bert_dir, queries, reasonings, w)
    aware = _search(small_world_index, tiny_bert_dir, queries, reasonings)
    plain = _search(small_world_index, tiny_bert_dir, queries, reasonings, query_input="query")
    assert got != aware and got != plain
    for hits, exp in zip(got, expected):
        scores = [s for _, s in hits]
        assert scores == sorted(scores, reverse=True)
        for docid, score in hits:
            if docid in exp:
                assert score == pytest.approx(exp[docid], abs=1e-5)
        # the same top 10 up to ties at the cut
        tenth = min(exp.values())
        assert {d for d, s in exp.items() if s > tenth + 1e-5} <= {d for d, _ in hits}
    # queries without reasoning ("Reasoning: Empty") are fused too; plain-only queries are untouched
    unaware = _search(small_world_index, tiny_bert_dir, queries, None, late_fusion=w)
    assert unaware != plain


def test_late_fusion_flag_belongs_to_the_dense_searcher(cli, small_world_index, tiny_bert_dir, small_world,
                                                          tmp_path):
    from hopscotch.retriever.io.runs import read_run

    queries = tmp_path / "q.jsonl"
    rows = [json.loads(line) for line in (small_world / "queries.jsonl").read_text().splitlines()][:8]
    for row in rows:
        row["reasoning"] = f"I wonder about {row['text'].split()[-1]}."
    queries.write_text("".join(json.dumps(r) + "\n" for r in rows))
    common = ("search", "--queries", queries, "--index", small_world_index, "--model", tiny_bert_dir, "--k", 10)
    runs = {name: tmp_path / f"{name}.trec" for name in ("aware", "one", "half", "plain")}
    assert cli(*common, "--reasoning", "--out", runs["aware"])[0] == 0
    assert cli(*common, "--reasoning", "--query-mix", 1, "--out", runs["one"])[0] == 0
    assert cli(*common, "--reasoning", "--query-mix", 0.5, "--out", runs["half"])[0] == 0
    code, _, err = cli(*common, "--query-mix", 0.5, "--out", runs["plain"])  # no --reasoning: plain queries
    assert code == 2 and "--query-mix changes reasoning-aware queries only" in err  # the weight would do nothing
    assert runs["aware"].read_text() == runs["one"].read_text()
    assert read_run(runs["half"]) != read_run(runs["aware"])
    code, _, err = cli(*common, "--reasoning", "--query-mix", 1.5, "--out", tmp_path / "bad.trec")
    assert code == 2 and "--query-mix: expected a weight in [0, 1]" in err


def _recorded(tmp_path, tiny_bert_dir, **config):
    """A copy of the tiny model with a hopscotch_config.json recording ``config`` (a 'trained' folder)."""
    import shutil

    folder = tmp_path / "model"
    shutil.copytree(tiny_bert_dir, folder)
    (folder / "hopscotch_config.json").write_text(json.dumps({"query_input": "reasoning", "query_max_len": 128,
                                                              "passage_max_len": 128, **config}))
    return folder


def test_recorded_late_fusion_is_the_default(small_world_index, tiny_bert_dir, steps, tmp_path):
    queries, reasonings = steps
    model = _recorded(tmp_path, tiny_bert_dir, late_fusion=0.5)
    explicit = _search(small_world_index, model, queries, reasonings, query_input="reasoning", late_fusion=0.5)
    assert _search(small_world_index, model, queries, reasonings) == explicit
    # choosing the variant (or the weight) here turns the recorded default off
    aware = _search(small_world_index, model, queries, reasonings, query_input="reasoning")
    assert aware != explicit
    assert aware == _search(small_world_index, model, queries, reasonings, query_input="reasoning", late_fusion=1.0)


def _close(got, expected, tol=1e-5):
    """The same documents in the same order, scores equal up to float noise (encodings of one text in
    differently composed batches agree to ~1e-7)."""
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert [d for d, _ in g] == [d for d, _ in e]
        assert np.allclose([s for _, s in g], [s for _, s in e], atol=tol)


def test_reasoning_longer_than_the_word_limit_is_searched_with_the_query_alone(small_world_index, tiny_bert_dir,
                                                                               steps, tmp_path):
    queries, reasonings = steps  # even steps have an 8-word reasoning, odd ones none ('Reasoning: Empty')
    plain = _search(small_world_index, tiny_bert_dir, queries, reasonings, query_input="query")
    fused = _search(small_world_index, tiny_bert_dir, queries, reasonings, late_fusion=0.7)
    aware = _search(small_world_index, tiny_bert_dir, queries, reasonings)
    long_ones = [i for i, r in enumerate(reasonings) if r]

    def mixed(over, under):  # the steps over the limit from `over`, the others from `under`
        return [over[i] if i in long_ones else under[i] for i in range(len(queries))]

    _close(_search(small_world_index, tiny_bert_dir, queries, reasonings, late_fusion=0.7,
                   late_fusion_max_words=7), mixed(plain, fused))
    _close(_search(small_world_index, tiny_bert_dir, queries, reasonings, late_fusion=0.7,
                   late_fusion_max_words=8), fused)
    # a limit alone gates the full reasoning-aware search (w = 1 up to the limit)
    _close(_search(small_world_index, tiny_bert_dir, queries, reasonings, late_fusion_max_words=8), aware)
    _close(_search(small_world_index, tiny_bert_dir, queries, reasonings, late_fusion_max_words=7),
           mixed(plain, aware))
    # recorded in the model: the same gate by default
    model = _recorded(tmp_path, tiny_bert_dir, late_fusion=0.7, late_fusion_max_words=7)
    own = _search(small_world_index, model, queries, reasonings)
    _close(own, _search(small_world_index, model, queries, reasonings, query_input="reasoning", late_fusion=0.7,
                        late_fusion_max_words=7))
    only_query = _search(small_world_index, model, queries, reasonings, query_input="query")
    _close([own[i] for i in long_ones], [only_query[i] for i in long_ones])


@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_bad_word_limit_is_a_usage_error(small_world_index, tiny_bert_dir, bad):
    from hopscotch.retriever.errors import UsageError
    from hopscotch.retriever.searchers import build_searcher

    with pytest.raises(UsageError, match="query-mix-max-words"):
        build_searcher("dense", index=small_world_index, model=tiny_bert_dir, late_fusion_max_words=bad)


def test_contexts_over_the_word_limit_get_the_long_weight(small_world_index, tiny_bert_dir, steps, tmp_path):
    """--query-mix-long W: contexts over --query-mix-max-words are searched at weight W instead of the query
    alone (W = 0 is the old gate); recorded in a model, it is the default as the other two are."""
    queries, reasonings = steps
    long_ones = [i for i, r in enumerate(reasonings) if r]
    fused = {w: _search(small_world_index, tiny_bert_dir, queries, reasonings, late_fusion=w) for w in (0.2, 0.7)}
    got = _search(small_world_index, tiny_bert_dir, queries, reasonings, late_fusion=0.7, late_fusion_max_words=7,
                  late_fusion_long=0.2)
    _close(got, [fused[0.2][i] if i in long_ones else fused[0.7][i] for i in range(len(queries))])
    zero = _search(small_world_index, tiny_bert_dir, queries, reasonings, late_fusion=0.7, late_fusion_max_words=7,
                   late_fusion_long=0.0)
    _close(zero, _search(small_world_index, tiny_bert_dir, queries, reasonings, late_fusion=0.7,
                         late_fusion_max_words=7))
    model = _recorded(tmp_path, tiny_bert_dir, late_fusion=0.7, late_fusion_max_words=7, late_fusion_long=0.2)
    _close(_search(small_world_index, model, queries, reasonings), got)


def test_a_long_weight_needs_a_word_limit_and_a_weight(small_world_index, tiny_bert_dir):
    from hopscotch.retriever.errors import UsageError
    from hopscotch.retriever.searchers import build_searcher

    with pytest.raises(UsageError, match="--query-mix-long weighs contexts over --query-mix-max-words"):
        build_searcher("dense", index=small_world_index, model=tiny_bert_dir, late_fusion=0.5, late_fusion_long=0.2)
    with pytest.raises(UsageError, match="--query-mix-long"):
        build_searcher("dense", index=small_world_index, model=tiny_bert_dir, late_fusion_max_words=5,
                       late_fusion_long=1.5)
