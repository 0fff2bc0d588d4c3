"""DR-Synth end to end: tuples, stats, determinism, workers, resume, CLI, and the HotpotQA acceptance run."""

from __future__ import annotations

import json
import re
import time

import pytest

from hopscotch.data_synth.config import SynthConfig
from hopscotch.data_synth.pipeline import SynthInputs, synthesize
from hopscotch.data_synth.worker import QuestionWorker
from hopscotch.retriever.errors import FormatError, UsageError

TUPLE_KEYS = ["query_id", "query", "reasoning", "positive_passages", "negative_passages"]


def quiet(**kw) -> SynthConfig:
    return SynthConfig(show_progress=False, **kw)


def run_world(world, out, **kw):
    return synthesize(SynthInputs(world, traces=[world / "traces.jsonl"]), out=out, config=quiet(**kw))


def rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_world_tuples_have_the_tevatron_layout_and_honest_stats(small_world, tmp_path):
    out = tmp_path / "tuples.jsonl"
    stats = run_world(small_world, out)
    traces = {(t["question_id"], t["step"]): t for t in rows(small_world / "traces.jsonl")}
    answers = {q["_id"]: q["answers"] for q in rows(small_world / "queries.jsonl")}
    qrels = {}
    for line in (small_world / "qrels.tsv").read_text().splitlines()[1:]:
        qid, docid, _ = line.split("\t")
        qrels.setdefault(qid, set()).add(docid)
    got = rows(out)
    assert len(got) == stats["steps_kept"] > 0.9 * len(traces)
    for row in got:
        # the world's steps also give their context fields (for query input variants)
        assert list(row) == TUPLE_KEYS[:3] + ["current_reasoning", "prior_queries"] + TUPLE_KEYS[3:]
        qid, step = row["query_id"].rsplit("_turn", 1)
        trace = traces[(qid, int(step))]
        assert row["query"] == trace["query"] and row["reasoning"] == trace["reasoning"]
        earlier = [traces[(qid, s)] for s in range(1, int(step))]
        assert row["prior_queries"] == list(dict.fromkeys(t["query"] for t in earlier))
        assert trace["reasoning"].endswith(row["current_reasoning"])
        assert len(row["positive_passages"]) == 1 and 1 <= len(row["negative_passages"]) <= 7
        assert row["positive_passages"][0]["docid"] in trace["gold_docids"]  # the step's own gold
        for p in row["positive_passages"] + row["negative_passages"]:
            assert list(p) == ["docid", "title", "text", "score"] and isinstance(p["score"], float)  # the oracle's
        # the gold positive outscores every negative (the oracle's gold weight, 2, beats the rest)
        assert all(n["score"] < row["positive_passages"][0]["score"] for n in row["negative_passages"])
        for n in row["negative_passages"]:
            assert n["docid"] not in qrels[qid]
            assert not any(a.lower() in f"{n['title']} {n['text']}".lower() for a in answers[qid])
    assert stats["steps_read"] == len(traces)
    assert stats["steps_kept"] + sum(stats["dropped"].values()) == stats["steps_read"]
    assert stats["positives"] == {"total": stats["steps_kept"], "gold": stats["steps_kept"], "reranked": 0}
    assert json.loads((tmp_path / "tuples.stats.json").read_text())["steps_kept"] == stats["steps_kept"]
    assert not (tmp_path / "tuples.jsonl.parts").exists()


def test_every_kept_passage_carries_the_oracles_score(small_world, tmp_path, monkeypatch):
    """The teacher of the distillation losses: the ``score`` of each written passage is the one the oracle gave that
    candidate for that step, and the trainer's reader takes it."""
    from hopscotch.data_synth.labels import Labeller
    from hopscotch.retriever.io.tuples import read_training_tuples

    given = {}
    label = Labeller.label

    def recording(self, query_id, candidates, scores, mode):
        given[query_id] = {c.docid: s for c, s in zip(candidates, scores)}
        return label(self, query_id, candidates, scores, mode)

    monkeypatch.setattr(Labeller, "label", recording)
    out = tmp_path / "tuples.jsonl"
    run_world(small_world, out, max_questions=6)
    got = rows(out)
    assert got and all(r["query_id"] in given for r in got)
    for row in got:
        for p in row["positive_passages"] + row["negative_passages"]:
            assert p["score"] == given[row["query_id"]][p["docid"]]
    read = read_training_tuples(out, scores_for="loss.distill: kl")
    assert [p.score for p in read[0].positives + read[0].negatives] == \
        [p["score"] for p in got[0]["positive_passages"] + got[0]["negative_passages"]]


