"""A flag the effective path ignores is refused by name, once ``--backend auto`` has resolved and ``--reasoning`` has
decided whether the reasoning is read (hopscotch.retriever.searchers.adapter.build.refuse_reasoning_flags, the
bm25-index backend rule), and an empty value is refused for every flag (retriever/cli.py)."""

from __future__ import annotations

import argparse
import json

import pytest

from hopscotch.retriever.searchers.adapter.build import QUERY_MIX_DESTS, expansion_dests


@pytest.fixture(scope="module")
def paths(small_world, tmp_path_factory):
    from hopscotch.retriever.cli import main

    root = tmp_path_factory.mktemp("effective")
    assert main(["bm25-index", "--corpus", str(small_world / "corpus.jsonl"), "--out", str(root / "bm25")]) == 0
    steps = [json.loads(line) for line in (small_world / "traces.jsonl").read_text().splitlines()][:12]
    (root / "q.jsonl").write_text("".join(json.dumps({"_id": f"s{i}", "text": s["query"], "reasoning": s["reasoning"]})
                                          + "\n" for i, s in enumerate(steps)))
    (root / "template.jsonl").write_text("".join(json.dumps({"_id": f"t{i}", "text": f"Reasoning: {s['reasoning']}"
                                                                                    f"\n\nQuery: {s['query']}"}) + "\n"
                                                 for i, s in enumerate(steps)))
    return {"root": root, "bm25": root / "bm25", "q": root / "q.jsonl", "template": root / "template.jsonl",
            "corpus": small_world / "corpus.jsonl"}


def _options(dests) -> dict[str, list[str]]:
    """A valid command line for each flag of ``dests`` (the flags as their parser declares them)."""
    from hopscotch.retriever.searchers import add_searcher_arguments

    parser = argparse.ArgumentParser(add_help=False)
    add_searcher_arguments(parser)
    values = {"bm25_reasoning": "reasoning_tail:8", "late_fusion_max_words": "5", "bm25_terms": "20"}
    out = {}
    for action in parser._actions:
        if action.dest in dests:
            out[action.dest] = [action.option_strings[0], values.get(action.dest, "0.5")]
    assert set(out) == set(dests), set(dests) - set(out)
    return out


def test_the_reasoning_only_flags_are_the_expansion_groups_and_the_late_fusion_weights():
    """Generic: every flag the BM25 expansion declares is in the group, whatever it grows to."""
    assert {"bm25_reasoning", "bm25_query_weight"} <= expansion_dests()
    assert QUERY_MIX_DESTS == {"late_fusion", "late_fusion_max_words", "late_fusion_long", "rerank_late_fusion"}


@pytest.mark.parametrize("dest", sorted(expansion_dests()))
def test_an_expansion_flag_without_reasoning_is_refused_and_taken_with_it(paths, cli, tmp_path, dest):
    option = _options([dest])[dest]
    base = ["search", "--queries", paths["q"], "--bm25", paths["bm25"], "--out", tmp_path / "r.trec", *option]
    code, _, err = cli(*base)
    assert code == 2 and f"{option[0]} changes reasoning-aware queries only" in err and "--reasoning" in err, err
    assert err.count("\n") == 1 and not (tmp_path / "r.trec").exists()
    code, _, err = cli(*base, "--reasoning")
    assert code == 0, err


def test_queries_in_the_reasoning_template_carry_their_reasoning_without_the_flag(paths, cli, tmp_path):
    code, _, err = cli("search", "--queries", paths["template"], "--bm25", paths["bm25"], "--out", tmp_path / "r.trec",
                       "--bm25-query-weight", "3")
    assert code == 0, err


@pytest.mark.parametrize("dest", sorted(QUERY_MIX_DESTS - {"rerank_late_fusion"}))
def test_a_late_fusion_flag_without_reasoning_is_refused(paths, small_world_index, cli, tmp_path, dest):
    option = _options([dest])[dest]
    code, _, err = cli("search", "--queries", paths["q"], "--index", small_world_index, "--out", tmp_path / "r.trec",
                       *option)
    assert code == 2 and f"{option[0]} changes reasoning-aware queries only" in err and err.count("\n") == 1, err


