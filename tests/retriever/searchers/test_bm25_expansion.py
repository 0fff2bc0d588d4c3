"""Reasoning-aware BM25 (searchers/bm25_expansion.py): the expansion rule, its exact equality with plain BM25
when there is no reasoning, its equality with bm25s's own scoring of the repeated query text, and the paths
that carry a reasoning to it (search_batch, hybrid, harness calls, AgentIR's template, the CLI)."""

from __future__ import annotations

import pytest

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.index.bm25 import BM25Index
from hopscotch.retriever.io.corpus import Document
from hopscotch.retriever.searchers.bm25 import BM25Searcher
from hopscotch.retriever.searchers.bm25_expansion import DEFAULT_BM25_EXPANSION, BM25Expansion
from hopscotch.retriever.io.queries import Query, queries_of
from hopscotch.retriever.searchers.harness import harness_query

DOCS = [
    ("d0", "Harmony Korine directed the film Gummo in Nashville"),
    ("d1", "Gummo is a 1997 film set in Xenia, Ohio after a tornado"),
    ("d2", "The Seattle Storm drafted a guard from Stanford"),
    ("d3", "Xenia is a city in Greene County, Ohio, hit by tornadoes"),
    ("d4", "A director of photography lit the film in Tennessee"),
    ("d5", "Stanford guards and forwards in the WNBA draft"),
]
QUERY = "film director"
REASONING = "The question mentions a tornado town. Earlier pages said Gummo was set in Xenia, Ohio."


@pytest.fixture(scope="module")
def index() -> BM25Index:
    return BM25Index.build([Document(d, "", t) for d, t in DOCS], show_progress=False)


def test_expansion_parts_and_validation():
    e = BM25Expansion.parse("reasoning_tail:4", 3)
    assert e.text_parts("q", "one two three four five six") == (("q", 3.0), ("three four five six", 1.0))
    assert e.text_parts("q", None) is None and e.text_parts("q", "   ") is None
    assert BM25Expansion.parse("query").text_parts("q", "anything") is None   # off
    ctx = Query("q", "all of it", current_reasoning="just now", reasoning_aware=True)
    assert BM25Expansion.parse("current_reasoning").expansion_text("q", ctx) == "just now"
    assert BM25Expansion.parse("reasoning").expansion_text("q", ctx) == "all of it"
    for weight in (0, -1, float("nan"), float("inf")):
        with pytest.raises(UsageError, match="--bm25-query-weight"):
            BM25Expansion.parse("reasoning", weight)
    with pytest.raises(UsageError, match="--bm25-reasoning"):
        BM25Expansion.parse("reasoning_tail")
    assert DEFAULT_BM25_EXPANSION.enabled


def test_no_reasoning_is_plain_bm25_exactly(index):
    searcher = BM25Searcher(index)
    queries = [QUERY, "Xenia tornado", "Stanford draft guard"]
    plain = index.search(queries, k=6)
    assert searcher.search_batch(queries, 6) == plain
    assert searcher.search_batch(queries_of(queries, [None, "", "  "], True), 6) == plain
    assert searcher.search_batch(queries_of(queries, [REASONING] * 3, False), 6) == plain
    # AgentIR's template with an empty reasoning, read at the harness edge: the bare query, never the template's words
    templated = [harness_query(f"Reasoning: Empty\n\nQuery: {q}") for q in queries]
    assert searcher.search_batch(templated, 6) == plain


def test_weighted_query_equals_bm25s_on_the_repeated_text(index):
    """query_weight n + reasoning == bm25s scoring the text 'q q ... q reasoning' (each occurrence counts)."""
    expansion = BM25Expansion.parse("reasoning", 3)
    parts = expansion.text_parts(QUERY, REASONING)
    ours = index.search_weighted([parts], k=6)[0]
    repeated = index.search([" ".join([QUERY] * 3 + [REASONING])], k=6)[0]
    assert [d for d, _ in ours] == [d for d, _ in repeated]
    assert [s for _, s in ours] == pytest.approx([s for _, s in repeated], rel=1e-5)
    # weight 1 without reasoning text: the plain query's own scores
    one, plain = index.search_weighted([((QUERY, 1.0),)], k=6)[0], index.search([QUERY], k=6)[0]
    assert [d for d, _ in one] == [d for d, _ in plain]
    assert [s for _, s in one] == pytest.approx([s for _, s in plain], rel=1e-5)


