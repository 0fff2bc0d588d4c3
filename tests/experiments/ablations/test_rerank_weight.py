"""The reranker's first-stage weight and depth (:mod:`hopscotch_experiments.ablations.rerank_weight`): a run derived
from the reranker's cached scores is the run ``hopscotch search --rerank-depth N --rerank-first-weight W`` writes;
the weight is chosen by the selection rule; the report names the pick and the test table's depths."""

from __future__ import annotations

import json

import pytest

from hopscotch_experiments.ablations import rerank_weight as rw
from hopscotch.retriever.io.runs import ranked


def test_a_derived_run_is_the_clis(small_world, tiny_cross_encoder_dir, tmp_path, cli):
    from hopscotch.retriever.index.bm25 import BM25Index
    from hopscotch.retriever.io.corpus import read_corpus
    from hopscotch.retriever.io.runs import read_run

    corpus = small_world / "corpus.jsonl"
    BM25Index.build(read_corpus(corpus), show_progress=False).save(tmp_path / "bm25")
    rows = [json.loads(line) for line in (small_world / "queries.jsonl").read_text().splitlines()][:5]
    for row in rows:
        row["reasoning"] = f"I should look up {row['text'].split()[-1]} first."
    (tmp_path / "q.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    base = ["search", "--queries", tmp_path / "q.jsonl", "--bm25", tmp_path / "bm25", "--reasoning", "--k", 12]

    def run(name, *extra):
        code, _, err = cli(*base, "--out", tmp_path / f"{name}.trec", *extra)
        assert code == 0, err
        return read_run(tmp_path / f"{name}.trec")

    first = run("first")
    rerank = ["--corpus", corpus, "--rerank-model", tiny_cross_encoder_dir]
    w0 = run("w0", *rerank, "--rerank-depth", 8, "--rerank-first-weight", 0)
    scores = {q: {d: w0[q][d] for d, _ in ranked(first[q])[:8]} for q in first}
    for depth, weight in ((8, 0.0), (5, 0.3), (3, 0.7)):
        want = run(f"d{depth}w{weight}", *rerank, "--rerank-depth", depth, "--rerank-first-weight", weight)
        got = rw.derived_run(first, scores, depth, weight, k=12)
        for q in want:
            assert [d for d, _ in ranked(got[q])] == [d for d, _ in ranked(want[q])]
            assert [s for _, s in ranked(got[q])] == pytest.approx([s for _, s in ranked(want[q])], abs=1e-4)
    with pytest.raises(ValueError, match="miss some of its top 9"):
        rw.derived_run(first, scores, 9, 0.0)


class _Set:
    def __init__(self, qids):
        self.tune, self.test = qids, qids
        self.qrels = {q: {"gold": 1} for q in qids}


def _measured() -> dict:
    """Two sets of 30 queries; the first stage ranks the gold 3rd; the reranker puts it first on the objective set
    and last of its top 5 on the guard set."""
    qids = {n: [f"{n}{i}" for i in range(30)] for n in ("tongyi_turn", "hotpotqa")}
    first = {n: {q: {"a": 5.0, "b": 4.0, "gold": 3.0, "c": 2.0, "d": 1.0} for q in qs} for n, qs in qids.items()}
    scores = {"tongyi_turn": {q: {"a": 0.1, "b": 0.2, "gold": 0.9, "c": 0.3, "d": 0.0} for q in qids["tongyi_turn"]},
              "hotpotqa": {q: {"a": 0.9, "b": 0.8, "gold": 0.0, "c": 0.7, "d": 0.6} for q in qids["hotpotqa"]}}
    return {"sets": {n: _Set(qs) for n, qs in qids.items()}, "first": first, "scores": scores,
            "kind": "cross_encoder", "depth": 5}


def test_the_weight_is_chosen_by_the_rule_and_the_report_names_it():
    measured = _measured()
    selection, candidates = rw.choose(measured, (0.0, 0.5, 0.9))
    # W = 0 wins the objective but loses the guard significantly; W = 0.9 keeps the first stage's order on both
    assert selection.judged["W=0"].disqualified and selection.judged["W=0"].disqualified_by == ["hotpotqa"]
    assert selection.pick.name in ("W=0.5", "W=0.9", "first stage alone") and not selection.pick.disqualified
    text = rw.render(measured, selection, "python scripts/agent_rerank_weight.py --model M")
    assert "selection rule:" in text and "| reranked top 5, W = " in text and "| reranked top 10," not in text
    assert rw.markers("cross_encoder") == (rw.CE_START, rw.CE_END) and rw.markers("multi_vector") == (rw.START, rw.END)
