"""Trajectory-use tuples of the shared Tongyi data: train questions only, labelled by the dev sets' rule."""

from __future__ import annotations

import pytest

from hopscotch_experiments.agent_data.splits import TRAIN_EXCLUDED, splits
from hopscotch_experiments.agent_data.training_traces import TONGYI_QUESTIONS, write_training_traces
from hopscotch.data_synth.trajectory_use_synth import UseInputs, synthesize_trajectory_use
from hopscotch.data_synth.utility_labels import question_qrels
from hopscotch.retriever.io.tuples import read_training_tuples

pytestmark = pytest.mark.shared_data


def test_train_questions_only_with_the_dev_sets_labels(shared_data, tmp_path, monkeypatch):
    monkeypatch.setenv("HOPSCOTCH_DATA", str(shared_data))
    src = shared_data / "qampari_tongyi"
    write_training_traces(tmp_path)
    out = tmp_path / "tongyi_use_tuples.jsonl"
    stats = synthesize_trajectory_use(UseInputs(src / "agent_search_steps.jsonl", runs=src / "runs" / "infly.jsonl",
                                                questions=tmp_path / TONGYI_QUESTIONS), out, show_progress=False)
    tuples = read_training_tuples(out)
    question = {t.query_id: t.query_id.rsplit("_turn", 1)[0] for t in tuples}
    s = splits("qampari_tongyi")
    held = set(s["dev"]) | set(s["test"]) | set(TRAIN_EXCLUDED["qampari_tongyi"])
    assert set(question.values()) <= set(s["train"]) and not set(question.values()) & held
    assert stats["tuples"] == len(tuples) > 100 and stats["questions"] == len(s["train"])
    labels, _ = question_qrels(src / "agent_search_steps.jsonl", src / "doc_snippets.jsonl",
                               src / "runs" / "infly.jsonl")
    for t in tuples:
        used = set(labels[question[t.query_id]])
        assert {p.docid for p in t.positives} <= used and not {n.docid for n in t.negatives} & used
