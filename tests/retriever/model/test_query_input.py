"""Query input variants: parsing, the reasoning text of each variant, the formatting they share (trainer,
encoders, searcher), the context fields of query and tuple files, and the saved model's variant."""

from __future__ import annotations

import json
import pickle

import pytest

from hopscotch.retriever.errors import FormatError, UsageError
from hopscotch.retriever.io.queries import Query, read_queries
from hopscotch.retriever.io.tuples import parse_tuple, passage_dict, read_training_tuples, tuple_line
from hopscotch.retriever.model.config import EncoderConfig, model_settings, read_saved_config
from hopscotch.retriever.model.query_input import (
    QUERY,
    REASONING,
    SNIPPET_CHARS,
    QueryContext,
    QueryInput,
    as_context,
    reasoning_text,
    tail_text,
)
from hopscotch.retriever.model.query_template import format_queries, format_query_truncated

VARIANTS = ["query", "prior_queries", "reasoning", "current_reasoning", "reasoning_tail:5", "reasoning_focus:5",
            "with_documents"]
LONG = " ".join(f"thought{i} about films" for i in range(120))
CONTEXT = QueryContext(reasoning="Earlier I searched Korine. The results list Gummo. Next: the year.",
                       current_reasoning="The results list Gummo. Next: the year.",
                       prior_queries=("Harmony Korine films", "Korine director"),
                       prior_results=({"title": "Gummo", "snippet": "Gummo is a 1997 film."},
                                      {"title": "", "snippet": "Kids (1995)"}))


@pytest.fixture(scope="module")
def tok(tiny_bert_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tiny_bert_dir))


def test_parse_and_print_round_trip():
    for name in VARIANTS:
        assert str(QueryInput.parse(name)) == name
    assert QueryInput.parse(" reasoning_tail:64 ") == QueryInput("reasoning_tail", 64)
    assert QueryInput.parse(REASONING) is REASONING
    assert not QUERY.uses_reasoning and QueryInput.parse("prior_queries").uses_reasoning


@pytest.mark.parametrize("bad", ["", "Reasoning", "reasoning_tail", "reasoning_tail:0", "reasoning_tail:-3",
                                 "reasoning_tail:x", "query:3", "documents", None])
def test_bad_variants_name_the_allowed_values(bad):
    with pytest.raises(UsageError, match=r"--query-input: unknown query input .*query, prior_queries, reasoning, "
                                         r"current_reasoning, reasoning_tail:N \(N >= 1\), "
                                         r"reasoning_focus:N \(N >= 1\), with_documents"):
        QueryInput.parse(bad, "--query-input")


def test_reasoning_text_of_every_variant():
    assert reasoning_text("query", CONTEXT) is None
    assert reasoning_text("reasoning", CONTEXT) == CONTEXT.reasoning
    assert reasoning_text("current_reasoning", CONTEXT) == "The results list Gummo. Next: the year."
    assert reasoning_text("prior_queries", CONTEXT) == "Harmony Korine films\nKorine director"
    assert reasoning_text("reasoning_tail:3", CONTEXT) == "Next: the year."  # whitespace words without a tokenizer
    # the previous results sit where they arrived: after the earlier reasoning, before the current one
    assert reasoning_text("with_documents", CONTEXT) == (
        "Earlier I searched Korine.\n\nResults:\nGummo: Gummo is a 1997 film.\nKids (1995)\n\n"
        "The results list Gummo. Next: the year.")


def test_turn_zero_and_missing_fields():
    empty = QueryContext(reasoning="", current_reasoning="", prior_queries=(), prior_results=())
    for name in VARIANTS[1:]:
        assert not reasoning_text(name, empty)
    bare = "only a reasoning string"  # AgentIR files, the REST 'reason': no other context
    assert reasoning_text("current_reasoning", bare) == bare  # falls back to the reasoning
    assert reasoning_text("prior_queries", bare) == ""
    assert reasoning_text("with_documents", bare) == bare
    assert reasoning_text("reasoning", None) is None
    # results without a current reasoning that ends the reasoning come first, then the reasoning
    ctx = QueryContext(reasoning="r", prior_results=({"title": "T", "snippet": "x " * 400},))
    text = reasoning_text("with_documents", ctx)
    assert text.startswith("Results:\nT: x x") and text.endswith("\n\nr") and len(text) < SNIPPET_CHARS + 30


def test_tail_uses_the_tokenizer_when_given(tok):
    text = "Harmony Korine directed Gummo in nineteen ninety seven"
    assert tail_text(text, 3) == "nineteen ninety seven"
    tail = tail_text(text, 4, tok)
    assert len(tok(tail, add_special_tokens=False)["input_ids"]) <= 4 and text.endswith(tail)
    assert tail_text(text, 100, tok) == text and tail_text("", 5) == ""


