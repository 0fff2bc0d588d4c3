"""scripts/agent_ablation.py: the markdown table and the marked docs section it replaces, and the late-fusion
runs it tunes w on (which scripts/late_fusion_gate.py shares) against the dense searcher itself."""

from __future__ import annotations

import json

import numpy as np
import pytest


@pytest.fixture(scope="module")
def ablation(load_script):
    return load_script("agent_ablation")


def _result() -> dict:
    def cells(mean, p):
        return {"a": {"mean": mean, "ci95": 0.05, "p": p}, "b": {"mean": mean / 2, "ci95": 0.01, "p": p}}

    return {"sets": {"a": {"title": "Set A", "note": "first set", "test_steps": 12},
                     "b": {"title": "Set B (pseudo-qrels)", "note": "PSEUDO-QRELS here", "test_steps": 7}},
            "rows": [{"label": "base: query", "model": "base", "cells": cells(0.5, None)},
                     {"label": "base: reasoning (default)", "model": "base", "cells": cells(0.61234, 0.01)},
                     {"label": "BM25", "model": "-", "cells": {"a": {"mean": 0.4, "ci95": 0.1, "p": 0.5}}}],
            "tuned": {"base": {"variant": "reasoning", "w": 0.7}},
            "checks": {"a": ["base `reasoning` beats base query-only: YES"], "b": ["no"]},
            "timings": {"search_s": 1.0}, "command": "python scripts/agent_ablation.py"}


def test_render_table_has_one_row_per_system_and_a_column_per_set(ablation):
    text = ablation.render_table(_result())
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("| system"))
    assert header == "| system | Set A (12) | Set B (pseudo-qrels) (7) |"
    table = [line for line in lines if line.startswith("| ")]
    assert len(table) == 1 + 3
    assert "| base: query | 0.500 ± 0.050 | 0.250 ± 0.010 |" in lines
    assert "| base: reasoning (default) | 0.612 ± 0.050 (p=0.010*) | 0.306 ± 0.010 (p=0.010*) |" in lines
    assert "| BM25 | 0.400 ± 0.100 (p=0.500) | — |" in lines
    assert "PSEUDO-QRELS here" in text and "late-fusion w = 0.7" in text
    assert "* Set A: base `reasoning` beats base query-only: YES" in text


def test_replace_section_replaces_between_the_markers_only(ablation):
    start, end = ablation.START, ablation.END
    doc = f"# Benchmarks\n\nbefore\n\n{start}\nold table\n{end}\n\nafter\n"
    new = ablation.replace_section(doc, "new table\n")
    assert new == f"# Benchmarks\n\nbefore\n\n{start}\nnew table\n{end}\n\nafter\n"
    assert ablation.replace_section(new, "new table") == new  # idempotent


def test_replace_section_appends_when_the_markers_are_absent(ablation):
    start, end = ablation.START, ablation.END
    assert ablation.replace_section("# Benchmarks\n\ntext\n", "T") == f"# Benchmarks\n\ntext\n\n{start}\nT\n{end}\n"
    assert ablation.replace_section("", "T") == f"{start}\nT\n{end}\n"
    again = ablation.replace_section(ablation.replace_section("x\n", "one"), "two")
    assert again.count(start) == 1 and "two" in again and "one" not in again


def test_variants_cover_every_query_input(ablation):
    from hopscotch.retriever.model.query_input import KINDS, QueryInput

    assert {QueryInput.parse(v).kind for v in ablation.VARIANTS} == set(KINDS)


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


def test_late_fusion_runs_are_what_the_dense_searcher_returns(ablation, small_world, small_world_index,
                                                              tiny_bert_dir, tmp_path):
    from hopscotch.retriever.model.query_input import ReasoningContext
    from hopscotch.retriever.searchers import build_searcher

    queries = _agent_steps(small_world, tmp_path)
    texts, contexts = [q.text for q in queries], [ReasoningContext.of(q) for q in queries]
    runs, encoder = ablation.late_fusion_runs(small_world_index, str(tiny_bert_dir), "reasoning", queries,
                                              weights=(0.0, 0.4, 1.0), k=10)
    assert set(runs) == {0.0, 0.4, 1.0} and encoder is not None
    for w, run in runs.items():
        searcher = build_searcher("dense", index=small_world_index, model=str(tiny_bert_dir),
                                  query_input="reasoning", late_fusion=w)
        _same(run, searcher.search_batch(texts, 10, contexts, reasoning_aware=True), queries)
    assert runs[0.0] != runs[1.0]
    # with a word gate below every reasoning's length, each w searches those steps with the query alone
    gated, _ = ablation.late_fusion_runs(small_world_index, str(tiny_bert_dir), "reasoning", queries, gate=3,
                                         encoder=encoder, weights=(1.0,), k=10)
    long_ones = {q.qid for q in queries if len(str(ReasoningContext.of(q)).split()) > 3}
    assert long_ones and all(gated[1.0][q] == pytest.approx(runs[0.0][q], abs=1e-5) for q in long_ones)
