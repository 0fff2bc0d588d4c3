"""The selection rule (retriever/evaluation/selection.py): the objective ranks, a guard's significant loss
disqualifies, a loss within the noise or under the margin does not; the report names both rows' guards."""

from __future__ import annotations

import numpy as np
import pytest

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.evaluation.selection import select_default


def _table(values) -> dict:
    return {f"q{i}": {"ndcg@10": float(v)} for i, v in enumerate(values)}


RNG = np.random.default_rng(0)
BASE_GUARD = RNG.uniform(0.3, 0.75, 200)
#: a loss beyond the margin (-0.015) but within the noise: +0.2 and -0.23 in turn
NOISE = np.where(np.arange(200) % 2 == 0, 0.2, -0.23)


def _candidate(objective: float, guard_shift: float | np.ndarray) -> dict:
    return {"agent": _table(np.full(30, objective)), "pages": _table(np.full(30, objective + 0.1)),
            "guard": _table(np.clip(BASE_GUARD + guard_shift, 0, 1)), "other": _table(BASE_GUARD)}


BASE = _candidate(0.40, 0.0)


def test_a_significant_guard_loss_disqualifies_and_the_objective_ranks_the_rest():
    candidates = {"plain": BASE, "big_but_loses": _candidate(0.70, -0.05), "good": _candidate(0.60, 0.0),
                  "noisy_loss": _candidate(0.55, NOISE), "small_loss": _candidate(0.65, -0.005)}
    s = select_default(candidates, BASE, ["agent", "pages"], ["guard", "other"])
    big = s.judged["big_but_loses"]
    assert big.disqualified and big.disqualified_by == ["guard"] and big.guards["guard"].p < 0.05
    assert big.guards["guard"].delta == pytest.approx(-0.05, abs=1e-3)
    # a significant loss smaller than the margin does not disqualify (and is not even tested)
    small = s.judged["small_loss"]
    assert not small.disqualified and small.guards["guard"].delta == pytest.approx(-0.005, abs=1e-3)
    noisy = s.judged["noisy_loss"]   # a loss beyond the margin but within the noise: tested, not significant
    assert not noisy.disqualified and noisy.guards["guard"].delta == pytest.approx(-0.015) and (
        noisy.guards["guard"].p > 0.05)
    assert s.pick.name == "small_loss" and s.runner_up.name == "good"
    assert s.pick.objective == pytest.approx((0.65 + 0.75) / 2)
    # the report: the rule, then both rows with the objective and every guard's delta and p
    text = "\n".join(s.lines())
    assert "pick: small_loss" in text and "runner-up: good" in text and "p < 0.05" in text
    assert text.count("guard guard: delta") == 2 and text.count("guard other: delta") == 2
    assert "not tested" not in text   # the printed rows get every p
    record = s.record(extra="x")
    assert record["pick"] == "small_loss" and record["runner_up"] == "good" and record["split"] == "tune"
    assert record["objective_sets"] == ["agent", "pages"] and record["guard_sets"] == ["guard", "other"]
    assert "p < 0.05" in record["rule"] and record["extra"] == "x"


def test_ties_keep_the_first_given_and_the_margin_and_alpha_are_settings():
    s = select_default({"a": _candidate(0.5, 0.0), "b": _candidate(0.5, 0.0)}, BASE, ["agent"], ["guard"])
    assert (s.pick.name, s.runner_up.name) == ("a", "b")
    loses = {"plain": BASE, "x": _candidate(0.9, -0.05)}
    assert select_default(loses, BASE, ["agent"], ["guard"]).pick.name == "plain"
    assert select_default(loses, BASE, ["agent"], ["guard"], max_loss=0.1).pick.name == "x"
    assert select_default(loses, BASE, ["agent"], ["guard"], alpha=1e-9).pick.name == "x"


def test_bad_calls_are_refused():
    with pytest.raises(UsageError, match="no candidate"):
        select_default({}, BASE, ["agent"], ["guard"])
    with pytest.raises(UsageError, match="both objective and guard"):
        select_default({"a": BASE}, BASE, ["agent"], ["agent"])
    with pytest.raises(UsageError, match="no results on"):
        select_default({"a": {"agent": BASE["agent"]}}, BASE, ["agent"], ["guard"])
    with pytest.raises(UsageError, match="every candidate loses"):
        select_default({"x": _candidate(0.9, -0.2)}, BASE, ["agent"], ["guard"])
