"""The query mix (``--query-mix``): one rule of the per-query weight, the recorded defaults and the flags' checks,
with the two callers' differences as named parameters (``variant_given``, ``mix_plain``)."""

from __future__ import annotations

import pytest

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.model.query_mix import QueryMix


def test_weight_for_a_reasoning_aware_query_follows_the_word_limit():
    mix = QueryMix(0.6, max_words=3, long_weight=0.2)
    assert mix.weight_for("one two three") == 0.6
    assert mix.weight_for("one two three four") == 0.2
    assert mix.weight_for(None) == 0.6
    assert QueryMix(0.6, max_words=3).weight_for("one two three four") == 0.0   # no long weight: the query alone
    assert QueryMix().weight_for("a b c") == 1.0 and QueryMix(max_words=1).weight_for("a b") == 0.0


def test_a_plain_query_keeps_its_encoding_unless_scores_mix_it_with_itself():
    mix = QueryMix(0.3, max_words=1, long_weight=0.9)
    assert mix.weight_for("long long context", differs=False) == 1.0                 # the dense searcher's vectors
    assert mix.weight_for("long long context", differs=False, mix_plain=True) == 0.3  # the MaxSim scorer's scores
    assert QueryMix().weight_for(None, differs=False, mix_plain=True) == 1.0


def test_recorded_mix_applies_only_when_nothing_is_chosen():
    recorded = QueryMix(0.4, 20, 0.1)
    assert QueryMix().or_recorded(recorded) == recorded
    assert QueryMix(0.9).or_recorded(recorded) == QueryMix(0.9)
    # the dense searcher: a query input variant chosen at search time searches without the model's mix
    assert QueryMix().or_recorded(recorded, variant_given=True) == QueryMix()
    # the MaxSim scorer keeps the model's weight whatever the variant (variant_given=False)
    assert QueryMix().or_recorded(QueryMix(0.4), variant_given=False) == QueryMix(0.4)


def test_a_long_weight_without_its_limit_is_refused_once_chosen():
    with pytest.raises(UsageError, match="--query-mix-long weighs contexts over --query-mix-max-words"):
        QueryMix(long_weight=0.5).or_recorded(QueryMix())
    with pytest.raises(UsageError, match="--query-mix-long"):
        QueryMix().or_recorded(QueryMix(0.5, None, 0.5))
    assert QueryMix(0.5).or_recorded(QueryMix(0.5, None, 0.5)) == QueryMix(0.5)   # the recorded one unused


@pytest.mark.parametrize("values, flag, needle", [
    ((2.0, None, None), "--query-mix", "--query-mix: expected a weight in [0, 1], got 2.0"),
    ((None, 0, None), "--query-mix", "--query-mix-max-words: expected a whole number >= 1, got 0"),
    ((None, 5, -1.0), "--query-mix", "--query-mix-long: expected a weight in [0, 1], got -1.0"),
    ((1.5, None, None), "--rerank-query-mix", "--rerank-query-mix: expected a weight in [0, 1], got 1.5"),
])
def test_checked_names_the_flag_of_a_bad_value(values, flag, needle):
    with pytest.raises(UsageError) as err:
        QueryMix.checked(*values, flag=flag)
    assert str(err.value) == needle
    assert QueryMix.checked(1, 3, 0) == QueryMix(1.0, 3, 0.0)


def test_identity_means_one_encoding_per_query():
    assert QueryMix().is_identity and QueryMix(1.0).is_identity
    assert not QueryMix(0.5).is_identity and not QueryMix(max_words=4).is_identity