def test_query_and_reasoning_variants_equal_the_reasoning_aware_flag(tok):
    queries = ["who directed Gummo", "where is Xenia", "q3"]
    reasonings = [LONG, None, "  short  "]
    old_plain = format_queries(tok, 48, queries, reasonings, instruction="I: ", reasoning_aware=False)
    old_aware = format_queries(tok, 48, queries, reasonings, instruction="I: ", reasoning_aware=True)
    assert old_plain == format_queries(tok, 48, queries, reasonings, instruction="I: ", query_input="query")
    assert old_aware == format_queries(tok, 48, queries, reasonings, instruction="I: ", query_input="reasoning")
    assert old_aware == [format_query_truncated(tok, 48, q, r, instruction="I: ") for q, r in zip(queries, reasonings)]
    # contexts that carry more than the reasoning give the same 'reasoning' texts
    contexts = [Query(q, r, current_reasoning="cur", prior_queries=("p",), prior_results=())
                for q, r in zip(queries, reasonings)]
    assert old_aware == format_queries(tok, 48, queries, contexts, instruction="I: ")
    # per-query flags and variants
    mixed = format_queries(tok, 48, queries, contexts, reasoning_aware=[True, False, True],
                           query_input=["prior_queries", "reasoning", None])
    assert mixed == ["Reasoning: p\n\nQuery: who directed Gummo", "where is Xenia", "Reasoning: short\n\nQuery: q3"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_variant_fits_the_limit_and_keeps_the_query(tok, variant):
    long_context = QueryContext(LONG, LONG[-300:], tuple(f"query {i}" for i in range(60)),
                                tuple({"title": f"T{i}", "snippet": LONG} for i in range(10)))
    (text,) = format_queries(tok, 40, ["who directed Gummo"], [long_context], query_input=variant)
    assert len(tok(text)["input_ids"]) <= 40
    assert text.endswith("who directed Gummo")
    assert (text == "who directed Gummo") == (variant == "query")


def test_a_query_carries_its_context_and_pickles():
    q = Query("q", CONTEXT.reasoning, current_reasoning=CONTEXT.current_reasoning, prior_queries=CONTEXT.prior_queries,
              prior_results=CONTEXT.prior_results, reasoning_aware=True, qid="q1")
    assert as_context(q) == CONTEXT and q.has_context and not Query("q").has_context
    back = pickle.loads(pickle.dumps(q))
    assert back == q and back.qid == "q1" and back.with_reasoning(False).reasoning_aware is False
    assert as_context({"reasoning": "r", "prior_results": ["s"]}).prior_results == ({"title": "", "snippet": "s"},)


def test_query_and_tuple_files_carry_the_context_fields(tmp_path):
    qfile = tmp_path / "queries.jsonl"
    qfile.write_text(json.dumps({"_id": "1", "text": "q", "reasoning": "r", "current_reasoning": "c",
                                 "prior_queries": ["a"], "prior_results": [{"title": "T", "text": "s"}, "plain"],
                                 "answers": ["x"]}) + "\n" + json.dumps({"_id": "2", "text": "q2"}) + "\n")
    a, b = read_queries(qfile)
    assert (a.current_reasoning, a.prior_queries, a.extra) == ("c", ("a",), {"answers": ["x"]})
    assert a.prior_results == ({"title": "T", "snippet": "s"}, {"title": "", "snippet": "plain"})
    assert (b.current_reasoning, b.prior_queries, b.prior_results) == (None, None, None)
    pos, neg = [passage_dict("d1", "T", "x")], [passage_dict("d2", "", "y")]
    plain = tuple_line("q1", "q", "r", pos, neg)
    assert plain == tuple_line("q1", "q", "r", pos, neg, {"current_reasoning": None})
    assert list(json.loads(plain)) == ["query_id", "query", "reasoning", "positive_passages", "negative_passages"]
    line = tuple_line("q1", "q", "r", pos, neg, {"current_reasoning": "c", "prior_queries": ("a",),
                                                  "prior_results": [{"title": "", "snippet": "s"}]})
    t = parse_tuple(json.loads(line), "f", 1)
    assert (t.reasoning, t.current_reasoning, t.prior_queries) == ("r", "c", ("a",))
    assert as_context(t) == QueryContext("r", "c", ("a",), ({"title": "", "snippet": "s"},))
    f = tmp_path / "t.jsonl"
    f.write_text(plain + "\n")
    (old,) = read_training_tuples(f)
    assert (old.current_reasoning, old.prior_queries, old.prior_results) == (None, None, None)
    with pytest.raises(FormatError, match="'prior_queries' as a list of strings"):
        parse_tuple({**json.loads(plain), "prior_queries": "a"}, "f", 3)


def test_encoder_config_alias_and_saved_variant(tmp_path, tiny_bert_dir):
    assert EncoderConfig().query_input == "reasoning"
    assert EncoderConfig(reasoning_aware=False).query_input == "query"
    c = EncoderConfig(query_input="reasoning_tail:32")
    assert c.reasoning_aware and c.query_variant() == QueryInput("reasoning_tail", 32)
    c.reasoning_aware = False  # switched off after construction (scripts do): plain queries
    assert c.query_variant() == QUERY
    from hopscotch.retriever.model.dual_encoder import DualEncoder

    model = DualEncoder.from_pretrained(tiny_bert_dir, EncoderConfig(query_input="current_reasoning",
                                                                     query_max_len=40))
    out = model.save(tmp_path / "saved")
    assert json.loads((tmp_path / "saved" / "hopscotch_config.json").read_text())["query_input"] == \
        "current_reasoning"
    assert read_saved_config(out).query_input == "current_reasoning"
    assert model_settings(out).query_input == "current_reasoning"
    assert model_settings(tiny_bert_dir).query_input is None  # not a Hopscotch-trained folder
    # a config saved before the knob existed reads back by its reasoning_aware
    cfg = tmp_path / "saved" / "hopscotch_config.json"
    old = {k: v for k, v in json.loads(cfg.read_text()).items() if k != "query_input"}
    cfg.write_text(json.dumps({**old, "reasoning_aware": False}))
    assert read_saved_config(out).query_input == "query"
    texts = model.format_queries(["q", "q"], [CONTEXT, CONTEXT], query_inputs=[None, "prior_queries"])
    assert texts == ["Reasoning: The results list Gummo. Next: the year.\n\nQuery: q",
                     "Reasoning: Harmony Korine films\nKorine director\n\nQuery: q"]
