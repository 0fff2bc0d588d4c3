"""The harness edge: a query string a harness sends becomes a typed Query there (AgentIR's template read back into
its query and reasoning), and nowhere below it."""

from __future__ import annotations

from hopscotch.retriever.io.queries import Query
from hopscotch.retriever.model.query_template import format_query
from hopscotch.retriever.searchers.harness import harness_query, read_template, snippet_of

REASON = "The film came out in 1997; its director also wrote Kids."


def test_a_plain_string_is_a_plain_query_and_a_reasoning_makes_it_reasoning_aware():
    assert harness_query("who directed Gummo") == Query("who directed Gummo")
    assert harness_query("who directed Gummo", REASON) == Query("who directed Gummo", REASON, reasoning_aware=True)
    blank = harness_query("who directed Gummo", "")   # a blank reasoning is still a reasoning-aware call ('Empty')
    assert blank.reasoning_aware and blank.reasoning == ""


def test_agentir_template_is_read_back_into_query_and_reasoning():
    sent = format_query("who directed Gummo", REASON)
    assert sent == f"Reasoning: {REASON}\n\nQuery: who directed Gummo"
    assert harness_query(sent, qid="q7") == Query("who directed Gummo", REASON, reasoning_aware=True, qid="q7")
    empty = harness_query(format_query("who directed Gummo", None))       # 'Reasoning: Empty'
    assert (empty.text, empty.reasoning, empty.reasoning_aware) == ("who directed Gummo", None, True)
    assert harness_query(sent, "a reasoning sent beside it").reasoning == "a reasoning sent beside it"  # it wins


def test_a_query_file_row_in_the_template_is_read_as_its_query_and_reasoning():
    row = Query(format_query("who directed Gummo", REASON), qid="q1", extra={"answers": ["Harmony Korine"]})
    got = read_template(row)
    assert (got.text, got.reasoning, got.reasoning_aware, got.qid) == ("who directed Gummo", REASON, True, "q1")
    assert got.extra == {"answers": ["Harmony Korine"]}
    own = Query(format_query("who directed Gummo", "the template's"), "the row's own", reasoning_aware=True)
    assert read_template(own).reasoning == "the row's own" and read_template(own).text == "who directed Gummo"
    plain = Query("who directed Gummo", qid="q2")
    assert read_template(plain) is plain


def test_snippets_are_cut_at_a_word_boundary_when_one_is_near():
    assert snippet_of("short text", 100) == "short text" and snippet_of("abc", None) == "abc"
    assert snippet_of("one two three four", 14) == "one two three"            # a space near the cut
    assert snippet_of("one twothreefour", 12) == "one twothree"                # none near: cut where it falls
