"""``hopscotch audit false-negatives``: planted answer-bearing and near-duplicate negatives are flagged, a clean one
is not; the second-model rule; sources, oracles, sampling; exit codes; synth records the rate in its stats."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from hopscotch.data_synth.false_negative_audit import audit_false_negatives, question_of, sample_negatives, source_name

POSITIVE = ("Zorblat Institute was founded in 1887 by the shipbuilder Amara Venn. It lies in the city of Quellport "
            "on the northern coast, and its library holds the first charts of the Quell estuary.")
FOOTER = " Last edited 2021."
CLEAN = "Marrow Bay is a fishing village on the southern coast known for its lighthouse and its winter market."
ANSWER_BEARING = "The harbour of Quellport was dredged in 1902, long after the college had moved to the hills."


def _tuple(qid: str, negatives: dict[str, str], query: str = "where is the college founded by Amara Venn",
           **extra) -> dict:
    return {"query_id": qid, "query": query, "reasoning": "I need the college first.",
            "positive_passages": [{"docid": "pos", "title": "Zorblat Institute", "text": POSITIVE}],
            "negative_passages": [{"docid": d, "title": t[0], "text": t[1]} if isinstance(t, tuple)
                                  else {"docid": d, "title": "", "text": t} for d, t in negatives.items()], **extra}


def _write(path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


@pytest.fixture
def qa(tmp_path):
    folder = tmp_path / "qa"
    folder.mkdir()
    _write(folder / "queries.jsonl", [{"_id": "q1", "text": "In which city is the college founded by Amara Venn?",
                                       "answer": "Quellport", "answer_aliases": ["Quell Port"]},
                                      {"_id": "q2", "text": "Is Marrow Bay a village?", "answers": ["yes"]}])
    return folder


@pytest.fixture
def planted(tmp_path):
    return _write(tmp_path / "planted_tuples.jsonl", [_tuple("q1_turn1", {
        "n_answer": ANSWER_BEARING, "n_dup": ("Zorblat Institute", POSITIVE + FOOTER), "n_clean": CLEAN})])


def _flags(report) -> dict[str, list[str]]:
    return {e["negative"]["docid"]: e["rules"] for e in report.details["worst_examples"]}


def test_planted_answer_and_near_duplicate_are_flagged_and_the_clean_negative_is_not(planted, qa):
    report = audit_false_negatives([planted], qa_dirs=[qa], sample=10, model=None)
    flags = _flags(report)
    assert flags["n_answer"] == ["answer"]
    assert flags["n_dup"] == ["answer", "near_duplicate"]  # the copy of the positive holds the answer too
    assert "n_clean" not in flags
    row = report.details["per_source"]["planted"]
    assert row["sampled"] == 3 and row["false_negatives"] == 2 and row["rate"] == pytest.approx(2 / 3, abs=1e-4)
    assert row["flagged"] == {"answer": 2, "near_duplicate": 1}
    assert report.verdict == "fail" and report.exit_code == 2
    worst = report.details["worst_examples"][0]
    assert worst["negative"]["docid"] == "n_dup" and worst["jaccard"] >= 0.8 and worst["answer"] == "quellport"
    assert "FAIL" in report.summary_text()


def test_near_duplicate_alone_and_clean_file_passes(tmp_path):
    # no QA: the answer rule has nothing to match, the footer copy is still a near-duplicate
    dup = ("Zorblat Institute", POSITIVE + FOOTER)
    path = _write(tmp_path / "t.jsonl", [_tuple("x1", {"n_dup": dup, "n_clean": CLEAN})])
    flags = _flags(audit_false_negatives([path], sample=10, model=None))
    assert flags == {"n_dup": ["near_duplicate"]}
    clean = _write(tmp_path / "clean.jsonl", [_tuple("x1", {"n_clean": CLEAN})])
    report = audit_false_negatives([clean], sample=10, model=None)
    assert report.verdict == "ok" and report.details["overall"]["rate"] == 0.0
    assert "no answers" in report.summary_text()


def test_answers_carried_by_the_row_and_uninformative_answers(tmp_path, qa):
    rows = [_tuple("r1", {"n": ANSWER_BEARING}, answers=["Quellport"]),
            _tuple("q2_turn1", {"n2": CLEAN + " Yes, it is."})]  # answer 'yes' says nothing about a passage
    flags = _flags(audit_false_negatives([_write(tmp_path / "t.jsonl", rows)], qa_dirs=[qa], sample=10, model=None))
    assert flags == {"n": ["answer"]}


def _bag_of_words(texts):
    vocab: dict[str, int] = {}
    rows = [Counter(w.strip(".,").lower() for w in t.split()) for t in texts]
    for row in rows:
        for w in row:
            vocab.setdefault(w, len(vocab))
    out = np.zeros((len(texts), len(vocab)), dtype=np.float32)
    for i, row in enumerate(rows):
        for w, c in row.items():
            out[i, vocab[w]] = c
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def test_second_model_rule_closer_to_the_positive_than_the_query(tmp_path):
    sibling = POSITIVE.replace("Zorblat", "Marrow").replace("1887", "1890")  # same page shape, other college
    path = _write(tmp_path / "t.jsonl", [_tuple("x1", {"sibling": sibling, "n_clean": CLEAN})])
    report = audit_false_negatives([path], sample=10, encode=_bag_of_words, near_duplicate=0.95)
    flags = _flags(report)
    assert flags == {"sibling": ["closer_to_positive"]}
    row = report.details["per_source"]["t"]
    assert row["rate"] == 0.0 and row["suspect_rate"] == 0.5 and report.verdict == "warning"
    assert report.details["worst_examples"][0]["margin"] > 0
    assert "closer_to_positive" in report.details["rules"]


def test_sources_oracles_and_seeded_sampling(tmp_path):
    rows = [_tuple(f"x{i}", {f"n{i}_{j}": f"{CLEAN} variant {i} {j}" for j in range(4)}) for i in range(10)]
    a = _write(tmp_path / "alpha_tuples.jsonl", rows)
    (tmp_path / "alpha_tuples.stats.json").write_text(json.dumps({"config": {"reranker": "dense"}}))
    b = _write(tmp_path / "beta.jsonl", [{**r, "source": "gamma", "oracle": "llm"} for r in rows[:3]])
    report = audit_false_negatives([a, b], sample=5, seed=3, model=None)
    assert set(report.details["per_source"]) == {"alpha", "gamma"}
    assert set(report.details["per_oracle"]) == {"dense", "llm"}
    assert report.details["per_source"]["alpha"]["sampled"] == 5
    assert report.details["per_source"]["alpha"]["negatives"] == 40
    first, _ = sample_negatives([a], {}, 5, seed=3)
    again, _ = sample_negatives([a], {}, 5, seed=3)
    other, _ = sample_negatives([a], {}, 5, seed=4)
    ids = lambda items: [i.neg.docid for i in items]
    assert ids(first) == ids(again) and ids(first) != ids(other)


def test_question_ids_and_source_names():
    known = {"5a8c": [], "2hop__15_16": []}
    assert question_of({}, "5a8c_turn3", known) == "5a8c"
    assert question_of({}, "2hop__15_16_turn1", known) == "2hop__15_16"
    assert question_of({"question_id": "zz"}, "5a8c_turn3", known) == "zz"
    assert question_of({}, "nope_turn1", known) is None
    assert source_name("out/hotpot_tuples.jsonl") == "hotpot" and source_name("x/tongyi.jsonl.gz") == "tongyi"


def test_cli_exit_codes_and_report(cli, planted, qa, tmp_path, tiny_bert_dir):
    report_path = tmp_path / "r.json"
    code, out, _ = cli("audit", "false-negatives", "--tuples", planted, "--qa", qa, "--model", "none",
                       "--report", report_path)
    assert code == 2 and "audit false-negatives: FAIL" in out
    assert json.loads(report_path.read_text())["details"]["per_source"]["planted"]["false_negatives"] == 2
    code, out, _ = cli("audit", "false-negatives", "--tuples", planted, "--qa", qa, "--model", "none",
                       "--max-rate", "0.9")
    assert code == 0 and "OK" in out
    clean = _write(tmp_path / "clean.jsonl", [_tuple("x1", {"n_clean": CLEAN})])
    code, out, _ = cli("audit", "false-negatives", "--tuples", clean, "--model", tiny_bert_dir)
    assert code == 0 and "closer" in out and "suspect" in out
    assert cli("audit", "false-negatives", "--tuples", tmp_path / "missing.jsonl")[0] == 2
    with pytest.raises(SystemExit) as exc:
        cli("audit", "false-negatives", "--tuples", clean, "--max-rate", "2")
    assert exc.value.code == 2


def test_synth_records_the_false_negative_rate(small_world, tmp_path):
    from hopscotch.data_synth.config import SynthConfig
    from hopscotch.data_synth.labels import LabelConfig, LabelResult
    from hopscotch.data_synth.oracles.base import Candidate
    from hopscotch.data_synth.pipeline import SynthInputs, synthesize
    from hopscotch.data_synth.worker import QuestionWorker

    stats = synthesize(SynthInputs(small_world, question_only=True), out=tmp_path / "t.jsonl",
                       config=SynthConfig(show_progress=False, max_questions=5))
    assert stats["negatives"]["total"] > 0 and stats["negatives"]["false_negative_rate"] == 0.0  # the guard holds
    worker = QuestionWorker.__new__(QuestionWorker)
    worker.labeller = type("L", (), {"config": LabelConfig()})()
    pos = Candidate("p", "Zorblat Institute", POSITIVE)
    result = LabelResult([pos], [Candidate("a", "", ANSWER_BEARING, has_answer=True),
                                 Candidate("d", "Zorblat Institute", POSITIVE + FOOTER), Candidate("c", "", CLEAN)])
    assert worker._false_negatives(result) == 2
