"""Trajectory-use labels (issue 34): used -> positive, shown and never used -> negative, BM25 negatives that are no
used document, only the questions asked for; ``hopscotch synth --mode trajectory-use`` end to end, resumed."""

from __future__ import annotations

import hashlib
import json

import pytest

from hopscotch.data_synth.trajectory_use import UseConfig, UseTupleWriter, call_uses, page_of
from hopscotch.data_synth.trajectory_use_synth import UseInputs, synthesize_trajectory_use
from hopscotch.data_synth.utility_labels import question_qrels
from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.io.tuples import read_training_tuples

SNIPPETS = {
    # question 1, call 1: vl__0 is used (its name comes back in the next reasoning); echo and early are not
    "vl__0": "[Velvet Lantern ...]\nVelvet Lantern is a 1994 drama directed by Jane Roe for Marlow Pictures.",
    "echo": "Jane Roe is a film director. Jane Roe films are often discussed by critics.",
    "early": "Quiet Harbor is a 1990 film by Jane Roe, shot on the coast.",
    # question 1, call 2: final is used (named in the final answer); other is not; vl__0 is shown again (neutral)
    "final": "Kestrelmoor Atlas is a 2001 drama directed by Jane Roe.",
    "other": "Grey Meadow is a documentary about sheep farming.",
    # question 2 (a parallel call): both used
    "zed": "Zed Corp was founded in 1950 by Olga Fenwick in Oslo.",
    "zc_77": "Zed Corp has its head office in a tall building.",
}
#: corpus-only documents: BM25 finds them for question 1's queries; vl__1 is on the used vl__0's page
EXTRA = {
    "vl__1": "Velvet Lantern: Jane Roe films director, the cast and crew of the film.",
    "jr_bio": "Jane Roe films director biography: Jane Roe is a director of later films.",
    "jr_award": "Jane Roe director won awards for her films.",
}
STEPS = [
    {"query_id": "1", "reasoning": "We need the films Jane Roe directed. I recall Quiet Harbor (1990).",
     "search_query": "Jane Roe films director", "retrieved_docids": ["vl__0", "echo", "early"], "valid": True},
    {"query_id": "1", "reasoning": "The results show Velvet Lantern by Jane Roe, and Quiet Harbor again.",
     "search_query": ["Jane Roe later films"], "retrieved_docids": ["final", "other", "vl__0"], "valid": True},
    {"query_id": "1", "reasoning": "Enough; writing the answer.", "search_query": None, "retrieved_docids": [],
     "valid": False},
    {"query_id": "2", "reasoning": "Who founded Zed Corp?", "search_query": ["Zed Corp founder", "Zed Corp history"],
     "retrieved_docids": ["zed", "zc_77"], "valid": True},
    {"query_id": "2", "reasoning": "Zed Corp was founded by Olga Fenwick (see docid zc_77).",
     "search_query": "Olga Fenwick", "retrieved_docids": [], "valid": True},
]


def _run(qid: str, reasonings: list[str], answer: str) -> dict:
    items = []
    for text in reasonings:
        items += [{"type": "reasoning", "output": text},
                  {"type": "tool_call", "tool_name": "search", "arguments": '{"query": "x"}', "output": "..."}]
    items.append({"type": "output_text", "output": answer})
    return {"query_id": qid, "status": "completed", "result": items}


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def files(tmp_path):
    root = tmp_path / "agent"
    root.mkdir()
    steps = _jsonl(root / "agent_search_steps.jsonl", STEPS)
    snippets = _jsonl(root / "doc_snippets.jsonl", [{"docid": d, "text": t} for d, t in SNIPPETS.items()])
    corpus = _jsonl(tmp_path / "corpus.jsonl", [{"_id": d, "title": "", "text": t.split("\n")[-1]}
                                               for d, t in {**SNIPPETS, **EXTRA}.items()])
    runs = _jsonl(tmp_path / "runs.jsonl", [
        _run("1", [s["reasoning"] for s in STEPS[:3]],
             "Jane Roe directed Velvet Lantern (1994) and Kestrelmoor Atlas."),
        _run("2", [s["reasoning"] for s in STEPS[3:]], "Olga Fenwick founded Zed Corp.")])
    train = tmp_path / "train_questions.txt"
    train.write_text("1\n")
    return {"steps": steps, "snippets": snippets, "corpus": corpus, "runs": runs, "train": train}


