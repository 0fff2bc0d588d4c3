"""The one MuSiQue hop conversion: ``#k`` resolved, reasoning lines, prior queries / results, ids; and on the
shared data, the training traces and the evaluation set write the same step for the same hop."""

from __future__ import annotations

import json
import re

import pytest

from hopscotch_experiments.agent_data import eval_sets, training_traces
from hopscotch_experiments.agent_data.musique_hops import musique_steps, resolve
from hopscotch_experiments.agent_data.splits import splits
from hopscotch.data_synth.traces import read_traces

Q = "Who founded the company that employs the author of Book X?"


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture
def root(tmp_path):
    _write(tmp_path / "corpus.jsonl", [{"_id": "p1", "title": "Book X", "text": "Book X was written by Ann Lee."},
                                       {"_id": "p2", "title": "Ann Lee", "text": "Ann Lee works for Acme ."},
                                       {"_id": "p3", "title": "Acme", "text": "Acme was founded by Bo Chan."}])
    rows = [  # hops out of order, and a second question whose first paragraph is not in the corpus
        {"qid": "q1", "hop": 3, "question": Q, "subquestion": "Who founded #2 ?", "subanswer": "Bo Chan",
         "positive": "p3"},
        {"qid": "q1", "hop": 1, "question": Q + " ", "subquestion": "Who wrote Book X ?", "subanswer": " Ann Lee ",
         "positive": "p1"},
        {"qid": "q1", "hop": 2, "question": Q, "subquestion": "Which  company employs #1 ?", "subanswer": "Acme",
         "positive": "p2"},
        {"qid": "q2", "hop": 1, "question": "Q2?", "subquestion": "First ?", "subanswer": "A", "positive": "gone"},
        {"qid": "q2", "hop": 2, "question": "Q2?", "subquestion": "Then #1 and #3 ?", "subanswer": "B",
         "positive": "p2"},
    ]
    _write(tmp_path / "subquestion_pairs.jsonl", rows)
    return tmp_path


def test_resolve_replaces_known_answers_and_tidies_spaces():
    assert resolve("Who was the first president of #1 ?", {1: "APA"}) == "Who was the first president of APA?"
    assert resolve("Is #2 in  #1 , or not ?", {1: "Peru"}) == "Is #2 in Peru, or not?"


def test_hops_resolve_k_and_carry_the_context(root):
    hops = musique_steps(root)
    assert list(hops) == ["q1", "q2"]
    h1, h2, h3 = hops["q1"]
    assert [h.hop for h in hops["q1"]] == [1, 2, 3]
    assert [h.step_id for h in hops["q1"]] == ["q1_hop1", "q1_hop2", "q1_hop3"]
    assert [h.query for h in hops["q1"]] == ["Who wrote Book X?", "Which company employs Ann Lee?",
                                              "Who founded Acme?"]
    assert [h.gold_docid for h in hops["q1"]] == ["p1", "p2", "p3"]
    assert h1.reasoning == Q and h1.current_reasoning == Q and h1.prior_queries == () and h1.prior_results is None
    assert h3.reasoning == f"{Q}\nWho wrote Book X? Answer: Ann Lee.\nWhich company employs Ann Lee? Answer: Acme."
    assert h3.current_reasoning == "Which company employs Ann Lee? Answer: Acme."
    assert h3.prior_queries == ("Who wrote Book X?", "Which company employs Ann Lee?")
    assert h2.prior_results == ({"title": "Book X", "snippet": "Book X was written by Ann Lee."},)
    assert h3.prior_results == ({"title": "Ann Lee", "snippet": "Ann Lee works for Acme ."},)
    # a reference to a hop not answered yet stays; a previous paragraph missing from the corpus gives None
    q2 = hops["q2"]
    assert q2[1].query == "Then A and #3?" and q2[1].prior_results is None


def test_qids_select_and_order_questions(root):
    assert list(musique_steps(root, ["q2", "missing", "q1"])) == ["q2", "q1"]


def test_trace_fields_and_query_record_agree(root):
    h = musique_steps(root, ["q1"])["q1"][1]
    fields = h.trace_fields()
    assert list(fields) == ["question_id", "step", "reasoning", "query", "current_reasoning", "prior_queries",
                            "prior_results", "gold_docids"]
    assert fields["step"] == 2 and fields["gold_docids"] == ["p2"] and fields["prior_queries"] == ["Who wrote Book X?"]
    record = eval_sets.step_record(h.step_id, h)
    assert record["_id"] == "q1_hop2" and record["text"] == fields["query"] == "Which company employs Ann Lee?"
    assert record["reasoning"] == fields["reasoning"] and record["prior_results"] == fields["prior_results"]
    first = eval_sets.step_record("q1_hop1", musique_steps(root, ["q1"])["q1"][0])
    assert "prior_results" not in first and first["prior_queries"] == []


@pytest.mark.shared_data
def test_training_traces_and_eval_set_write_the_same_hops(shared_data, tmp_path, monkeypatch):
    """Both consumers over the same (held-out) questions: the same query, reasoning and context per hop."""
    monkeypatch.setenv("HOPSCOTCH_DATA", str(shared_data))
    real = splits("musique_hipporag")
    held_out = real["dev"] + real["test"]
    monkeypatch.setattr(training_traces, "splits", lambda source: {**real, "train": held_out})
    n = training_traces.musique_traces(tmp_path / "musique.jsonl")
    traced = {f"{s.question_id}_hop{s.step}": s for s in read_traces([tmp_path / "musique.jsonl"], "generic")}
    es = eval_sets.musique()
    assert n == len(traced) >= len(es.queries) > 100
    for row in es.queries:
        step = traced[row["_id"]]
        assert row["text"] == step.query and not re.search(r"#\d", row["text"])
        assert row["reasoning"] == step.reasoning and row["current_reasoning"] == step.current_reasoning
        assert row["prior_queries"] == list(step.prior_queries)
        assert row.get("prior_results") == (None if step.prior_results is None else list(step.prior_results))
        assert es.qrels[row["_id"]] == {d: 1 for d in step.gold_docids}


def test_a_malformed_hop_names_file_and_line(root):
    from hopscotch.retriever.errors import FormatError

    with (root / "subquestion_pairs.jsonl").open("a") as fh:
        fh.write(json.dumps({"qid": "q3", "hop": "first", "question": "?", "subquestion": "?", "subanswer": "a",
                             "positive": "p1"}) + "\n")
    with pytest.raises(FormatError, match=r"subquestion_pairs\.jsonl:6"):
        musique_steps(root)
