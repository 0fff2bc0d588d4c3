"""Every writing command behind the one output boundary (:mod:`hopscotch.retriever.io.outputs`): an output
that is one of its inputs, a device node or a FIFO is refused (exit 2, one stderr line naming the path,
nothing touched); another run's output is refused unless ``--overwrite``; an identical rerun is allowed."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from hopscotch.retriever.cli import main


def _run(*argv) -> int:
    return main([str(a) for a in argv])


@pytest.fixture(scope="module")
def built(small_world, tmp_path_factory) -> dict[str, Path]:
    """A copy of the small world, its BM25 index, two runs, their evaluations, a replay and an agent run file,
    made once for the module."""
    base = tmp_path_factory.mktemp("boundary")
    world = base / "world"
    shutil.copytree(small_world, world)
    p = {"world": world, "queries": world / "queries.jsonl", "qrels": world / "qrels.tsv",
         "traces": world / "traces.jsonl", "bm25": base / "bm25", "run": base / "a.trec", "run2": base / "b.trec",
         "eval": base / "a.json", "eval2": base / "b.json", "replay": base / "replay", "agent": base / "agent.jsonl"}
    assert _run("bm25-index", "--corpus", world, "--out", p["bm25"]) == 0
    assert _run("search", "--queries", p["queries"], "--bm25", p["bm25"], "--k", 20, "--out", p["run"]) == 0
    assert _run("search", "--queries", p["queries"], "--bm25", p["bm25"], "--k", 10, "--out", p["run2"]) == 0
    assert _run("eval", "--run", p["run"], "--qrels", p["qrels"], "--json", p["eval"]) == 0
    assert _run("eval", "--run", p["run2"], "--qrels", p["qrels"], "--json", p["eval2"]) == 0
    assert _run("replay", "--runs", p["traces"], "--qrels", p["qrels"], "--searcher", "bm25", "--bm25", p["bm25"],
                "--no-plot", "--out", p["replay"]) == 0
    qid, docid = p["qrels"].read_text().splitlines()[1].split("\t")[:2]
    p["agent"].write_text(json.dumps({"query_id": qid, "status": "completed", "retrieved_docids": [docid],
                                      "result": []}) + "\n")
    return p


def _state(path: Path):
    """What a path is now: its kind, bytes (files) or listing (folders), and mtime."""
    st = os.lstat(path)
    if stat.S_ISDIR(st.st_mode):
        return "dir", sorted((q.name, _state(q)) for q in path.iterdir()), st.st_mtime_ns
    if stat.S_ISREG(st.st_mode):
        return "file", path.read_bytes(), st.st_mtime_ns
    return stat.S_IFMT(st.st_mode), st.st_rdev, st.st_mtime_ns


def _argv(command: str, p: dict, out, extra=()) -> list:
    """``command``'s argv writing to ``out`` (its inputs from the built fixtures)."""
    return {
        "world": lambda: ["world", "--docs", 50, "--questions", 3, "--out", out],
        "bm25-index": lambda: ["bm25-index", "--corpus", p["queries"].parent / "corpus.jsonl", "--out", out],
        "search": lambda: ["search", "--queries", p["queries"], "--bm25", p["bm25"], "--k", 5, "--out", out],
        "eval": lambda: ["eval", "--run", p["run"], "--qrels", p["qrels"], "--json", out],
        "eval-agent": lambda: ["eval-agent", "--runs", p["agent"], "--qrels", p["qrels"], "--json", out],
        "synth": lambda: ["synth", "--qa", p["world"], "--question-only", "--max-questions", 3, "--bm25-index",
                          p["bm25"], "--out", out],
        "tune-fusion": lambda: ["tune-fusion", "--sparse", p["run"], "--dense", p["run2"], "--qrels", p["qrels"],
                                "--out", out],
        "replay": lambda: ["replay", "--runs", p["traces"], "--qrels", p["qrels"], "--searcher", "bm25", "--bm25",
                           p["bm25"], "--k", 5, "--no-plot", "--out", out],
        "compare": lambda: ["compare", p["eval"], p["eval2"], "--permutations", 200, "--json", out],
    }[command]() + list(extra)


#: for each command, an argv whose output is one of its own inputs (and that input)
SAME_AS_INPUT = {
    "search": lambda p: (["search", "--queries", p["queries"], "--bm25", p["bm25"], "--out", p["queries"]],
                         p["queries"]),
    "eval": lambda p: (["eval", "--run", p["run"], "--qrels", p["qrels"], "--json", p["run"]], p["run"]),
    "eval-agent": lambda p: (["eval-agent", "--runs", p["agent"], "--qrels", p["qrels"], "--json", p["qrels"]],
                             p["qrels"]),
    "synth": lambda p: (["synth", "--qa", p["world"], "--traces", p["traces"], "--out", p["traces"]], p["traces"]),
    "bm25-index": lambda p: (["bm25-index", "--corpus", p["world"] / "corpus.jsonl", "--out", p["world"]],
                             p["world"]),
    "tune-fusion": lambda p: (["tune-fusion", "--sparse", p["run"], "--dense", p["run2"], "--qrels", p["qrels"],
                               "--out", p["run2"]], p["run2"]),
    "replay": lambda p: (["replay", "--runs", p["traces"], "--searcher", "bm25", "--bm25", p["bm25"], "--compare",
                          p["replay"] / "replay.json", "--no-plot", "--out", p["replay"]], p["replay"]),
    "compare": lambda p: (["compare", p["eval"], p["eval2"], "--json", p["eval2"]], p["eval2"]),
}