def _tuples(path):
    return {t.query_id: t for t in read_training_tuples(path)}


def test_used_is_positive_shown_and_never_used_is_negative(files):
    uses, used = call_uses(files["steps"], files["snippets"], files["runs"])
    by_call = {u.call_ids: u for u in uses}
    first, second = by_call[("1_turn1",)], by_call[("1_turn2",)]
    assert [d for d, _ in first.positives] == ["vl__0"] and first.positives[0][1] >= 1  # evidence items
    assert [d for d, _ in first.negatives] == ["echo", "early"] and not first.neutral
    assert [d for d, _ in second.positives] == ["final"] and [d for d, _ in second.negatives] == ["other"]
    assert second.neutral == ("vl__0",)  # shown again, used by the question's first call: neither label
    parallel = by_call[("2_turn1", "2_turn2")]
    assert {d for d, _ in parallel.positives} == {"zed", "zc_77"} and not parallel.negatives
    assert used == {"1": {"vl__0", "final"}, "2": {"zed", "zc_77"}}


def test_the_rule_is_the_dev_sets_rule(files):
    """One owner: a question's positives over its calls are exactly its question-level dev labels."""
    uses, used = call_uses(files["steps"], files["snippets"], files["runs"])
    dev_labels, _ = question_qrels(files["steps"], files["snippets"], files["runs"])
    assert {q: set(d) for q, d in dev_labels.items()} == used
    for q in used:
        assert {d for u in uses if u.question_id == q for d, _ in u.positives} == used[q]


def test_bm25_negatives_are_never_used_documents(files):
    out = files["steps"].parent.parent / "t.jsonl"
    stats = synthesize_trajectory_use(UseInputs(files["steps"], runs=files["runs"], corpus=files["corpus"],
                                                questions=files["train"]), out, show_progress=False)
    tuples = _tuples(out)
    assert set(tuples) == {"1_turn1", "1_turn2"}  # question 2 (not asked for) never appears
    rows = {json.loads(line)["query_id"]: json.loads(line) for line in out.read_text().splitlines()}
    for qid, t in tuples.items():
        negatives = [p.docid for p in t.negatives]
        assert not set(negatives) & {"vl__0", "final"}          # no used document of the question
        assert "vl__1" not in negatives                         # nor a chunk of a used page
        shown = [p["docid"] for p in rows[qid]["negative_passages"] if p["origin"] == "shown"]
        bm25 = [p["docid"] for p in rows[qid]["negative_passages"] if p["origin"] == "bm25"]
        assert negatives == shown + bm25 and not set(shown) & set(bm25)
    assert [p.docid for p in tuples["1_turn1"].positives] == ["vl__0"]
    assert [p["docid"] for p in rows["1_turn1"]["negative_passages"]][:2] == ["echo", "early"]
    assert {p["docid"] for p in rows["1_turn1"]["negative_passages"][2:]} == {"jr_bio", "jr_award"}
    t = tuples["1_turn2"]
    assert t.query == "Jane Roe later films" and t.reasoning.startswith("We need the films")
    assert t.current_reasoning.startswith("The results show") and t.prior_queries == ("Jane Roe films director",)
    assert stats["tuples"] == 2 and stats["questions"] == 1 and stats["questions_left_out"] == 1
    assert stats["negatives"] == {"shown": 3, "shown_with_evidence": 0, "bm25": 5, "short_of_bm25": 1,
                                  "per_tuple": 4.0}
    assert stats["neutral_shown"] == 1 and page_of("vl__1") == page_of("vl__0") == "vl"


def test_calls_without_a_used_document_are_skipped(files, tmp_path):
    steps = _jsonl(files["steps"], STEPS + [
        {"query_id": "1", "reasoning": "One more look.", "search_query": "Grey Meadow sheep",
         "retrieved_docids": ["other"], "valid": True}])
    out = tmp_path / "t.jsonl"
    stats = synthesize_trajectory_use(UseInputs(steps, runs=files["runs"], corpus=files["corpus"]), out,
                                      UseConfig(bm25_negatives=0), show_progress=False)
    assert stats["calls_without_use"] == 1 and stats["tuples"] == 4 and stats["questions"] == 2
    assert "1_turn3" not in _tuples(out)
    assert all(p["origin"] == "shown" for line in out.read_text().splitlines()
               for p in json.loads(line)["negative_passages"])


