"""DR-Synth's candidates from the first stage an agent is served (``--candidates``): reasoning-aware BM25 by default
(the BM25 searcher with its default expansion, as ``hopscotch search --reasoning``), plain BM25 kept by a flag, the
reasoning-aware hybrid over a dense index. Each is tested as the plain candidates are: the window is the stage's top
``depth`` with the gold put in (scored in the stage's own scale), the false-negative guard holds (no gold, no
answer-bearing passage, no near-duplicate of a positive among the negatives), the output is deterministic, and the
stats and the work files' manifest record which source mined the candidates."""

from __future__ import annotations

import json
import re

import pytest

from hopscotch.data_synth.candidates import CandidateGenerator
from hopscotch.data_synth.config import SynthConfig
from hopscotch.data_synth.first_stage import ReasoningBM25, first_stage, step_queries
from hopscotch.data_synth.pipeline import SynthInputs, synthesize
from hopscotch.data_synth.traces import read_traces
from hopscotch.retriever.errors import UsageError


@pytest.fixture(scope="module")
def world_index(small_world):
    from hopscotch.retriever.index.bm25 import BM25Index
    from hopscotch.retriever.io.corpus import read_corpus

    return BM25Index.build(read_corpus(small_world / "corpus.jsonl"), show_progress=False)


def _steps(small_world, n=12):
    steps = [s for s in read_traces([small_world / "traces.jsonl"], "world") if s.reasoning.strip()]
    assert len(steps) >= n
    return steps[:n]


def test_reasoning_aware_windows_are_the_bm25_searchers_own_lists(small_world, world_index):
    from hopscotch.retriever.searchers.bm25 import BM25Searcher
    from hopscotch.retriever.searchers.bm25_expansion import DEFAULT_BM25_EXPANSION

    stage = first_stage("bm25-reasoning", world_index)
    assert isinstance(stage, ReasoningBM25) and stage.searcher.expansion is DEFAULT_BM25_EXPANSION
    steps = _steps(small_world)
    gen = CandidateGenerator(world_index, depth=10, max_gold=0, stage=stage)
    windows = gen.windows([s.query for s in steps], [[] for _ in steps], contexts=steps)
    want = BM25Searcher(world_index).search_batch(step_queries([s.query for s in steps], steps), 10)
    plain = world_index.search([s.query for s in steps], k=10)
    for window, hits in zip(windows, want):
        assert [(d, s) for d, s, _ in window] == sorted(hits, key=lambda h: (-h[1], h[0]))
    assert any([d for d, _, _ in w] != [d for d, _ in p] for w, p in zip(windows, plain))  # the reasoning counts
    # a step without reasoning is plain BM25, exactly
    [alone] = gen.windows([steps[0].query], [[]], contexts=[None])
    assert [(d, s) for d, s, _ in alone] == sorted(plain[0], key=lambda h: (-h[1], h[0]))


def test_a_gold_document_not_retrieved_gets_the_expanded_querys_exact_score(small_world, world_index):
    stage = first_stage("bm25-reasoning", world_index)
    step = _steps(small_world, 1)[0]
    hits = dict(stage.search([step.query], [step], 5)[0])
    outside = [d for d, _ in stage.search([step.query], [step], 200)[0] if d not in hits][-1]
    [window] = CandidateGenerator(world_index, depth=5, max_gold=1, stage=stage).windows([step.query], [[outside]],
                                                                                        contexts=[step])
    gold = [(d, s) for d, s, g in window if g]
    parts = stage.searcher.expansion.text_parts(step.query, step)
    exact = world_index.weighted_scores(world_index.term_weights(parts))[world_index.row(outside)]
    assert gold == [(outside, pytest.approx(float(exact)))] and len(window) == 5
    assert stage.score_documents(step.query, None, [outside], {}) == [
        pytest.approx(float(world_index.score_documents(step.query, [outside])[0]))]  # no reasoning: plain BM25


def _synth(world, out, **kw):
    inputs = {k: kw.pop(k) for k in ("candidate_index",) if k in kw}
    return synthesize(SynthInputs(world, traces=[world / "traces.jsonl"], **inputs), out=out,
                      config=SynthConfig(show_progress=False, **kw))


def _rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def _guarded(small_world, rows):
    """The false-negative guard on every tuple: no gold, no answer-bearing negative (the answer as whole words)."""
    answers = {q["_id"]: q["answers"] for q in _rows(small_world / "queries.jsonl")}
    qrels = {}
    for line in (small_world / "qrels.tsv").read_text().splitlines()[1:]:
        qid, docid, _ = line.split("\t")
        qrels.setdefault(qid, set()).add(docid)
    for row in rows:
        qid = row["query_id"].rsplit("_turn", 1)[0]
        for n in row["negative_passages"]:
            assert n["docid"] not in qrels[qid]
            text = f"{n['title']} {n['text']}"
            assert not any(re.search(rf"\b{re.escape(a)}\b", text, re.IGNORECASE) for a in answers[qid])


