"""``reasoning_focus:N``: the reasoning's sentences most related to the query within N tokens (selection
instead of a length gate), its parsing, and the query text it gives through format_queries."""

from __future__ import annotations

import time

import pytest

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.model.query_input import QueryContext, QueryInput, focus_text, reasoning_text, tail_text
from hopscotch.retriever.model.query_template import format_queries

QUERY = "Gummo filming location"
TASK = "We need to find where the 1997 film by Harmony Korine was shot."
BURIED = "Early notes say Gummo was filmed in Nashville, Tennessee."  # old, and the one about the query
UNRELATED = ["Paris hosts many museums.", "Bananas grow in warm climates.", "The stock market rose today.",
             "Penguins cannot fly at all.", "Chess openings take years to master."]
NEWEST = "So the next step is clear."
REASONING = " ".join([TASK, BURIED, *UNRELATED, NEWEST])


@pytest.fixture(scope="module")
def tok():
    from transformers import AutoTokenizer

    from hopscotch.retriever.model.loading import bundled_minilm_path

    return AutoTokenizer.from_pretrained(bundled_minilm_path())


def n_tokens(tok, text: str) -> int:
    return len(tok(text, add_special_tokens=False)["input_ids"])


def test_parse_and_print_round_trip():
    assert QueryInput.parse(" reasoning_focus:64 ") == QueryInput("reasoning_focus", 64)
    assert str(QueryInput.parse("reasoning_focus:7")) == "reasoning_focus:7"
    assert QueryInput.parse("reasoning_focus:3").uses_reasoning


@pytest.mark.parametrize("bad", ["reasoning_focus", "reasoning_focus:0", "reasoning_focus:x", "reasoning_focus:-2",
                                 "reasoning_focus:", "focus:3"])
def test_bad_values_name_the_allowed_values(bad):
    with pytest.raises(UsageError, match=r"model.query_input: unknown query input .*reasoning_tail:N \(N >= 1\), "
                                         r"reasoning_focus:N \(N >= 1\), with_documents"):
        QueryInput.parse(bad, "model.query_input")


def test_accepted_wherever_a_variant_is():
    from hopscotch.retriever.model.config import EncoderConfig
    from hopscotch.retriever.searchers.dense import searcher_query_input
    from hopscotch.retriever.training.batches import parse_variant

    c = EncoderConfig(query_input="reasoning_focus:32")
    assert c.reasoning_aware and c.query_variant() == QueryInput("reasoning_focus", 32)
    assert searcher_query_input("reasoning_focus:16", None) == QueryInput("reasoning_focus", 16)
    assert parse_variant("reasoning_focus:8") == QueryInput("reasoning_focus", 8)


def test_an_old_sentence_about_the_query_is_kept_and_unrelated_newer_ones_dropped():
    # whitespace words: the newest sentence (6) and the buried one (9) fit 15; nothing else does
    assert focus_text(REASONING, 15, QUERY) == f"{BURIED} {NEWEST}"
    assert reasoning_text("reasoning_focus:15", REASONING, query=QUERY) == f"{BURIED} {NEWEST}"
    # a tail of the same budget keeps only unrelated sentences
    assert "Gummo" not in tail_text(REASONING, 15)
    # budget left after every overlapping sentence that fits goes to the ones sharing nothing, newest first
    assert focus_text(REASONING, 22, QUERY) == f"{BURIED} {UNRELATED[-1]} {NEWEST}"


def test_the_task_statement_counts_less_than_the_query():
    reasoning = " ".join([TASK, "Korine also made Kids in 1995.", "Something about Gummo here.",
                          "Unrelated words stand alone."])
    # 'Gummo' (query, 1) beats 'Korine' (task statement, 0.5); the task words still beat nothing
    assert focus_text(reasoning, 8, QUERY) == "Something about Gummo here. Unrelated words stand alone."
    assert focus_text(reasoning, 14, QUERY) == ("Korine also made Kids in 1995. Something about Gummo here. "
                                                "Unrelated words stand alone.")
    # a question given outright replaces the first sentence as the task statement
    assert focus_text(reasoning, 10, "nothing shared", question="penguins and stones") == \
        "Something about Gummo here. Unrelated words stand alone."
    assert focus_text(reasoning, 10, "nothing shared", question="Korine filmography") == \
        "Korine also made Kids in 1995. Unrelated words stand alone."


