"""Bad input, round 2: values that parse but cannot be right, and comparisons that are not like for like.

One table (:data:`CASES`) runs ``hopscotch`` in-process on inputs built once for the module; each refused case
checks exit code 2, exactly one stderr line naming the file (and line or key) or flag, no traceback, and
nothing written where the command would write. The mechanisms under test:

1. numbers read back from our own JSON pass the checks of the flags that set them: ``compare`` refuses a NaN,
   a string or an nDCG of 7.5 per query (``evaluation/manifest.py``); ``--fusion-config`` routes ``alpha``,
   ``sparse_weight``, ... through ``--alpha``'s own ``type=`` function (``io/validate.json_number``);
   a checkpoint's ``trainer_state.json`` counts are counts;
2. like for like: the manifest carries the run depth and the query set (``compare`` refuses a metric deeper than
   the shallower run, and another query set), one coverage rule (``metrics.check_coverage``) for ``eval``,
   ``compare`` and ``tune-fusion``; a (question, step) met twice is an error naming both lines (``replay``);
3. training: ``train.lr`` has a ceiling; ``--resume`` on a folder with nothing to continue is refused;
   ``KEY=VALUE`` overrides may stand on both sides of ``--output``;
4. agent runs: ``retrieved_docids`` is a list, ``correct`` a boolean or a word of the documented mapping,
   ``confidence`` a number in [0, 100], and a judge file that matches no run is an error;
5. messages: ``synth`` names the changed input and what changed in it; MCP and REST accept the bearer scheme
   in any case through one function.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

J = json.dumps


def run_main(capsys, argv) -> tuple[int, str, str]:
    from hopscotch.retriever.cli import main

    capsys.readouterr()
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_refused(code: int, err: str, needles) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2, f"exit {code}, stderr: {err!r}"
    assert "Traceback" not in err and len(lines) == 1, lines
    for needle in [needles] if isinstance(needles, str) else needles:
        assert needle in lines[0], f"{needle!r} not in {lines[0]!r}"
    return lines[0]


def _interrupted_synth(world: Path, folder: Path) -> None:
    """A synth run stopped after 5 questions (its work files left in ``folder/t.jsonl.parts``), then a
    same-size edit of its traces."""
    from hopscotch.data_synth.config import SynthConfig
    from hopscotch.data_synth.pipeline import SynthInputs, synthesize
    from hopscotch.data_synth.worker import QuestionWorker

    folder.mkdir()
    traces = folder / "traces.jsonl"
    shutil.copy2(world / "traces.jsonl", traces)
    original, calls = QuestionWorker.process, {"n": 0}

    def dying(self, question_id, steps):
        calls["n"] += 1
        if calls["n"] == 6:
            raise KeyboardInterrupt
        return original(self, question_id, steps)

    QuestionWorker.process = dying
    try:
        with pytest.raises(KeyboardInterrupt):
            synthesize(SynthInputs(world, traces=[traces]), out=folder / "t.jsonl",
                       config=SynthConfig(show_progress=False))
    finally:
        QuestionWorker.process = original
    text = traces.read_text()
    traces.write_text(text.replace("film", "flim", 1))  # same size, other content


@pytest.fixture(scope="module")
def paths(small_world, small_world_index, tiny_bert_dir, tmp_path_factory) -> dict[str, Path]:
    """Runs, evaluations, fusion configs, agent runs, a trained run and an interrupted synth, built once."""
    from hopscotch.retriever.cli import main
    from hopscotch.retriever.index.bm25 import BM25Index
    from hopscotch.retriever.io.corpus import read_corpus
    from hopscotch.retriever.io.queries import read_queries
    from hopscotch.retriever.io.runs import write_run

    root = tmp_path_factory.mktemp("round2")
    w, bad = small_world, root / "bad"
    bad.mkdir()
    index = BM25Index.build(read_corpus(w / "corpus.jsonl"), show_progress=False)
    index.save(root / "bm25")
    queries = list(read_queries(w / "queries.jsonl"))
    hits = [dict(h) for h in index.search([q.text for q in queries], k=50)]
    runs = {"r50": {q.qid: h for q, h in zip(queries, hits)}}
    runs["r10"] = {q: dict(sorted(h.items(), key=lambda kv: -kv[1])[:10]) for q, h in runs["r50"].items()}
    runs["fewer"] = dict(list(runs["r50"].items())[2:])  # 38 of 40 queries: coverage 0.95, another query set
    runs["disjoint"] = {f"other_{q}": h for q, h in runs["r50"].items()}
    for name, run in runs.items():
        write_run(root / f"{name}.trec", run)
    for name in ("r50", "r10", "fewer"):
        assert main(["eval", "--run", str(root / f"{name}.trec"), "--qrels", str(w / "qrels.tsv"), "--metrics",
                     "ndcg@10,recall@50", "--json", str(root / f"{name}.json")]) == 0
    result = json.loads((root / "r50.json").read_text())
    qid = next(iter(result["per_query"]))
    for name, value in (("nan", float("nan")), ("string", "0.61"), ("big", 7.5)):
        changed = json.loads(J(result))
        changed["per_query"][qid]["ndcg@10"] = value
        (bad / f"{name}.json").write_text(J(changed))  # json writes NaN as NaN, which json reads back
    assert main(["replay", "--runs", str(w / "traces.jsonl"), "--bm25", str(root / "bm25"), "--qrels",
                 str(w / "qrels.tsv"), "--no-plot", "--out", str(root / "replay")]) == 0
    replay = json.loads((root / "replay" / "replay.json").read_text())
    scored = next(c for c, row in replay["per_call"].items() if "ndcg@10" in row)
    replay["per_call"][scored]["ndcg@10"] = float("nan")
    (bad / "replay_nan.json").write_text(J(replay))
    (bad / "alpha.json").write_text(J({"method": "interp", "alpha": -3, "weight_on_dense": False}))
    (bad / "weight.json").write_text(J({"method": "interp", "sparse_weight": 5}))
    lines = (w / "traces.jsonl").read_text().splitlines()
    (bad / "dup.jsonl").write_text("\n".join([lines[0], lines[1], lines[0]]) + "\n")  # line 3 repeats line 1
    # agent runs: one judged record per file
    judged_qid, docid = (w / "qrels.tsv").read_text().splitlines()[1].split("\t")[:2]
    record = {"query_id": judged_qid, "status": "completed", "retrieved_docids": [docid], "result": []}
    for name, change in (("docids_str", {"retrieved_docids": docid}), ("maybe", {"correct": "maybe"}),
                         ("yes", {"correct": "yes"}), ("conf150", {"correct": True, "confidence": 150}),
                         ("conf80pct", {"correct": True, "confidence": "80%"}), ("plain", {})):
        (bad / f"{name}.jsonl").write_text(J({**record, **change}) + "\n")
    (bad / "judged_other.jsonl").write_text(J({"query_id": "nobody", "judge_result": {"correct": True}}) + "\n")
    # training: a recipe, a finished 2-step run with checkpoint-1 (overrides on both sides of --output)
    tuples = root / "t.jsonl"
    tuples.write_text("".join(J({"query_id": f"q{i}", "query": f"colour {i} red", "positive_passages": [
        {"docid": f"p{i}", "text": f"passage {i} blue"}], "negative_passages": [
        {"docid": f"n{i}", "text": f"other {i} grey"}]}) + "\n" for i in range(8)))
    recipe = root / "recipe.json"
    recipe.write_text(J({"model": {"name": str(tiny_bert_dir), "query_max_len": 16, "passage_max_len": 16},
                         "data": {"train": str(tuples), "group_size": 2},
                         "train": {"batch_size": 4, "lr": 1e-3, "threads": 1, "seed": 1}}))
    trained = root / "trained"
    assert main(["train", "--recipe", str(recipe), "train.max_steps=2", "--output", str(trained),
                 "train.save_every=1"]) == 0
    finished = root / "finished"  # the same run, its checkpoint gone: nothing to continue
    shutil.copytree(trained, finished)
    for checkpoint in finished.glob("checkpoint-*"):
        shutil.rmtree(checkpoint)
    damaged = root / "damaged_state"
    shutil.copytree(trained, damaged)
    state = damaged / "checkpoint-1" / "trainer_state.json"
    state.write_text(J({**json.loads(state.read_text()), "step": -3}))
    (root / "not_a_run").mkdir()
    (root / "not_a_run" / "notes.txt").write_text("mine")
    _interrupted_synth(w, root / "synth")
    return {"w": w, "root": root, "bad": bad, "bm25": root / "bm25", "dense": small_world_index,
            "recipe": recipe, "tuples": tuples, "trained": trained}


S = "search --queries {w}/queries.jsonl --out {out}/run.trec --bm25 {root}/bm25 --index {dense}"
EA = "eval-agent --qrels {w}/qrels.tsv --json {out}/a.json --runs"
TRAIN = "train --recipe {root}/recipe.json"
RESUME = f"{TRAIN} train.max_steps=2 --resume train.save_every=1 --output"  # the trained run's own overrides

# (id, command line, what the one stderr line must name)
CASES = [
    # 1. numbers read back from our own JSON
    ("compare-nan", "compare {root}/r50.json {bad}/nan.json --json {out}/c.json", ["nan.json", "'ndcg@10'", "nan"]),
    ("compare-string", "compare {root}/r50.json {bad}/string.json", ["string.json", "'ndcg@10'", "in [0, 1]"]),
    ("compare-ndcg-7.5", "compare {bad}/big.json {root}/r50.json", ["big.json", "'ndcg@10'", "in [0, 1]", "7.5"]),
    ("fusion-config-alpha", f"{S} --fusion-config {{bad}}/alpha.json", ["alpha.json", "'alpha'", ">= 0", "-3"]),
    ("fusion-config-weight", f"{S} --fusion-config {{bad}}/weight.json", ["weight.json", "'sparse_weight'", "[0, 1]"]),
    ("replay-compare-nan", "replay --runs {w}/traces.jsonl --bm25 {root}/bm25 --qrels {w}/qrels.tsv --no-plot "
     "--compare {bad}/replay_nan.json --out {out}/r", ["replay_nan.json", "'ndcg@10'", "nan"]),
    ("trainer-state-step", f"{RESUME} {{root}}/damaged_state", ["trainer_state.json", "'step'"]),
    # 2. like for like
    ("compare-depth", "compare {root}/r10.json {root}/r50.json --metric recall@50 --json {out}/c.json",
     ["recall@50", "r10.json (run depth 10)", "r50.json (run depth 50)"]),
    ("compare-query-set", "compare {root}/r50.json {root}/fewer.json", ["fewer.json", "'queries'", "40 queries"]),
    ("compare-coverage", "compare {root}/fewer.json {root}/fewer.json --min-coverage 1",
     ["fewer.json", "answers 38 of the 40", "--min-coverage 1"]),
    ("eval-coverage", "eval --run {root}/fewer.trec --qrels {w}/qrels.tsv --min-coverage 0.99 --json {out}/e.json",
     ["fewer.trec", "coverage 0.95 < --min-coverage 0.99"]),
    ("tune-fusion-disjoint", "tune-fusion --sparse {root}/r50.trec --dense {root}/disjoint.trec --qrels {w}/qrels.tsv "
     "--out {out}/tuned.json", ["--dense", "disjoint.trec", "answers 0 of the 40", "--min-coverage 0.9"]),
    ("replay-duplicate", "replay --runs {bad}/dup.jsonl --bm25 {root}/bm25 --no-plot --out {out}/r",
     ["dup.jsonl:3: expected a unique (question, step)", "already read at", "dup.jsonl:1"]),
    # 3. training
    ("train-lr-1e308", f"{TRAIN} --output {{out}}/t train.lr=1e308", ["train.lr", "<= 1", "1e+308"]),
    ("train-override-after-output", f"{TRAIN} train.max_steps=1 --output {{out}}/t train.lr=1e308", ["train.lr"]),
    ("train-resume-no-checkpoint", f"{RESUME} {{root}}/finished",
     ["finished", "no complete checkpoint-*", "--overwrite"]),
    ("train-resume-not-a-run", f"{RESUME} {{root}}/not_a_run",
     ["not_a_run", "holds no run to continue", "notes.txt"]),
    # 4. agent runs
    ("agent-docids-string", f"{EA} {{bad}}/docids_str.jsonl", ["docids_str.jsonl:1", "'retrieved_docids'", "list"]),
    ("agent-correct-maybe", f"{EA} {{bad}}/maybe.jsonl", ["maybe.jsonl:1", "'correct'", "maybe"]),
    ("agent-confidence-150", f"{EA} {{bad}}/conf150.jsonl", ["conf150.jsonl:1", "'confidence'", "[0, 100]"]),
    ("agent-confidence-80pct", f"{EA} {{bad}}/conf80pct.jsonl", ["conf80pct.jsonl:1", "'confidence'", "80%"]),
    ("agent-judgements-match-nothing", f"{EA} {{bad}}/plain.jsonl --judgements {{bad}}/judged_other.jsonl",
     ["--judgements", "judged_other.jsonl", "matches one of the 1 runs"]),
    # 5. messages
    ("synth-changed-input", "synth --qa {w} --traces {root}/synth/traces.jsonl --out {root}/synth/t.jsonl",
     ["traces.jsonl: content changed (same size", "--fresh"]),
]


@pytest.mark.parametrize(("line", "needles"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_refused_with_one_line_naming_the_file_and_key(line, needles, paths, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    argv = [w.format(out=out, **paths) for w in line.split()]
    code, _, err = run_main(capsys, argv)
    assert_refused(code, err, needles)
    assert sorted(p.name for p in out.rglob("*")) == [], "a refused command wrote something"


def test_the_table_covers_every_item():
    ids = {c[0] for c in CASES}
    for needed in ("compare-nan", "compare-string", "compare-ndcg-7.5", "fusion-config-alpha", "fusion-config-weight",
                   "compare-depth", "tune-fusion-disjoint", "replay-duplicate", "train-lr-1e308",
                   "train-resume-no-checkpoint", "agent-docids-string", "agent-confidence-150",
                   "agent-confidence-80pct", "agent-judgements-match-nothing", "synth-changed-input"):
        assert needed in ids


# -- what the fixes make work -------------------------------------------------------------------------
def test_overrides_on_both_sides_of_output_are_all_applied(paths):
    manifest = json.loads((paths["trained"] / "train_manifest.json").read_text())
    assert manifest["recipe"]["train"]["max_steps"] == 2 and manifest["recipe"]["train"]["save_every"] == 1
    assert json.loads((paths["trained"] / "train_summary.json").read_text())["steps"] == 2


def test_train_py_takes_overrides_on_both_sides_too(paths, tmp_path, capsys):
    from hopscotch.retriever.training.trainer import main

    argv = ["--recipe", str(paths["recipe"]), "train.max_steps=1", "--output", str(tmp_path / "t"), "train.lr=2"]
    assert main(argv) == 2
    assert "recipe key train.lr must be <= 1" in capsys.readouterr().err and not (tmp_path / "t").exists()


def test_compare_leaves_out_deeper_metrics_by_default_with_a_note(paths, capsys):
    code, out, err = run_main(capsys, ["compare", paths["root"] / "r10.json", paths["root"] / "r50.json"])
    assert code == 0, err
    assert "ndcg@10" in out and "recall@50" not in out
    assert "recall@50 left out: the runs' depths differ (10 vs 50)" in err
    manifest = json.loads((paths["root"] / "r10.json").read_text())["manifest"]
    assert manifest["depth"] == 10 and manifest["queries"]["count"] == 40 and manifest["queries_answered"] == 40


def test_correct_yes_is_the_documented_mapping(paths, capsys):
    code, out, err = run_main(capsys, ["eval-agent", "--qrels", paths["w"] / "qrels.tsv", "--runs",
                                       paths["bad"] / "yes.jsonl"])
    assert code == 0, err
    assert "accuracy: 100.00% over 1 runs" in out


def test_a_good_fusion_config_still_reads(tmp_path):
    from hopscotch.retriever.searchers.fusion import FusionSettings, read_fusion_config

    for settings in (FusionSettings.convex(0.3), FusionSettings("rrf", rrf_k=20, weights=(2, 1)),
                     FusionSettings.adaptive(0.4, adapt=1.5, shift=0.5)):
        path = tmp_path / "tuned.json"
        path.write_text(J({**settings.to_json(), "metric": "ndcg@10", "dev_score": 0.5}))
        assert read_fusion_config(path) == settings


@pytest.mark.parametrize(("header", "ok"), [
    ("Bearer s3cret", True), ("bearer s3cret", True), ("BEARER  s3cret ", True), ("Basic s3cret", False),
    ("Bearer wrong", False), ("s3cret", False), ("", False),
])
def test_rest_and_mcp_accept_the_same_authorization_headers(header, ok):
    """RFC 7235: the scheme is case-insensitive; REST and MCP both ask ``service.token_matches``."""
    from hopscotch.retriever.serving.mcp_server import BearerAuth
    from hopscotch.retriever.serving.service import token_matches

    assert token_matches({"authorization": header}, "s3cret") is ok
    reached = []

    async def app(scope, receive, send):
        reached.append(scope["path"])

    sent = []

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "path": "/mcp", "headers": [(b"authorization", header.encode())]}
    asyncio.run(BearerAuth(app, "s3cret")(scope, None, send))
    assert (reached == ["/mcp"]) is ok
    assert ok or sent[0]["status"] == 401
    scope = {"type": "http", "path": "/mcp", "headers": [(b"x-api-key", b"s3cret")]}
    asyncio.run(BearerAuth(app, "s3cret")(scope, None, send))
    assert reached[-1] == "/mcp"