def test_synth_mines_reasoning_aware_negatives_by_default_and_plain_ones_on_request(small_world, tmp_path):
    aware = _synth(small_world, tmp_path / "aware.jsonl")
    plain = _synth(small_world, tmp_path / "plain.jsonl", candidates="bm25")
    assert aware["candidates"]["source"] == "bm25-reasoning" and plain["candidates"]["source"] == "bm25"
    assert aware["candidates"]["first_stage"].startswith("reasoning-aware bm25 query x")
    assert aware["candidates"]["steps_searched_with_reasoning"] > 0.5 * aware["steps_read"]
    assert plain["candidates"]["steps_searched_with_reasoning"] == 0
    assert aware["config"]["candidates"] == "bm25-reasoning" and "candidates" not in plain["config"]
    assert aware["negatives"]["false_negative_rate"] == plain["negatives"]["false_negative_rate"] == 0.0
    a, p = _rows(tmp_path / "aware.jsonl"), _rows(tmp_path / "plain.jsonl")
    _guarded(small_world, a)
    _guarded(small_world, p)
    negatives = lambda rows: {r["query_id"]: [n["docid"] for n in r["negative_passages"]] for r in rows}  # noqa: E731
    na, np_ = negatives(a), negatives(p)
    changed = sum(na[q] != np_[q] for q in set(na) & set(np_))
    assert changed > 0.3 * len(set(na) & set(np_))  # other hard negatives for most steps
    again = tmp_path / "again.jsonl"
    _synth(small_world, again)
    assert again.read_bytes() == (tmp_path / "aware.jsonl").read_bytes()


def test_the_hybrid_mines_from_bm25_and_a_dense_index(small_world, small_world_index, tmp_path):
    stats = _synth(small_world, tmp_path / "hybrid.jsonl", candidates="hybrid", candidate_index=small_world_index)
    assert stats["candidates"]["source"] == "hybrid" and "reasoning-aware hybrid" in stats["candidates"]["first_stage"]
    assert stats["steps_kept"] > 0 and stats["negatives"]["false_negative_rate"] == 0.0
    _guarded(small_world, _rows(tmp_path / "hybrid.jsonl"))
    with pytest.raises(UsageError, match="--candidates hybrid needs --candidate-index"):
        _synth(small_world, tmp_path / "h2.jsonl", candidates="hybrid")
    with pytest.raises(UsageError, match="--candidate-index is the hybrid's dense half"):
        _synth(small_world, tmp_path / "h3.jsonl", candidate_index=small_world_index)


def test_a_resumed_run_must_mine_with_the_same_source(small_world, tmp_path, monkeypatch):
    from hopscotch.data_synth import pipeline

    out = tmp_path / "t.jsonl"
    calls = {"n": 0}
    real = pipeline._run_task

    def crash_after_two(task):
        calls["n"] += 1
        if calls["n"] > 2:
            raise KeyboardInterrupt
        return real(task)

    monkeypatch.setattr(pipeline, "_run_task", crash_after_two)
    with pytest.raises(KeyboardInterrupt):
        _synth(small_world, out)
    monkeypatch.setattr(pipeline, "_run_task", real)
    with pytest.raises(UsageError, match="other settings or inputs"):
        _synth(small_world, out, candidates="bm25")
    stats = _synth(small_world, out)
    assert stats["candidates"]["source"] == "bm25-reasoning"


def test_cli_candidates_flags(cli, small_world, tmp_path, capsys):
    code, out, err = cli("synth", "--qa", small_world, "--traces", small_world / "traces.jsonl", "--candidates", "bm25",
                         "--out", tmp_path / "t.jsonl")
    assert code == 0, err
    assert "candidates: bm25 (the query alone)" in out
    assert json.loads((tmp_path / "t.stats.json").read_text())["candidates"]["source"] == "bm25"
    code, _, err = cli("synth", "--qa", small_world, "--traces", small_world / "traces.jsonl", "--candidates", "hybrid",
                       "--out", tmp_path / "h.jsonl")
    assert code == 2 and "--candidates hybrid needs --candidate-index" in err and len(err.strip().splitlines()) == 1
    with pytest.raises(SystemExit) as exc:  # argparse's own error (exit 2)
        cli("synth", "--mode", "trajectory-use", "--traces", small_world / "traces.jsonl", "--candidates", "bm25",
            "--out", tmp_path / "u.jsonl")
    assert exc.value.code == 2 and "--candidates does not apply to --mode trajectory-use" in capsys.readouterr().err