def test_an_expansion_flag_beside_an_expansion_turned_off_is_refused(paths, cli, tmp_path):
    code, _, err = cli("search", "--queries", paths["q"], "--bm25", paths["bm25"], "--out", tmp_path / "r.trec",
                       "--reasoning", "--bm25-reasoning", "query", "--bm25-query-weight", "3")
    assert code == 2 and "--bm25-query-weight shapes the reasoning-aware BM25 expansion" in err, err


def test_replay_refuses_an_expansion_flag_without_reasoning():
    from hopscotch.retriever.errors import UsageError
    from hopscotch.retriever.searchers import add_searcher_arguments, searcher_from_args

    parser = argparse.ArgumentParser()
    add_searcher_arguments(parser)
    args = parser.parse_args(["--bm25", "unused", "--bm25-query-weight", "2"])
    with pytest.raises(UsageError, match="--bm25-query-weight changes reasoning-aware queries only"):
        searcher_from_args(args, reasoning=False)  # refused before the index is opened


@pytest.mark.parametrize(("flag", "value"), [("--batch-docs", "100"), ("--workers", "2"),
                                             ("--merge-postings", "100000")])
def test_a_disk_flag_is_refused_when_auto_resolves_to_bm25s(paths, cli, tmp_path, flag, value):
    code, _, err = cli("bm25-index", "--corpus", paths["corpus"], "--out", tmp_path / "b", flag, value)
    assert code == 2 and f"{flag} applies to the disk backend only, and --backend auto builds bm25s" in err, err
    assert err.count("\n") == 1 and not any(tmp_path.iterdir())
    code, _, err = cli("bm25-index", "--corpus", paths["corpus"], "--out", tmp_path / "b", flag, value, "--backend",
                       "disk")
    assert code == 0, err


@pytest.mark.parametrize("argv", [
    "search --queries {q} --bm25 {bm25} --out {out} --bm25-reasoning ''",
    "search --queries '' --bm25 {bm25} --out {out}",
    "search --queries {q} --bm25 ' ' --out {out}",
    "search --queries {q} --bm25 {bm25} --out {out} --tag ''",
    "bm25-index --corpus {corpus} --out '' ",
    "eval --run {out} --qrels ''",
    "train --recipe '' --output {out}",
])
def test_an_empty_value_is_refused_for_any_flag(paths, argv, tmp_path):
    import shlex
    import subprocess
    import sys

    words = shlex.split(argv.format(q=paths["q"], bm25=paths["bm25"], out=tmp_path / "r.trec", corpus=paths["corpus"]))
    proc = subprocess.run([sys.executable, "-m", "hopscotch.retriever.cli", *words], capture_output=True, text=True,
                          check=False, cwd=tmp_path)
    assert proc.returncode == 2 and "expected a value, got an empty string" in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1 and not (tmp_path / "r.trec").exists()


def test_an_empty_instruction_is_a_value(paths, small_world_index, cli, tmp_path):
    code, _, err = cli("search", "--queries", paths["q"], "--index", small_world_index, "--out", tmp_path / "r.trec",
                       "--instruction", "")
    assert code == 0, err


@pytest.mark.parametrize("flags", [["--k", "10"], ["--snippet-max-tokens", "64"], ["--snippet-tokenizer", "minilm"],
                                   ["--no-get-document"]], ids=lambda f: f[0])
def test_a_rest_service_refuses_the_mcp_tools_flags(paths, cli, flags):
    code, _, err = cli("serve", "--bm25-index", paths["bm25"], "--corpus", paths["corpus"], "--port", "0", *flags)
    assert code == 2 and f"{flags[0]} applies to the MCP tools (--mcp) only" in err and err.count("\n") == 1, err


def test_a_bm25_plan_takes_the_disk_builds_batch_and_refuses_workers(cli):
    code, out, err = cli("bm25-index", "--plan", "--docs", "1000000", "--batch-docs", "1000")
    assert code == 0 and "runs: a batch of 1,000 documents" in out, err
    code, _, err = cli("bm25-index", "--plan", "--docs", "1000000", "--workers", "3")
    assert code == 2 and "--workers: --plan sizes one analysing process" in err, err