@pytest.mark.parametrize("command", sorted(SAME_AS_INPUT))
def test_output_onto_an_input_is_refused_and_the_input_kept(cli, built, command):
    argv, victim = SAME_AS_INPUT[command](built)
    before = _state(victim)
    code, out, err = cli(*argv)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert "refusing to write an output that" in err and (str(victim) in err or str(victim.parent) in err), err
    assert _state(victim) == before


def test_an_output_onto_an_input_through_a_symlink_or_a_hard_link(cli, built, tmp_path):
    link, hard = tmp_path / "q_link.jsonl", tmp_path / "q_hard.jsonl"
    link.symlink_to(built["queries"])
    os.link(built["queries"], hard)
    before = _state(built["queries"])
    for out in (link, hard):
        code, _, err = cli("search", "--queries", built["queries"], "--bm25", built["bm25"], "--out", out)
        assert code == 2 and f"{out}: refusing to write an output that is the input" in err, err
    assert _state(built["queries"]) == before and link.is_symlink()


FILE_COMMANDS = ["search", "eval", "eval-agent", "synth", "tune-fusion", "compare"]
FOLDER_COMMANDS = ["world", "bm25-index", "replay"]


@pytest.mark.parametrize("command", FILE_COMMANDS + FOLDER_COMMANDS)
def test_device_node_and_fifo_are_refused_untouched(cli, built, tmp_path, command):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    targets = [fifo] + (["/dev/full"] if command in FILE_COMMANDS else [])
    for target in targets:
        before = _state(Path(target))
        code, _, err = cli(*_argv(command, built, target))
        assert code == 2 and len(err.strip().splitlines()) == 1 and f"{target}: is a" in err, err
        assert _state(Path(target)) == before
    assert [q.name for q in tmp_path.iterdir()] == ["pipe"]  # no temp file, no sidecar


def test_unusable_parents_are_one_line_errors(cli, built, tmp_path):
    (tmp_path / "file.txt").write_text("keep")
    (tmp_path / "folder").mkdir()
    for command, out, needle in [("search", tmp_path / "file.txt" / "run.trec", "is a file, not a folder"),
                                 ("world", tmp_path / "file.txt" / "w", "is a file, not a folder"),
                                 ("eval", tmp_path / "folder", "is a folder, expected a file"),
                                 ("bm25-index", tmp_path / "file.txt", "is a file, expected a folder")]:
        code, _, err = cli(*_argv(command, built, out))
        assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err
    assert (tmp_path / "file.txt").read_text() == "keep"


#: for each command, flags that make another run than _argv's
OTHER_RUN = {"world": ["--seed", 5], "bm25-index": ["--k1", 1.2], "search": ["--tag", "other"],
             "eval": ["--metrics", "ndcg@10"], "eval-agent": ["--protocol", "bcp"], "synth": ["--seed", 5],
             "tune-fusion": ["--seed", 5], "replay": ["--k", 3], "compare": ["--permutations", 100]}


@pytest.mark.parametrize("command", sorted(OTHER_RUN))
def test_rerun_is_allowed_another_run_needs_overwrite(cli, built, tmp_path, command):
    out = tmp_path / ("out" if command in FOLDER_COMMANDS else "out.json")
    beside = {"world": out / "corpus.jsonl", "replay": out / "calls.trec"}.get(command, out)  # what is written
    stale = beside.parent / f".{beside.name}.{2**22 + 7}-deadbeef.tmp"  # left by a killed run
    stale.parent.mkdir(exist_ok=True)
    stale.write_text("partial")
    assert cli(*_argv(command, built, out))[0] == 0
    assert not stale.exists()
    code, _, err = cli(*_argv(command, built, out))                     # the same command again: idempotent
    assert code == 0, err
    before = _state(out)
    code, _, err = cli(*_argv(command, built, out, OTHER_RUN[command]))
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"{out}: exists and another run made it" in err and "--overwrite" in err
    assert _state(out) == before
    code, _, err = cli(*_argv(command, built, out, [*OTHER_RUN[command], "--overwrite"]))
    assert code == 0, err
    code, _, err = cli(*_argv(command, built, out, OTHER_RUN[command]))  # now it is that run's output
    assert code == 0, err
    code, _, err = cli(*_argv(command, built, out))
    assert code == 2 and "another run made it" in err


def test_a_file_no_run_recorded_is_refused(cli, built, tmp_path):
    out = tmp_path / "run.trec"
    out.write_text("someone else's\n")
    code, _, err = cli(*_argv("search", built, out))
    assert code == 2 and "nothing records which run made it" in err and out.read_text() == "someone else's\n"
    assert cli(*_argv("search", built, out, ["--overwrite"]))[0] == 0
    assert out.read_text().count(" Q0 ") > 0 and stat.S_IMODE(out.stat().st_mode) & 0o044 == 0o044


def test_an_identical_pipeline_rerun_is_allowed(cli, built, tmp_path):
    """Rerunning bm25-index, search and eval as they were rewrites their outputs with the same bytes, so each
    next step still sees the same inputs."""
    steps = [("bm25-index", "--corpus", built["world"] / "corpus.jsonl", "--out", tmp_path / "bm25"),
             ("search", "--queries", built["queries"], "--bm25", tmp_path / "bm25", "--out", tmp_path / "r.trec"),
             ("eval", "--run", tmp_path / "r.trec", "--qrels", built["qrels"], "--json", tmp_path / "e.json")]
    for _ in range(2):
        for argv in steps:
            code, _, err = cli(*argv)
            assert code == 0, err
    (tmp_path / "r.trec").write_text((tmp_path / "r.trec").read_text().replace(" 1 ", " 1  ", 1))  # edited input
    code, _, err = cli(*steps[2])
    assert code == 2 and "e.json: exists and another run made it" in err
