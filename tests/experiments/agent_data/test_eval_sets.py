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


def test_tongyi_shapes_and_label_rules(tmp_path):
    """The harness's shape gives each call its own turn of thinking (none after a rejected call) and nothing else; the
    accumulated shape all the thinking so far; new-evidence labels drop what the trajectory was shown before."""
    from hopscotch_experiments.agent_data import tongyi_sets

    sets = build_sets(tmp_path, ["tongyi_turn", "tongyi_question", "tongyi_turn_new", "tongyi_pages_turn"])
    turn, acc, new, pages = (sets[n] for n in ("tongyi_turn", "tongyi_question", "tongyi_turn_new",
                                                "tongyi_pages_turn"))
    for es in sets.values():
        _check(es, "qampari_tongyi")
        assert es.votes and es.index_name in ("tongyi", "tongyi_pages")
    assert turn.qrels == acc.qrels and turn.tune == acc.tune and pages.tune == turn.tune
    history = tongyi_sets.trajectory_history(str(tongyi_sets._steps_path()))
    by_id = {r["_id"]: r for r in acc.queries}
    after_rejected = 0
    for row in turn.queries:
        assert set(row) == {"_id", "text", "reasoning"}
        full = by_id[row["_id"]]
        if history[row["_id"]][0]:
            after_rejected += 1
            assert row["reasoning"] is None
        else:
            assert row["reasoning"] == (full.get("current_reasoning") or None)
            assert row["reasoning"] is None or full["reasoning"].endswith(row["reasoning"])
    assert after_rejected > 0 and sum(len((r["reasoning"] or "").split()) for r in turn.queries) * 10 < sum(
        len(r["reasoning"].split()) for r in acc.queries)
    # new evidence: the question's documents the trajectory had not been shown before the call
    assert set(new.qrels) <= set(turn.qrels) and any(len(new.qrels[q]) < len(turn.qrels[q]) for q in new.qrels)
    for q, rel in new.qrels.items():
        shown = history[q][1]
        assert set(rel) <= set(turn.qrels[q]) and not set(rel) & shown
        assert set(turn.qrels[q]) - set(rel) <= shown
    # pages: the question's chunks' pages
    assert all(set(pages.qrels[q]) == {d.partition("__")[0] for d in turn.qrels[q]} for q in pages.qrels)


def test_objective_and_guards_split_the_voting_sets():
    voting = {n for n in SET_NAMES if n not in eval_sets.CALL_LEVEL}
    assert set(eval_sets.OBJECTIVE) | set(eval_sets.GUARDS) == voting
    assert not set(eval_sets.OBJECTIVE) & set(eval_sets.GUARDS)
    assert eval_sets.OBJECTIVE == ("tongyi_turn", "tongyi_pages_turn")
    assert all(n in TITLES and n in eval_sets.LABELS and n in eval_sets.BOUNDS for n in SET_NAMES)
