"""Backend flags' values as the selection rules read them: a harness's own flag left out, a renamed one read under
its own name, a hand-built namespace or keyword options read as they are."""

from __future__ import annotations

import argparse


def test_flag_values_of_a_harness_namespace():
    from hopscotch.retriever.searchers import SEARCHERS
    from hopscotch.retriever.searchers.adapter.flags import FlagValues, flag

    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="gpt-4.1")   # the harness's LLM
    SEARCHERS["dense"].parse_args(parser)                # --model becomes --hopscotch-model
    args = parser.parse_args(["--index", "idx", "--hopscotch-model", "enc"])
    flags = FlagValues.of(args)
    assert flags["index"] == "idx" and flags.get("model") == "enc" == flag(args, "model")
    assert "k" not in flags and flags.get("bm25", "none") == "none"      # not a dense flag: the default
    assert "model" in set(flags) and "hopscotch_model" not in set(flags)
    plain = parser.parse_args(["--index", "idx"])
    assert FlagValues.of(plain).get("model") is None and plain.model == "gpt-4.1"


def test_flag_values_of_a_hand_built_namespace_and_of_options():
    from hopscotch.retriever.searchers.adapter.flags import FlagValues

    assert dict(FlagValues.of(argparse.Namespace(index="i", k=3))) == {"index": "i", "k": 3}
    assert FlagValues({"index": "i"}).get("index") == "i" and len(FlagValues({})) == 0


def test_a_deprecated_alias_still_works_and_says_so_once(capsys):
    """The query mix's flags are ``--query-mix*``; their former names ``--late-fusion*`` set the same value and print
    one deprecation line each, and the help names them deprecated."""
    from hopscotch.retriever.searchers import add_searcher_arguments
    from hopscotch.retriever.searchers.adapter.flags import given_flags

    parser = argparse.ArgumentParser(prog="hopscotch search")
    add_searcher_arguments(parser)
    new = parser.parse_args(["--index", "i", "--query-mix", "0.5", "--query-mix-max-words", "9",
                             "--rerank-query-mix", "0.3"])
    assert capsys.readouterr().err == ""
    old = parser.parse_args(["--index", "i", "--late-fusion", "0.5", "--late-fusion-max-words", "9",
                             "--rerank-late-fusion", "0.3"])
    assert (old.late_fusion, old.late_fusion_max_words, old.rerank_late_fusion) == (0.5, 9, 0.3) == (
        new.late_fusion, new.late_fusion_max_words, new.rerank_late_fusion)
    assert capsys.readouterr().err.splitlines() == [
        "hopscotch search: note: --late-fusion is deprecated, use --query-mix",
        "hopscotch search: note: --late-fusion-max-words is deprecated, use --query-mix-max-words",
        "hopscotch search: note: --rerank-late-fusion is deprecated, use --rerank-query-mix"]
    assert given_flags(old)["late_fusion"] == "--late-fusion"   # a refusal names the flag as it was typed
    [mix] = [a for a in parser._actions if "--query-mix" in a.option_strings]
    assert mix.option_strings == ["--query-mix", "--late-fusion"]
    assert mix.help.endswith("(--late-fusion: deprecated alias, still accepted)")


def test_synth_oracle_and_its_deprecated_alias(capsys):
    from hopscotch.retriever.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["synth", "--oracle", "dense", "--out", "o.jsonl"]).reranker == "dense"
    assert capsys.readouterr().err == ""
    assert parser.parse_args(["synth", "--reranker", "llm", "--out", "o.jsonl"]).reranker == "llm"
    assert capsys.readouterr().err.strip().endswith("note: --reranker is deprecated, use --oracle")