def test_same_seed_same_bytes_other_seed_other_negatives(small_world, tmp_path):
    run_world(small_world, tmp_path / "a.jsonl", seed=3)
    run_world(small_world, tmp_path / "b.jsonl", seed=3)
    run_world(small_world, tmp_path / "c.jsonl", seed=4)
    a, b, c = ((tmp_path / f"{n}.jsonl").read_bytes() for n in "abc")
    assert a == b
    assert a != c
    pos = lambda data: [r["positive_passages"] for r in map(json.loads, data.decode().splitlines())]  # noqa: E731
    assert pos(a) == pos(c)  # the seed only draws negatives


def test_two_workers_write_the_same_bytes_as_one(small_world, tmp_path):
    run_world(small_world, tmp_path / "one.jsonl", workers=1)
    run_world(small_world, tmp_path / "two.jsonl", workers=2)
    assert (tmp_path / "one.jsonl").read_bytes() == (tmp_path / "two.jsonl").read_bytes()


def test_interrupted_run_resumes_to_identical_bytes(small_world, tmp_path, monkeypatch):
    run_world(small_world, tmp_path / "whole.jsonl")
    out = tmp_path / "resumed.jsonl"
    original = QuestionWorker.process
    calls = {"n": 0}

    def dying(self, question_id, steps):
        calls["n"] += 1
        if calls["n"] == 12:
            raise KeyboardInterrupt  # the process is stopped in the middle of the run
        return original(self, question_id, steps)

    monkeypatch.setattr(QuestionWorker, "process", dying)
    with pytest.raises(KeyboardInterrupt):
        run_world(small_world, out)
    parts = tmp_path / "resumed.jsonl.parts"
    assert not out.exists() and len(list(parts.glob("0*.json"))) == 11
    (parts / ".0000011.json.abc.tmp").write_text("{half a file")  # a write the kill cut short

    monkeypatch.setattr(QuestionWorker, "process", original)
    with pytest.raises(UsageError, match="--fresh"):
        run_world(small_world, out, seed=99)  # other settings must not mix with the saved work
    seen = []
    monkeypatch.setattr(QuestionWorker, "process", lambda self, q, s: seen.append(q) or original(self, q, s))
    run_world(small_world, out)
    assert out.read_bytes() == (tmp_path / "whole.jsonl").read_bytes()
    assert len(seen) == 40 - 11  # only the unfinished questions were redone
    assert not parts.exists()


def test_fresh_discards_other_work(small_world, tmp_path, monkeypatch):
    out = tmp_path / "t.jsonl"
    original = QuestionWorker.process
    monkeypatch.setattr(QuestionWorker, "process",
                        lambda self, q, s: (_ for _ in ()).throw(KeyboardInterrupt) if q.endswith("5") else
                        original(self, q, s))
    with pytest.raises(KeyboardInterrupt):
        run_world(small_world, out)
    monkeypatch.setattr(QuestionWorker, "process", original)
    run_world(small_world, out, seed=99, fresh=True)
    run_world(small_world, tmp_path / "ref.jsonl", seed=99)
    assert out.read_bytes() == (tmp_path / "ref.jsonl").read_bytes()