def test_ties_go_to_the_newest_and_the_newest_sentence_comes_first():
    reasoning = "Gummo alpha one. Gummo beta two. Gummo gamma three. Done now."
    assert focus_text(reasoning, 6, "Gummo") == "Gummo gamma three. Done now."
    assert focus_text(reasoning, 9, "Gummo") == "Gummo beta two. Gummo gamma three. Done now."
    # the newest sentence, unrelated as it is, goes in before a better one when both cannot
    assert focus_text("Gummo is a film by Korine. The end.", 6, "Gummo Korine") == "The end."


def test_whole_reasoning_when_it_fits_and_edge_cases(tok):
    assert focus_text(REASONING, 200, QUERY) == REASONING
    assert focus_text(f"  {REASONING}\n", len(REASONING.split()), QUERY) == REASONING
    assert reasoning_text("reasoning_focus:500", REASONING, tok, query=QUERY) == REASONING
    assert focus_text("", 5, QUERY) == "" and reasoning_text("reasoning_focus:5", None, query=QUERY) == ""
    # no sentence fits: the tail of the same budget
    long_sentence = "one two three four five six seven eight nine ten and Gummo"
    assert focus_text(long_sentence + ". Short one here now.", 3, QUERY) == "one here now."
    assert focus_text(long_sentence, 3, QUERY) == tail_text(long_sentence, 3)
    # no query: the task statement's words decide (the buried sentence's 'filmed' does not fit), then the newest
    assert focus_text(REASONING, 12, None) == f"{UNRELATED[-1]} {NEWEST}"


def test_sentences_from_separate_lines_are_joined_by_a_newline():
    reasoning = "Task: where was Gummo shot?\n\nFirst line about Gummo. Filler text here.\nLast thought Gummo.\nEnd."
    assert focus_text(reasoning, 8, "Gummo") == "First line about Gummo.\nLast thought Gummo.\nEnd."
    assert focus_text(reasoning, 11, "Gummo") == "First line about Gummo. Filler text here.\nLast thought Gummo.\nEnd."
    assert focus_text(reasoning, 13, "Gummo") == ("Task: where was Gummo shot?\nFirst line about Gummo.\n"
                                                  "Last thought Gummo.\nEnd.")


def test_the_budget_holds_in_tokenizer_tokens(tok):
    filler = [f"Paragraph {i} considers weather{i} patterns and zebra{i} migrations in detail." for i in range(60)]
    reasoning = " ".join([TASK, BURIED, *filler, NEWEST])
    assert n_tokens(tok, reasoning) > 500
    for n in (12, 25, 40, 64, 128):
        out = focus_text(reasoning, n, QUERY, tok)
        assert out and n_tokens(tok, out) <= n
        assert all(part in reasoning for part in out.split(". "))
        assert out.endswith(NEWEST)
        if n >= 25:
            assert BURIED in out
    # words are not tokens: the same budget in whitespace words keeps more
    assert len(focus_text(reasoning, 40, QUERY)) > len(focus_text(reasoning, 40, QUERY, tok))


def test_format_queries_writes_the_selection_in_the_template(tok):
    selected = focus_text(REASONING, 20, QUERY, tok)
    assert BURIED in selected and "Paris" not in selected
    context = QueryContext(reasoning=REASONING, current_reasoning=NEWEST, prior_queries=("a",))
    texts = format_queries(tok, 128, [QUERY, QUERY], [REASONING, context], query_input="reasoning_focus:20")
    assert texts == [f"Reasoning: {selected}\n\nQuery: {QUERY}"] * 2
    # the query decides: another query picks another sentence
    (other,) = format_queries(tok, 128, ["stock market"], [REASONING], query_input="reasoning_focus:20")
    assert "The stock market rose today." in other and BURIED not in other


def test_long_reasoning_is_fast(tok):
    reasoning = " ".join(f"Step {i} weighs option{i % 97} against Gummo{i % 13} and notes it down."
                         for i in range(1000))  # 10,000 words
    start = time.perf_counter()
    out = focus_text(reasoning, 128, "Gummo7 option5")
    assert time.perf_counter() - start < 2.0
    assert len(out.split()) <= 128 and "Gummo7" in out
    assert n_tokens(tok, focus_text(reasoning, 128, "Gummo7 option5", tok)) <= 128
