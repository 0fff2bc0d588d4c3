"""The agent ablation (:mod:`hopscotch_experiments.ablations.agent_ablation`): its variants and its acceptance
checks."""

from __future__ import annotations

from hopscotch_experiments.ablations.agent_ablation import HYBRIDS, VARIANTS, acceptance


def test_variants_cover_every_query_input():
    from hopscotch.retriever.model.query_input import KINDS, QueryInput

    assert {QueryInput.parse(v).kind for v in VARIANTS} == set(KINDS)


def _result(scores: list[float]):
    """An evaluation result with per-query nDCG@10 ``scores`` (what ``evaluate`` returns, as compare_runs reads)."""
    from hopscotch.retriever.evaluation.metrics import evaluate

    qrels = {f"q{i}": {"d": 1} for i in range(len(scores))}
    # the relevant document at rank 1 (nDCG 1) or after nine others (nDCG 1/log2(11))
    run = {f"q{i}": ({"d": 1.0} if s else {**{f"x{j}": 2.0 - j / 10 for j in range(9)}, "d": 0.5})
           for i, s in enumerate(scores)}
    return evaluate(run, qrels, ["ndcg@10"])


def test_acceptance_says_which_checks_hold():
    good, bad = _result([1, 1, 1, 1, 0, 1]), _result([0, 0, 1, 0, 0, 0])
    test = {("s", "base", "query"): bad, ("s", "base", "default"): good, ("s", "base", "first-window"): bad,
            ("s", "bm25"): bad, ("s", "bm25-reasoning"): bad, ("s", "base", "hybrid-default"): good,
            ("s", "base", "hybrid"): bad, ("s", "base", "hybrid-query"): bad,
            **{("s", "base", f"hybrid-{h}"): good for h in HYBRIDS}}
    lines = acceptance("s", test, {"base": {"variant": "reasoning", "w": 0.5}}, {"base": "minilm"})
    assert len(lines) == 4 + 2 + len(HYBRIDS)
    assert lines[0].startswith("BM25 --reasoning >= BM25: YES (")   # equal lists: a tie holds
    assert lines[1].startswith("base defaults >= base query-only: YES (")
    assert lines[2].startswith("default hybrid --reasoning >= the same hybrid without it: YES (")
    assert "the better of BM25 and dense (base dense)" in lines[4] and lines[4].endswith(")")
    assert ": YES (" in lines[4] and "(base, tuned) >= the better of BM25 and dense (base dense): no (" in lines[5]


def test_sets_over_one_index_share_runs_only_when_their_calls_carry_the_same_records(tmp_path):
    """The Tongyi label variants of one input shape share one search; a shape that gives the same call another
    reasoning (the turn against the accumulated thinking) gets a run of its own."""
    import json

    from hopscotch_experiments.agent_data.eval_set import EvalSet
    from hopscotch_experiments.ablations.agent_ablation import shared_runs

    def es(name, reasoning, qids):
        queries = [{"_id": q, "text": "query " + q, "reasoning": reasoning} for q in qids]
        return EvalSet(name, tmp_path / "c.jsonl", queries, {q: {"d": 1} for q in qids}, qids[:1], qids[1:],
                       index_name="idx")

    sets = {"turn": es("turn", "this turn", ["a", "b", "c"]), "turn_new": es("turn_new", "this turn", ["a", "c"]),
            "acc": es("acc", "all of it", ["a", "b", "c"]), "acc_new": es("acc_new", "all of it", ["b"])}
    prefix, spaths = shared_runs(tmp_path, sets, {})
    assert prefix["turn"] == prefix["turn_new"] != prefix["acc"] == prefix["acc_new"]
    rows = [json.loads(line) for line in spaths["acc"]["queries"].read_text().splitlines()]
    assert {r["reasoning"] for r in rows} == {"all of it"} and len(rows) == 3
    assert json.loads((tmp_path / "runs" / "names.json").read_text()) == prefix