def test_an_interrupted_run_resumes_to_the_same_bytes(files, tmp_path, monkeypatch):
    inputs = UseInputs(files["steps"], runs=files["runs"], corpus=files["corpus"])
    whole = tmp_path / "whole.jsonl"
    synthesize_trajectory_use(inputs, whole, show_progress=False)
    out = tmp_path / "t.jsonl"
    real, calls = UseTupleWriter.question_lines, []

    def once(self, *args):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(self, *args)

    monkeypatch.setattr(UseTupleWriter, "question_lines", once)
    with pytest.raises(KeyboardInterrupt):
        synthesize_trajectory_use(inputs, out, show_progress=False)
    assert not out.exists() and len(list((tmp_path / "t.jsonl.parts").glob("0*.json"))) == 1
    calls.clear()
    synthesize_trajectory_use(inputs, out, show_progress=False)
    assert len(calls) == 1  # only the unfinished question was redone
    assert hashlib.sha256(out.read_bytes()).digest() == hashlib.sha256(whole.read_bytes()).digest()
    assert not (tmp_path / "t.jsonl.parts").exists()


def test_a_resume_with_other_inputs_is_refused(files, tmp_path, monkeypatch):
    inputs = UseInputs(files["steps"], runs=files["runs"], corpus=files["corpus"])
    out = tmp_path / "t.jsonl"

    def stop(self, *args):
        raise KeyboardInterrupt

    with monkeypatch.context() as mp:
        mp.setattr(UseTupleWriter, "question_lines", stop)
        with pytest.raises(KeyboardInterrupt):
            synthesize_trajectory_use(inputs, out, show_progress=False)
    with pytest.raises(UsageError, match="other settings or inputs"):
        synthesize_trajectory_use(inputs, out, UseConfig(bm25_negatives=1), show_progress=False)
    synthesize_trajectory_use(inputs, out, UseConfig(bm25_negatives=1), fresh=True, show_progress=False)
    assert all(len(t.negatives) <= 3 for t in _tuples(out).values())


def test_cli_trajectory_use_end_to_end(cli, files, tmp_path):
    out = tmp_path / "cli.jsonl"
    argv = ["synth", "--mode", "trajectory-use", "--traces", files["steps"], "--runs", files["runs"], "--corpus",
            files["corpus"], "--questions", files["train"], "--bm25-negatives", "2", "--out", out]
    code, stdout, err = cli(*argv, "--preview", "1")
    assert code == 0, err
    assert "2 tuples from 2 search calls of 1 questions" in stdout and "1_turn1" in stdout
    stats = json.loads((tmp_path / "cli.stats.json").read_text())
    assert stats["mode"] == "trajectory-use" and stats["negatives"]["bm25"] == 4
    first = out.read_bytes()
    code, _, err = cli(*argv)  # the same run again: allowed, the same bytes
    assert code == 0, err
    assert out.read_bytes() == first


@pytest.mark.parametrize("extra, needle", [
    (["--oracle", "dense"], "--oracle does not apply to --mode trajectory-use"),
    (["--qa", "x"], "--qa does not apply"),
    (["--negatives", "3"], "--negatives does not apply"),
])
def test_cli_refuses_the_other_modes_flags(cli, files, tmp_path, capsys, extra, needle):
    with pytest.raises(SystemExit) as exc:
        cli("synth", "--mode", "trajectory-use", "--traces", files["steps"], "--out", tmp_path / "x.jsonl", *extra)
    assert exc.value.code == 2 and needle in capsys.readouterr().err


def test_cli_dr_synth_refuses_trajectory_use_flags(cli, small_world, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        cli("synth", "--qa", small_world, "--question-only", "--runs", "r.jsonl", "--out", tmp_path / "x.jsonl")
    assert exc.value.code == 2 and "--runs does not apply to --mode dr-synth" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        cli("synth", "--traces", small_world / "traces.jsonl", "--out", tmp_path / "x.jsonl")
    assert exc.value.code == 2 and "--qa" in capsys.readouterr().err
