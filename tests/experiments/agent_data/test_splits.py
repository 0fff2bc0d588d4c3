"""Splits of the agent experiments: sizes, disjoint train / dev / test, and the audited train exclusion."""

from __future__ import annotations

import json

import pytest

from hopscotch_experiments.agent_data.splits import TRAIN_EXCLUDED, WORLD, WORLD_LONG, data_dir, splits

SOURCES = ("hotpotqa_ircot", "musique_hipporag", "qampari_tongyi")


def _write(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture
def fake_data(tmp_path, monkeypatch):
    """A data folder with only the files the splits read: 500 HotpotQA and 100 MuSiQue questions, and Tongyi
    steps of the 20 trajectories 0-20 without 2 (as the shared data), in shuffled order."""
    _write(tmp_path / "hotpotqa_ircot" / "queries.jsonl", [{"_id": f"h{i:03d}", "text": "?"} for i in range(500)])
    _write(tmp_path / "musique_hipporag" / "queries.jsonl", [{"_id": f"m{i:03d}", "text": "?"} for i in range(100)])
    ids = [str(i) for i in (7, 20, 0, 13, 5, 1, 3, 4, 5, 6, 8, 9, 10, 11, 12, 14, 15, 16, 17, 18, 19)]
    _write(tmp_path / "qampari_tongyi" / "agent_search_steps.jsonl",
           [{"query_id": q, "search_query": "x", "reasoning": ""} for q in ids])
    monkeypatch.setenv("HOPSCOTCH_DATA", str(tmp_path))
    return tmp_path


def test_data_dir_follows_the_environment(fake_data):
    assert data_dir() == fake_data


def test_sizes_order_and_tongyi_exclusion(fake_data):
    h, m, t = (splits(s) for s in SOURCES)
    assert (len(h["train"]), len(h["dev"]), len(h["test"])) == (380, 20, 100)
    assert h["train"][0] == "h000" and h["dev"][0] == "h380" and h["test"][-1] == "h499"
    assert (len(m["train"]), len(m["dev"]), len(m["test"])) == (50, 20, 30)
    # trajectories by numeric id: 0,1,3,...,9 train (5 excluded), 10-13 dev, 14-20 test
    assert t["train"] == ["0", "1", "3", "4", "6", "7", "8", "9"]
    assert t["dev"] == ["10", "11", "12", "13"]
    assert t["test"] == [str(i) for i in range(14, 21)]


def test_unknown_source_is_refused(fake_data):
    with pytest.raises(ValueError, match="unknown source"):
        splits("browsecomp_plus")


def test_exclusions_are_documented_train_ids():
    assert set(TRAIN_EXCLUDED) <= set(SOURCES)
    for source, ids in TRAIN_EXCLUDED.items():
        assert ids and all(isinstance(reason, str) and len(reason) > 20 for reason in ids.values()), source
    assert "13" in TRAIN_EXCLUDED["qampari_tongyi"]["5"]  # names the held-out trajectory it duplicates
    assert WORLD["train"] + WORLD["dev"] < WORLD["questions"] and WORLD_LONG["tune"] < WORLD_LONG["questions"]


@pytest.mark.shared_data
@pytest.mark.parametrize("source", SOURCES)
def test_shared_data_splits_are_disjoint_and_exclude_audited_ids(source, shared_data, monkeypatch):
    monkeypatch.setenv("HOPSCOTCH_DATA", str(shared_data))
    s = splits(source)
    parts = [set(s[k]) for k in ("train", "dev", "test")]
    assert all(len(p) == len(s[k]) for p, k in zip(parts, ("train", "dev", "test")))  # no id twice
    assert not (parts[0] & parts[1] or parts[0] & parts[2] or parts[1] & parts[2])
    excluded = set(TRAIN_EXCLUDED.get(source, ()))
    assert not excluded & set().union(*parts)
    sizes = {"hotpotqa_ircot": (380, 20, 100), "musique_hipporag": (50, 20, 30), "qampari_tongyi": (8, 4, 7)}
    assert tuple(len(s[k]) for k in ("train", "dev", "test")) == sizes[source]


@pytest.mark.shared_data
def test_excluded_tongyi_trajectory_duplicates_the_dev_one(shared_data):
    """Trajectory 5 (train) and 13 (dev) are both about Seattle Storm draft selections."""
    questions = dict(line.split("\t", 1) for line in
                     (shared_data / "qampari_tongyi" / "questions.tsv").read_text().splitlines() if "\t" in line)
    assert "Seattle Storm" in questions["5"] and "draft" in questions["5"]
    assert "Seattle Storm" in questions["13"] and "draft" in questions["13"]
