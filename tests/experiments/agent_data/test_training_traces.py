"""Training traces of the agent experiments: the same bytes on every run, and no held-out (or excluded)
question in any file."""

from __future__ import annotations

import hashlib
import json

import pytest

from hopscotch_experiments.agent_data.splits import TRAIN_EXCLUDED, splits
from hopscotch_experiments.agent_data.training_traces import (
    FILES,
    TONGYI_QRELS,
    TONGYI_QUESTIONS,
    TONGYI_TOP,
    write_training_traces,
)
from hopscotch.data_synth.traces import read_traces

pytestmark = pytest.mark.shared_data
SOURCES = {"hotpot_traces.jsonl": "hotpotqa_ircot", "musique_traces.jsonl": "musique_hipporag",
           "tongyi_traces.jsonl": "qampari_tongyi"}


@pytest.fixture(scope="module")
def written(shared_data, tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOPSCOTCH_DATA", str(shared_data))
        out = [tmp_path_factory.mktemp(f"traces{i}") for i in range(2)]
        counts = [write_training_traces(o) for o in out]
        held = {src: set(splits(src)["dev"]) | set(splits(src)["test"]) | set(TRAIN_EXCLUDED.get(src, ()))
                for src in SOURCES.values()}
        train = {src: set(splits(src)["train"]) for src in SOURCES.values()}
    return out, counts, held, train


def test_same_bytes_twice(written):
    (a, b), (ca, cb), _, _ = written
    assert ca == cb and set(ca) == set(FILES) and all(n > 0 for n in ca.values())
    for name in (*FILES, TONGYI_QRELS, TONGYI_QUESTIONS):
        assert hashlib.sha256((a / name).read_bytes()).digest() == hashlib.sha256((b / name).read_bytes()).digest()
    assert sorted(p.name for p in a.iterdir()) == sorted([*FILES, TONGYI_QRELS, TONGYI_QUESTIONS])  # no temp file left


def test_only_train_questions(written):
    (out, _), (counts, _), held, train = written
    for name, src in SOURCES.items():
        steps = list(read_traces([out / name]))
        assert len(steps) == counts[name]
        qids = {s.question_id for s in steps}
        assert qids and qids <= train[src] and not qids & held[src], name
    qrels_qids = {line.split("\t")[0] for line in (out / TONGYI_QRELS).read_text().splitlines()[1:]}
    assert qrels_qids and not qrels_qids & held["qampari_tongyi"] and "5" not in qrels_qids
    questions = (out / TONGYI_QUESTIONS).read_text().split()
    assert questions == splits("qampari_tongyi")["train"] and not set(questions) & held["qampari_tongyi"]


def test_tongyi_gold_is_the_agents_top(written):
    (out, _), _, _, _ = written
    rows = [json.loads(line) for line in (out / "tongyi_traces.jsonl").read_text().splitlines()]
    assert all(0 < len(r["gold_docids"]) <= TONGYI_TOP and r["query"] for r in rows)
    qrels = {tuple(line.split("\t")[:2]) for line in (out / TONGYI_QRELS).read_text().splitlines()[1:]}
    assert all((r["question_id"], d) in qrels for r in rows for d in r["gold_docids"])
