"""``hopscotch tune-fusion``: the grid finds the best interpolation, the guard keeps the better component,
the tuned JSON drives ``HybridSearcher`` (``--fusion-config``), and the whole loop runs from the CLI."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.io.runs import read_run, write_run
from hopscotch.retriever.searchers.adapter.build import fusion_from_args
from hopscotch.retriever.searchers.fusion import FusionSettings, read_fusion_config
from hopscotch.retriever.searchers.fusion_tuning import (
    TuningOptions,
    component_of,
    fuse_runs,
    fusion_grid,
    judged_qids,
    split_qids,
    tune_fusion,
)
from hopscotch.retriever.searchers.hybrid import HybridSearcher


def _runs_where_truth_is(weight: float, queries: int = 40, docs: int = 20, seed: int = 0, norm: str = "minmax"):
    """BM25 and dense runs whose scores span exactly [0, 1] per query, and graded qrels whose three relevant
    documents are the top of ``weight * bm25 + (1 - weight) * dense`` on ``norm``-normalised scores:
    interpolation at ``weight`` with that normalisation is perfect."""
    rng = np.random.default_rng(seed)
    sparse, dense, qrels = {}, {}, {}
    for q in range(queries):
        s, d = rng.random(docs) ** 3, rng.random(docs)      # skewed BM25-like scores: the two norms disagree
        s, d = (s - s.min()) / (s.max() - s.min()), (d - d.min()) / (d.max() - d.min())
        ids = [f"q{q}d{i}" for i in range(docs)]
        sparse[f"q{q}"] = dict(zip(ids, (float(x) * 7 for x in s)))       # BM25-like scale; normalised away
        dense[f"q{q}"] = dict(zip(ids, (float(x) for x in d)))
        ns, nd = (s, d) if norm == "minmax" else ((s - s.mean()) / s.std(), (d - d.mean()) / d.std())
        truth = np.argsort(-(weight * ns + (1 - weight) * nd))[:3]
        qrels[f"q{q}"] = {ids[i]: 3 - rank for rank, i in enumerate(truth)}
    return sparse, dense, qrels


def test_the_tuner_finds_the_interpolation_weight_that_made_the_qrels():
    sparse, dense, qrels = _runs_where_truth_is(0.3)
    dev, test = split_qids(judged_qids(qrels), 0.5, seed=1)
    result = tune_fusion(sparse, dense, qrels, dev, test)
    assert result.guard is None and result.chosen.method == "interp"
    assert result.chosen.sparse_weight == pytest.approx(0.3)
    assert result.chosen_dev == pytest.approx(1.0)
    assert result.test[result.chosen_label].mean["ndcg@10"] == pytest.approx(1.0)
    assert max(result.components_dev.values()) < 0.95
    assert result.chosen.normalization == "minmax"
    assert all(score < 1.0 for s, score in result.grid if s != result.chosen and s.normalization == "minmax")
    assert result.comparison.delta > 0 and result.comparison.p_randomization < 0.05
    out = result.to_json()
    assert out["method"] == "interp" and out["sparse_weight"] == pytest.approx(0.3) and out["guard"] is None
    assert out["test_score"] == pytest.approx(1.0) and set(out["components"]) == {"bm25", "dense"}
    assert out["paired_test"]["against"] == result.better and out["dev_queries"] == 20


def test_the_tuner_tells_the_two_normalisations_apart():
    sparse, dense, qrels = _runs_where_truth_is(0.4, norm="zscore", seed=4)
    dev, test = split_qids(judged_qids(qrels), 0.5, seed=1)
    result = tune_fusion(sparse, dense, qrels, dev, test)
    assert result.chosen == FusionSettings.convex(0.4, "zscore") and result.chosen_dev == pytest.approx(1.0)
    assert result.chosen_label == "interp zscore w=0.40 (chosen)"
    assert max(score for s, score in result.grid if s.normalization == "minmax") < result.chosen_dev
    assert FusionSettings.from_json(json.loads(json.dumps(result.chosen.to_json()))) == result.chosen
    assert fusion_grid([0.4], [], normalizations=["minmax"]) == [FusionSettings.convex(w) for w in (0, 0.4, 1)]
    with pytest.raises(UsageError, match="normalisation"):
        fusion_grid([0.4], [], normalizations=[])


def test_the_guard_keeps_the_better_component_when_fusion_cannot_help():
    sparse, dense, qrels = _runs_where_truth_is(0.0, seed=3)   # dense alone is perfect; BM25 only adds noise
    dev, test = split_qids(judged_qids(qrels), 0.5, seed=2)
    result = tune_fusion(sparse, dense, qrels, dev, test, options=TuningOptions(min_gain=0.0))
    assert result.guard == "dense" and result.better == "dense"
    assert component_of(result.chosen) == "dense" and result.chosen.sparse_weight == 0.0
    assert result.chosen == FusionSettings("interp", alpha=0.0)
    assert result.chosen_dev == pytest.approx(result.components_dev["dense"]) == pytest.approx(1.0)
    assert "guard" in result.note and "dense alone" in result.note
    assert result.comparison.delta == pytest.approx(0.0)
    # swap the roles: BM25 is the better half and the guard keeps BM25 (interpolation weight 1)
    flipped = tune_fusion(dense, sparse, qrels, dev, test)
    assert flipped.guard == "bm25" and flipped.chosen.sparse_weight == 1.0 and flipped.chosen.weight_on_dense


def test_min_gain_makes_the_guard_stricter():
    sparse, dense, qrels = _runs_where_truth_is(0.3)
    dev, test = split_qids(judged_qids(qrels), 0.5, seed=1)
    result = tune_fusion(sparse, dense, qrels, dev, test, options=TuningOptions(min_gain=1.0))
    assert result.guard == result.better and component_of(result.chosen) == result.better


def _claims_hold(note: str) -> None:
    """Every ``a OP b`` the note prints holds for the two numbers as printed, and its verb says the same."""
    import re

    found = re.findall(r"(\d+\.\d{4}) ([<=>]) (\d+\.\d{4})", note)
    assert found, note
    for a, op, b in found:
        assert {">": float(a) > float(b), "=": float(a) == float(b), "<": float(a) < float(b)}[op], note
        if " beats " in note and "no more than" not in note:
            assert op == ">", note
        if op != ">":
            assert "does not beat" in note or " ties with " in note or " is below " in note, note


@pytest.mark.parametrize("min_gain", [-1.0, -0.01, 0.0, 0.01, 1.0])
@pytest.mark.parametrize("truth", [0.0, 0.3, 1.0])
def test_every_printed_claim_is_computed_from_the_numbers_it_prints(truth, min_gain):
    """``--min-gain -1`` takes a fusion below the better component: the note says it is below, with '<', never
    'beats ... 0.5573 > 0.5606'; a positive margin that keeps the component says the fusion does not beat it by
    the margin."""
    from hopscotch.retriever.searchers.fusion_tuning import format_report

    sparse, dense, qrels = _runs_where_truth_is(truth, seed=5)
    dev, test = split_qids(judged_qids(qrels), 0.5, seed=1)
    result = tune_fusion(sparse, dense, qrels, dev, test, options=TuningOptions(min_gain=min_gain))
    _claims_hold(result.note)
    assert result.note in format_report(result)
    if min_gain < 0 and result.guard is None and result.chosen_dev < result.components_dev[result.better]:
        assert " is below the better component" in result.note and "--min-gain" in result.note


def test_grid_split_and_convex_weights():
    grid = fusion_grid([0.5], [20, 60], [(1, 1), (2, 1)])
    assert [s.describe() for s in grid] == ["interp w=0.00", "interp w=0.50", "interp w=1.00",
                                            "interp zscore w=0.50", "rrf k=20",
                                            "rrf k=20 w=2:1", "rrf k=60", "rrf k=60 w=2:1"]
    assert grid[1] == FusionSettings("interp", alpha=1.0)             # w = 0.5 is Pyserini's default
    high = FusionSettings.convex(0.8)
    assert high.weight_on_dense and high.alpha == pytest.approx(0.25)       # bm25 + 0.25 * dense
    assert component_of(FusionSettings("rrf", weights=(0.0, 1.0))) == "dense"
    dev, test = split_qids([f"q{i}" for i in range(10)], 0.3, seed=5)
    assert len(dev) == 3 and len(test) == 7 and not set(dev) & set(test)
    assert split_qids([f"q{i}" for i in range(10)], 0.3, seed=5) == (dev, test)
    with pytest.raises(UsageError, match="strictly between"):
        split_qids(["a", "b"], 1.0)


def test_tuned_json_round_trips_into_the_hybrid_searcher(tmp_path, cli):
    sparse, dense, qrels = _runs_where_truth_is(0.3)
    write_run(tmp_path / "bm25.trec", sparse)
    write_run(tmp_path / "dense.trec", dense)
    (tmp_path / "qrels.tsv").write_text("".join(f"{q} 0 {d} {g}\n" for q, docs in qrels.items()
                                                for d, g in docs.items()))
    (tmp_path / "dev.txt").write_text("".join(f"q{i}\n" for i in range(0, 40, 2)))
    code, out, err = cli("tune-fusion", "--sparse", tmp_path / "bm25.trec", "--dense", tmp_path / "dense.trec",
                         "--qrels", tmp_path / "qrels.tsv", "--dev-qids", tmp_path / "dev.txt",
                         "--rrf-weights", "1:1,2:1", "--out", tmp_path / "tuned.json")
    assert code == 0, err
    assert "held-out: 20 queries" in out and "interp w=0.30 (chosen)" in out and "paired test" in out
    saved = json.loads((tmp_path / "tuned.json").read_text())
    assert saved["method"] == "interp" and saved["dev_queries"] == 20 and saved["metric"] == "ndcg@10"
    assert {"dev", "test"} <= set(saved["components"]["dense"]) and len(saved["grid"]) == 11 + 9 + 10 + 9 * 3 * 3  # + adaptive
    parser = argparse.ArgumentParser()
    HybridSearcher.parse_args(parser)
    settings = fusion_from_args(parser.parse_args(["--fusion-config", str(tmp_path / "tuned.json")]))
    assert settings == read_fusion_config(tmp_path / "tuned.json") and settings.sparse_weight == pytest.approx(0.3)
    # the searcher fuses exactly what the tuner scored
    hybrid = HybridSearcher(_Fixed(sparse), _Fixed(dense), fusion=settings.method, alpha=settings.alpha,
                            weight_on_dense=settings.weight_on_dense, normalization=settings.normalization, depth=20)
    want = fuse_runs(sparse, dense, settings, ["q3"], k=10)["q3"]
    assert hybrid.search_batch(["q3"], k=10) == [list(want.items())]
    with pytest.raises(UsageError, match="contradicts"):
        fusion_from_args(parser.parse_args(["--fusion", "rrf", "--fusion-config",
                                                           str(tmp_path / "tuned.json")]))


def test_weighted_rrf_settings_round_trip(tmp_path):
    settings = FusionSettings("rrf", rrf_k=20, weights=(2, 1))
    (tmp_path / "rrf.json").write_text(json.dumps({**settings.to_json(), "metric": "ndcg@10"}))
    assert read_fusion_config(tmp_path / "rrf.json") == settings and settings.weights == (2.0, 1.0)
    hybrid = HybridSearcher(_Fixed({"q": {"a": 3.0, "b": 2.0}}), _Fixed({"q": {"b": 0.9, "c": 0.1}}), fusion="rrf",
                            rrf_k=20, weights=(2.0, 1.0))
    (fused,) = hybrid.search_batch(["q"], k=3)     # b: 2/(20+2) + 1/(20+1); a: 2/(20+1); c: 1/(20+2)
    assert [d for d, _ in fused] == ["b", "a", "c"]
    assert [x for _, x in fused] == pytest.approx([2 / 22 + 1 / 21, 2 / 21, 1 / 22])
    (tmp_path / "bad.json").write_text('{"method": "max"}')
    with pytest.raises(UsageError, match="unknown method"):
        read_fusion_config(tmp_path / "bad.json")
    with pytest.raises(UsageError, match="RRF weights"):
        FusionSettings("rrf", weights=(0, 0))


class _Fixed:
    """A stand-in searcher that returns fixed lists (query text = qid)."""

    docstore = object()
    takes_reasoning = False

    def __init__(self, run):
        self.run = run

    def search_batch(self, queries, k=10):
        return [sorted(self.run[q.text].items(), key=lambda kv: (-kv[1], kv[0]))[:k] for q in queries]


def test_tune_fusion_end_to_end_from_the_cli(cli, small_world, small_world_index, tmp_path):
    queries, qrels = small_world / "queries.jsonl", small_world / "qrels.tsv"
    assert cli("bm25-index", "--corpus", small_world / "corpus.jsonl", "--out", tmp_path / "bm25")[0] == 0
    bm25, dense, tuned, hybrid = (tmp_path / n for n in ("bm25.trec", "dense.trec", "tuned.json", "hybrid.trec"))
    assert cli("search", "--queries", queries, "--bm25", tmp_path / "bm25", "--k", 50, "--out", bm25)[0] == 0
    assert cli("search", "--queries", queries, "--index", small_world_index, "--k", 50, "--out", dense)[0] == 0
    code, out, err = cli("tune-fusion", "--sparse", bm25, "--dense", dense, "--qrels", qrels, "--dev-fraction", 0.5,
                         "--seed", 3, "--rrf-ks", "20,60", "--out", tuned)
    assert code == 0, err
    assert "bm25" in out and "dense" in out and "(chosen)" in out and "± " in out
    saved = json.loads(tuned.read_text())
    assert saved["test_score"] >= 0 and saved["dev_score"] >= max(c["dev"] for c in saved["components"].values())
    code, _, err = cli("search", "--queries", queries, "--bm25", tmp_path / "bm25", "--index", small_world_index,
                       "--fusion-config", tuned, "--depth", 50, "--k", 10, "--out", hybrid)
    assert code == 0, err
    settings = read_fusion_config(tuned)
    want = fuse_runs(read_run(bm25), read_run(dense), settings, read_run(bm25), k=10)
    got = read_run(hybrid)
    assert set(got) == set(want)
    overlap = [len(set(got[q]) & set(want[q])) / len(want[q]) for q in want]
    assert np.mean(overlap) > 0.95   # the runs' 6-decimal scores may reorder near-ties at the cut
    code, _, err = cli("tune-fusion", "--sparse", bm25, "--dense", dense, "--qrels", qrels, "--alphas", "x")
    assert code == 2 and "--alphas" in err
