"""The runs the ablations share (:mod:`hopscotch_experiments.ablations.ablation_runs`): the late-fusion runs the
agent ablation tunes w on (which the late-fusion gate shares) against the dense searcher itself; file names of
variants and fusion settings."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hopscotch_experiments.ablations.ablation_runs import file_safe, late_fusion_runs, settings_tag


def _agent_steps(small_world, tmp_path):
    from hopscotch.retriever.io.queries import read_queries

    rows = [json.loads(line) for line in (small_world / "queries.jsonl").read_text().splitlines()][:12]
    path = tmp_path / "steps.jsonl"
    path.write_text("".join(json.dumps({"_id": r["_id"], "text": r["text"],
                                        "reasoning": f"Earlier I looked up {r['text'].split()[0]} and more."
                                        if i % 2 == 0 else ""}) + "\n" for i, r in enumerate(rows)))
    return list(read_queries(path))


def _same(run: dict, ranked: list, queries) -> None:
    for q, hits in zip(queries, ranked):
        assert list(run[q.qid]) == [d for d, _ in hits]
        assert np.allclose(list(run[q.qid].values()), [s for _, s in hits], atol=1e-5)


def test_late_fusion_runs_are_what_the_dense_searcher_returns(small_world, small_world_index, tiny_bert_dir,
                                                              tmp_path):
    from hopscotch.retriever.searchers import build_searcher

    queries = _agent_steps(small_world, tmp_path)
    runs, encoder = late_fusion_runs(small_world_index, str(tiny_bert_dir), "reasoning", queries,
                                     weights=(0.0, 0.4, 1.0), k=10)
    assert set(runs) == {0.0, 0.4, 1.0} and encoder is not None
    for w, run in runs.items():
        searcher = build_searcher("dense", index=small_world_index, model=str(tiny_bert_dir),
                                  query_input="reasoning", late_fusion=w)
        _same(run, searcher.search_batch([q.with_reasoning() for q in queries], 10), queries)
    assert runs[0.0] != runs[1.0]
    # with a word gate below every reasoning's length, each w searches those steps with the query alone
    gated, _ = late_fusion_runs(small_world_index, str(tiny_bert_dir), "reasoning", queries, gate=3,
                                encoder=encoder, weights=(1.0,), k=10)
    long_ones = {q.qid for q in queries if len((q.reasoning or "").split()) > 3}
    assert long_ones and all(gated[1.0][q] == pytest.approx(runs[0.0][q], abs=1e-5) for q in long_ones)


def test_file_names_of_variants_and_fusion_settings():
    assert file_safe("reasoning_tail:128") == "reasoning_tail128" and file_safe("query") == "query"
    tags = {settings_tag(m) for m in (None, "interp", "rrf", "adaptive")}
    assert all(len(t) == 8 for t in tags) and len(tags) >= 3   # `--fusion` alone is one of the three methods
    assert settings_tag("rrf") == settings_tag("rrf")
