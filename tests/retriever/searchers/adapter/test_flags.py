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