def test_question_only_baseline_and_drop_reasons(small_world, tmp_path):
    stats = synthesize(SynthInputs(small_world, question_only=True), out=tmp_path / "q.jsonl", config=quiet())
    got = rows(tmp_path / "q.jsonl")
    assert stats["steps_read"] == 40 and all(r["reasoning"] == "" and r["query_id"].endswith("_turn0") for r in got)
    assert all(list(r) == TUPLE_KEYS for r in got)  # no context fields to add
    traces = tmp_path / "t.jsonl"
    first = rows(small_world / "traces.jsonl")[0]
    traces.write_text("\n".join(json.dumps(r) for r in [
        {"question_id": first["question_id"], "reasoning": "r", "query": first["query"]},
        {"question_id": first["question_id"], "reasoning": "r", "query": first["query"]},
        {"question_id": first["question_id"], "reasoning": "r", "query": "  "},
        {"question_id": "not-a-question", "reasoning": "r", "query": "x"},
    ]) + "\n")
    stats = synthesize(SynthInputs(small_world, traces=[traces]), out=tmp_path / "d.jsonl", config=quiet())
    assert stats["steps_read"] == 4 and stats["steps_kept"] == 1
    assert stats["dropped"] == {"duplicate_step": 1, "empty_query": 1, "unknown_question": 1}


def test_failed_tool_calls_are_dropped_unless_asked_for(small_world, tmp_path):
    q = rows(small_world / "queries.jsonl")[0]
    traces = tmp_path / "tongyi.jsonl"
    traces.write_text(json.dumps({"query_id": q["_id"], "reasoning": "r", "search_query": ["a city", "b country"],
                                  "valid": False}) + "\n")
    inputs = SynthInputs(small_world, traces=[traces])
    assert synthesize(inputs, out=tmp_path / "a.jsonl", config=quiet())["dropped"] == {"failed_tool_call": 2}
    assert synthesize(inputs, out=tmp_path / "b.jsonl",
                      config=quiet(include_failed_calls=True))["steps_kept"] == 2


def test_duplicate_step_numbers_are_a_format_error(small_world, tmp_path):
    t = tmp_path / "t.jsonl"
    t.write_text('{"question_id": "wq00000", "step": 1, "query": "a"}\n{"question_id": "wq00000", "step": 1, '
                 '"query": "b"}\n')
    with pytest.raises(FormatError, match=r"t\.jsonl:2: expected a unique \(question, step\)"):
        synthesize(SynthInputs(small_world, traces=[t]), out=tmp_path / "o.jsonl", config=quiet())


def test_a_damaged_bm25_index_is_refused_and_leaves_no_work_files(small_world, tmp_path):
    from hopscotch.retriever.index.bm25 import BM25Index
    from hopscotch.retriever.io.corpus import read_corpus

    index = tmp_path / "bm25"
    BM25Index.build(read_corpus(small_world / "corpus.jsonl"), show_progress=False).save(index)
    (index / "vocab.index.json").write_text("{garbage")
    with pytest.raises(UsageError, match="vocab.index.json: not readable JSON"):
        synthesize(SynthInputs(small_world, traces=[small_world / "traces.jsonl"], bm25_index=index),
                   out=tmp_path / "o.jsonl", config=quiet())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bm25"]


def test_cli_synth_preview_and_errors(cli, small_world, tmp_path):
    out = tmp_path / "cli.jsonl"
    code, stdout, err = cli("synth", "--qa", small_world, "--traces", small_world / "traces.jsonl", "--out", out,
                            "--preview", "2", "--workers", "2", "--max-questions", "10")
    assert code == 0, err
    first = json.loads(out.read_text().splitlines()[0])
    assert first["query_id"] in stdout and "\n  + " in stdout and "\n  - " in stdout and "reasoning:" in stdout
    assert "steps kept" in stdout
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question_id": "wq00000", "query": "a"}\nnot json\n')
    code, _, err = cli("synth", "--qa", small_world, "--traces", bad, "--out", tmp_path / "x.jsonl")
    assert code == 2 and re.search(r"bad\.jsonl:2: expected", err) and err.count("\n") == 1
    with pytest.raises(SystemExit) as exc:  # argparse: neither --traces nor --question-only
        cli("synth", "--qa", small_world, "--out", tmp_path / "x.jsonl")
    assert exc.value.code == 2
    code, _, err = cli("synth", "--qa", small_world, "--question-only", "--out", tmp_path / "x.jsonl",
                       "--depth", "3", "--gold", "4")
    assert code == 2 and "gold" in err
    code, _, err = cli("synth", "--qa", small_world, "--question-only", "--out", tmp_path / "x.jsonl",
                       "--oracle-weights", "gold=high")
    assert code == 2 and "--oracle-weights" in err