def test_reasoning_moves_the_ranking(index):
    searcher = BM25Searcher(index, expansion=BM25Expansion.parse("reasoning", 1))
    plain = [d for d, _ in searcher.search_batch([QUERY], 3)[0]]
    expanded = [d for d, _ in searcher.search_batch(queries_of([QUERY], [REASONING], True), 3)[0]]
    assert plain[0] in ("d0", "d4") and expanded[0] == "d1"   # the film set in Xenia, which only the reasoning names
    # per-query flags: only the aware query is expanded
    mixed = searcher.search_batch(queries_of([QUERY, QUERY], [REASONING, REASONING], [False, True]), 3)
    assert [d for d, _ in mixed[0]] == plain and [d for d, _ in mixed[1]] == expanded
    # AgentIR's reasoning-aware client sends the template as the query, read at the harness edge: the same as
    # query + reasoning; a searcher itself never parses it (a plain string is a plain query)
    templated = searcher.search_batch([harness_query(f"Reasoning: {REASONING}\n\nQuery: {QUERY}")], 3)[0]
    assert [d for d, _ in templated] == expanded
    # the harness call search(query, k, reasoning)
    assert [h["docid"] for h in searcher.search(QUERY, 3, REASONING)] == expanded
    assert searcher.takes_reasoning and not BM25Searcher(index, expansion=BM25Expansion.parse("query")).takes_reasoning


def test_cli_flags_reach_the_searcher(index, tmp_path, cli):
    import json

    folder = tmp_path / "bm25"
    index.save(folder)
    queries = tmp_path / "q.jsonl"
    queries.write_text(json.dumps({"_id": "q1", "text": QUERY, "reasoning": REASONING}) + "\n")
    runs = {}
    for name, flags in {"plain": [], "default": ["--reasoning"],
                        "whole": ["--reasoning", "--bm25-reasoning", "reasoning", "--bm25-query-weight", "1"],
                        "off": ["--reasoning", "--bm25-reasoning", "query"]}.items():
        out = tmp_path / f"{name}.trec"
        code, _, err = cli("search", "--bm25", folder, "--queries", queries, "--k", 3, "--out", out, *flags)
        assert code == 0, err
        runs[name] = [line.split()[2] for line in out.read_text().splitlines()]
    assert runs["off"] == runs["plain"] and runs["whole"][0] == "d1"
    with pytest.raises(SystemExit) as exit_:   # argparse's own refusal: one line, exit 2
        cli("search", "--bm25", folder, "--queries", queries, "--out", tmp_path / "x.trec", "--reasoning",
            "--bm25-query-weight", "0")
    assert exit_.value.code == 2
    code, _, err = cli("search", "--bm25", folder, "--queries", queries, "--out", tmp_path / "y.trec", "--reasoning",
                       "--bm25-reasoning", "reasoning_tail:x")
    assert code == 2 and "--bm25-reasoning" in err
    assert not (tmp_path / "y.trec").exists()


# -- term selection, saturation, normalised weight ------------------------------------------------------------
LONG = ("Gummo Gummo Gummo was set in Xenia, Ohio. The tornado hit Xenia. Gummo again, and the film's director "
        "Harmony Korine. The film the film the film.")


def test_term_query_selects_saturates_and_normalises(index):
    stats = index.term_stats()
    df = dict(zip(["gummo", "xenia", "film", "tornado"], stats.frequencies(["gummo", "xenia", "film", "tornado"])))
    assert df["film"] > df["gummo"] >= 1 and df["xenia"] == 2
    raw = BM25Expansion.parse("reasoning", 2.0, k3=None, terms=None, weight=None)
    assert raw.raw_bag and not BM25Expansion.parse("reasoning", terms=3).raw_bag
    # saturation: (k3 + 1) tf / (k3 + tf) in place of tf (gummo 4 times, k3 1.2: 2.2 * 4 / 5.2)
    sat = BM25Expansion.parse("reasoning", 1.0, k3=1.2).term_query("director", LONG, stats)
    assert sat.weights["gummo"] == pytest.approx(2.2 * 4 / 5.2) and sat.weights["director"] == pytest.approx(
        1.0 + 2.2 / 2.2)   # the query's own term plus its one occurrence in the text
    # selection: the top 2 by saturated tf x idf; an unknown word ("harmony"? in d0: known) never outranks its idf
    top = BM25Expansion.parse("reasoning", 1.0, terms=2, k3=1.2).term_query("director", LONG, stats)
    chosen = set(top.weights) - {"director"}
    import math

    from hopscotch.retriever.index.bm25.term_stats import idf
    counts = stats.analyzer.counts(LONG)
    score = {t: 2.2 * n / (1.2 + n) * idf(f, stats.num_docs) for t, n in counts.items()
             if (f := stats.frequencies([t])[0]) > 0}
    assert chosen == set(sorted(score, key=lambda t: -score[t])[:2]) and len(chosen) == 2
    assert all(math.isfinite(w) and w > 0 for w in top.weights.values())
    # normalised weight: the text's terms sum to R x the query's total weight
    norm = BM25Expansion.parse("reasoning", 1.0, terms=3, weight=2.5).term_query("film director", LONG, stats)
    extra = sum(w for t, w in norm.weights.items()) - 2.0   # the query: two terms of weight 1 ...
    assert extra == pytest.approx(2.5 * 2.0)                  # ... and the text's terms, 2.5 x 2
    # a term unknown to the index is never selected
    odd = BM25Expansion.parse("reasoning", 1.0, terms=5).term_query("film", "zzqx zzqx zzqx Xenia", stats)
    assert "zzqx" not in odd.weights and "xenia" in odd.weights
    # words: what an endpoint is sent for each term (kept only for an index that analyses text itself)
    import dataclasses

    assert top.words == {}
    worded = BM25Expansion.parse("reasoning", 1.0, terms=3, weight=2.5).term_query(
        "film directors", LONG, dataclasses.replace(stats, words=True))
    assert worded.words["director"] == "directors" and worded.words.get("xenia") == "xenia"
    assert worded.weights == pytest.approx(BM25Expansion.parse("reasoning", 1.0, terms=3, weight=2.5).term_query(
        "film directors", LONG, stats).weights)
    assert BM25Expansion.parse("reasoning", terms=3).term_query("film", "   ", stats) is None
    for bad, flag in ((dict(terms=0), "--bm25-terms"), (dict(terms=2.5), "--bm25-terms"),
                      (dict(weight=0), "--bm25-reasoning-weight"), (dict(k3=-1), "--bm25-k3")):
        with pytest.raises(UsageError, match=flag):
            BM25Expansion.parse("reasoning", 1.0, **bad)


