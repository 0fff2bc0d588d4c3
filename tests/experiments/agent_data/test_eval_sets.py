"""Evaluation sets of the agent ablation: non-empty, tune / test disjoint by question, records and files."""

from __future__ import annotations

import pytest

from hopscotch_experiments.agent_data import eval_sets
from hopscotch_experiments.agent_data.eval_sets import SET_NAMES, TITLES, EvalSet, build_sets
from hopscotch_experiments.agent_data.splits import WORLD_LONG, splits

pytestmark = pytest.mark.shared_data


@pytest.fixture(autouse=True)
def _data(shared_data, monkeypatch):
    monkeypatch.setenv("HOPSCOTCH_DATA", str(shared_data))


def _question(step_id: str) -> str:
    """The question of a step id (``{qid}_turn{n}`` of the trace readers, ``{qid}_hop{n}`` of MuSiQue)."""
    return step_id.rsplit("_turn", 1)[0] if "_turn" in step_id else step_id.rsplit("_hop", 1)[0]


def _check(es: EvalSet, source: str | None):
    assert es.counts["tune_steps"] == len(es.tune) > 0 and es.counts["test_steps"] == len(es.test) > 0
    assert [r["_id"] for r in es.queries] == es.tune + es.test and set(es.qrels) == set(es.tune + es.test)
    assert all(r["text"].strip() and es.qrels[r["_id"]] for r in es.queries)
    tune_q, test_q = {_question(q) for q in es.tune}, {_question(q) for q in es.test}
    assert not tune_q & test_q
    if source:
        s = splits(source)
        assert tune_q <= set(s["dev"]) and test_q <= set(s["test"])
    assert es.name in SET_NAMES and es.name in TITLES and es.labels


@pytest.mark.parametrize("name,source", [("hotpotqa", "hotpotqa_ircot"), ("musique", "musique_hipporag"),
                                         ("tongyi", "qampari_tongyi"), ("tongyi_utility", "qampari_tongyi")])
def test_set_is_held_out_and_split_by_question(name, source, tmp_path):
    es = build_sets(tmp_path, [name])[name]
    _check(es, source)
    assert es.votes == (name not in eval_sets.CALL_LEVEL)


def test_musique_queries_have_no_hop_references():
    es = eval_sets.musique()
    assert es.counts == {"tune_steps": 46, "test_steps": 73, "tune_questions": 20, "test_questions": 30}
    assert not [r["text"] for r in es.queries if "#1" in r["text"] or "#2" in r["text"]]
    assert all(r["_id"].rsplit("_hop", 1)[1].isdigit() for r in es.queries)


def test_world_long_is_built_without_the_cli(tmp_path):
    es = eval_sets.world_long(tmp_path)
    _check(es, None)
    assert es.counts["tune_questions"] == WORLD_LONG["tune"]
    assert es.counts["tune_questions"] + es.counts["test_questions"] == WORLD_LONG["questions"]
    assert {p.name for p in (tmp_path / "world_long").iterdir()} == {
        "corpus.jsonl", "queries.jsonl", "qrels.tsv", "traces.jsonl", "world.json"}
    assert all(r.get("current_reasoning") for r in es.queries)


def test_write_puts_the_four_files(tmp_path):
    es = eval_sets.musique()
    paths = es.write(tmp_path / "musique")
    assert paths["tune"].read_text().split() == es.tune and paths["test"].read_text().split() == es.test
    lines = paths["qrels"].read_text().splitlines()
    assert lines[0] == "query-id\tcorpus-id\tscore" and len(lines) == 1 + sum(len(v) for v in es.qrels.values())
    assert len(paths["queries"].read_text().splitlines()) == len(es.queries)