# -- acceptance on the shared HotpotQA / IRCoT data ----------------------------------------------------------

@pytest.fixture(scope="module")
def hotpot_run(shared_data, tmp_path_factory):
    root = shared_data / "hotpotqa_ircot"
    out = tmp_path_factory.mktemp("hotpot") / "tuples.jsonl"
    t0 = time.perf_counter()
    stats = synthesize(SynthInputs(root, root / "corpus.jsonl", traces=[root / "cot_steps.jsonl"]), out=out,
                       config=quiet(reranker="lexical", workers=2))
    return root, out, stats, time.perf_counter() - t0


@pytest.mark.shared_data
def test_hotpotqa_keeps_at_least_90_percent_of_gold_steps_in_time(hotpot_run):
    _, _, stats, seconds = hotpot_run
    assert stats["steps_read"] == 3128
    assert stats["steps_with_gold_question"] == 3128
    assert stats["kept_with_gold_question"] >= 0.9 * stats["steps_with_gold_question"]
    assert seconds < 300


@pytest.mark.shared_data
def test_hotpotqa_no_gold_and_no_answer_bearing_passage_among_negatives(hotpot_run):
    root, out, stats, _ = hotpot_run
    gold: dict[str, set] = {}
    for line in (root / "qrels.tsv").read_text().splitlines()[1:]:
        qid, docid, _ = line.split("\t")
        gold.setdefault(qid, set()).add(docid)
    answers = {q["_id"]: [a for a in q["answers"] if a.lower() not in ("yes", "no")]
               for q in map(json.loads, (root / "queries.jsonl").read_text().splitlines())}
    n_neg = 0
    for row in rows(out):
        qid = row["query_id"].rsplit("_turn", 1)[0]
        assert row["positive_passages"][0]["docid"] in gold[qid]
        patterns = [re.compile(rf"(?<!\w){re.escape(a.lower())}(?!\w)") for a in answers[qid]]
        for n in row["negative_passages"]:
            n_neg += 1
            assert n["docid"] not in gold[qid], row["query_id"]
            text = f"{n['title']} {n['text']}".lower()
            assert not any(p.search(text) for p in patterns), (row["query_id"], n["docid"])
    assert n_neg == stats["negatives"]["total"] > 6 * stats["steps_kept"]


@pytest.mark.slow
def test_sigkilled_run_resumes_to_identical_bytes(tmp_path):
    """A real kill: the whole process group (parent and worker processes) gets SIGKILL halfway."""
    import os
    import signal
    import subprocess
    import sys

    from hopscotch.data_synth.world import build_world, write_world

    world = tmp_path / "world"
    write_world(build_world(seed=11, docs=2000, questions=300), world)
    base = [sys.executable, "-m", "hopscotch.retriever.cli", "synth", "--qa", str(world), "--traces",
            str(world / "traces.jsonl"), "--workers", "2"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run(base + ["--out", str(tmp_path / "ref.jsonl")], check=True, env=env, capture_output=True)
    out = tmp_path / "killed.jsonl"
    parts = tmp_path / "killed.jsonl.parts"
    proc = subprocess.Popen(base + ["--out", str(out)], env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 1800
    while proc.poll() is None and time.monotonic() < deadline:
        if parts.is_dir() and len(list(parts.glob("0*.json"))) >= 30:
            os.killpg(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.005)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    done_before = len(list(parts.glob("0*.json")))
    assert 30 <= done_before < 300 and not out.exists()
    resumed = subprocess.run(base + ["--out", str(out)], env=env, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    assert out.read_bytes() == (tmp_path / "ref.jsonl").read_bytes()
    assert json.loads((tmp_path / "killed.stats.json").read_text()) == json.loads(
        (tmp_path / "ref.stats.json").read_text())