def test_raw_bag_term_query_scores_as_the_weighted_texts(index):
    """The raw bag through term_query scores exactly as text_parts through the index (one rule, two spellings)."""
    e = BM25Expansion.parse("reasoning", 3.0)
    q = e.term_query(QUERY, REASONING, index.term_stats())
    a = index.search_terms([q], k=6)[0]
    b = index.search_weighted([e.text_parts(QUERY, REASONING)], k=6)[0]
    assert [d for d, _ in a] == [d for d, _ in b] and [s for _, s in a] == pytest.approx([s for _, s in b])


def test_term_expansion_is_the_same_on_both_backends(tmp_path):
    from hopscotch.retriever.index.bm25 import load_bm25_index
    from hopscotch.retriever.index.bm25.disk_build import DiskBuildOptions, build_disk_index

    docs = [Document(d, "", t) for d, t in DOCS]
    build_disk_index(docs, tmp_path / "disk", "fp", DiskBuildOptions(batch_docs=2, merge_postings=10, block=2,
                                                                     workers=1))
    mem, disk = BM25Index.build(docs, show_progress=False), load_bm25_index(tmp_path / "disk")
    assert mem.term_stats().frequencies(["xenia", "gummo", "nope"]) == disk.term_stats().frequencies(
        ["xenia", "gummo", "nope"]) == [2.0, 2.0, 0.0]
    e = BM25Expansion.parse("reasoning", 1.0, terms=4, weight=3.0, k3=1.2)
    a = BM25Searcher(mem, expansion=e).search_batch(queries_of([QUERY, "draft"], [LONG, REASONING], True), 6)
    b = BM25Searcher(disk, expansion=e).search_batch(queries_of([QUERY, "draft"], [LONG, REASONING], True), 6)
    for x, y in zip(a, b):
        assert [d for d, _ in x] == [d for d, _ in y] and [s for _, s in x] == pytest.approx([s for _, s in y],
                                                                                           rel=1e-5)


def test_remote_term_text_repeats_words_by_weight():
    from hopscotch.retriever.searchers.bm25_expansion import TermQuery
    from hopscotch.retriever.searchers.remote_bm25 import TERM_REPEAT_STEPS, term_text

    text, divisor = term_text(TermQuery({"film": 1.0, "xenia": 0.5, "gummo": 0.1, "zero": 0.0},
                                        {"film": "films", "xenia": "Xenia"}))
    assert divisor == TERM_REPEAT_STEPS == 4
    assert text.split() == ["films"] * 4 + ["Xenia"] * 2 + ["gummo"]   # at least once; no word for weight 0


def test_cli_term_flags_reach_the_searcher(index, tmp_path, cli):
    import json

    folder = tmp_path / "bm25"
    index.save(folder)
    queries = tmp_path / "q.jsonl"
    queries.write_text(json.dumps({"_id": "q1", "text": QUERY, "reasoning": LONG}) + "\n")
    out = tmp_path / "terms.trec"
    code, _, err = cli("search", "--bm25", folder, "--queries", queries, "--k", 3, "--out", out, "--reasoning",
                       "--bm25-reasoning", "reasoning", "--bm25-terms", "3", "--bm25-reasoning-weight", "2",
                       "--bm25-k3", "1.2")
    assert code == 0, err
    expected = BM25Searcher(index, expansion=BM25Expansion.parse("reasoning", 1.0, terms=3, weight=2.0, k3=1.2)
                            ).search_batch(queries_of([QUERY], [LONG], True), 3)[0]
    assert [line.split()[2] for line in out.read_text().splitlines()] == [d for d, _ in expected]
