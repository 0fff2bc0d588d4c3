"""The agent ablation's report (:mod:`hopscotch_experiments.ablations.ablation_report`): the markdown table, the
marked docs section it replaces (written atomically), and the plot."""

from __future__ import annotations

import pytest

from hopscotch_experiments.ablations.ablation_report import (
    END,
    START,
    cell,
    plot,
    render_table,
    replace_section,
    update_section,
)


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


def test_render_table_has_one_row_per_system_and_a_column_per_set():
    text = render_table(_result())
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


def test_cell_marks_significance_and_missing_cells():
    assert cell(None) == "—" and cell({}) == "—"
    assert cell({"mean": 0.5, "ci95": 0.1, "p": None}) == "0.500 ± 0.100"
    assert cell({"mean": 0.5, "ci95": 0.1, "p": 0.049}) == "0.500 ± 0.100 (p=0.049*)"
    assert cell({"mean": 0.5, "ci95": 0.1, "p": 0.05}) == "0.500 ± 0.100 (p=0.050)"


def test_replace_section_replaces_between_the_markers_only():
    doc = f"# Benchmarks\n\nbefore\n\n{START}\nold table\n{END}\n\nafter\n"
    new = replace_section(doc, "new table\n")
    assert new == f"# Benchmarks\n\nbefore\n\n{START}\nnew table\n{END}\n\nafter\n"
    assert replace_section(new, "new table") == new  # idempotent


def test_replace_section_appends_when_the_markers_are_absent():
    assert replace_section("# Benchmarks\n\ntext\n", "T") == f"# Benchmarks\n\ntext\n\n{START}\nT\n{END}\n"
    assert replace_section("", "T") == f"{START}\nT\n{END}\n"
    again = replace_section(replace_section("x\n", "one"), "two")
    assert again.count(START) == 1 and "two" in again and "one" not in again


def test_update_section_rewrites_the_file_atomically_and_keeps_other_sections(tmp_path):
    docs = tmp_path / "docs" / "benchmarks.md"
    update_section(docs, "first")   # a missing file (and folder) is created
    assert docs.read_text() == f"{START}\nfirst\n{END}\n"
    update_section(docs, "other", "<!-- x:start -->", "<!-- x:end -->")
    update_section(docs, "second")
    text = docs.read_text()
    assert "second" in text and "first" not in text and "<!-- x:start -->\nother\n<!-- x:end -->" in text
    assert [p.name for p in docs.parent.iterdir()] == ["benchmarks.md"]   # no temporary left behind


def test_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "plots" / "ablation.png"
    assert plot(_result(), out) == f"plot written to {out}"
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in out.parent.iterdir()] == ["ablation.png"]
