"""The maximin fusion defaults (:mod:`hopscotch_experiments.ablations.fusion_defaults`) over a tiny ablation cache:
per-set deltas against the better component, and the report's lines."""

from __future__ import annotations

from pathlib import Path

from hopscotch_experiments.ablations.fusion_defaults import deltas, grid, report, table


def _cache(work: Path) -> None:
    """Two sets of four questions: BM25 is the stronger list on ``a``, dense on ``b``."""
    for name, strong in (("a", "bm25"), ("b", "dense")):
        folder = work / "sets" / name
        folder.mkdir(parents=True)
        qids = [f"{name}{i}" for i in range(4)]
        (folder / "tune_qids.txt").write_text("".join(q + "\n" for q in qids))
        (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{q}\tgold\t1\n" for q in qids))
        (work / "runs").mkdir(exist_ok=True)
        for kind, file in (("bm25", f"{name}.bm25.trec"), ("dense", f"{name}.trained.default.trec")):
            lines = []
            for i, q in enumerate(qids):
                docs = [f"x{j}" for j in range(5)]
                docs.insert(0 if kind == strong or i == 0 else 4, "gold")
                lines += [f"{q} Q0 {d} {r + 1} {10 - r} t" for r, d in enumerate(docs)]
            (work / "runs" / file).write_text("\n".join(lines) + "\n")


def test_deltas_are_against_each_sets_better_component(tmp_path):
    _cache(tmp_path)
    scores, components, _, _, by_label = table(tmp_path, "tune", ["a", "b"], grid()[:3])
    assert set(components) == {"a", "b"} and components["a"]["bm25"] == 1.0 and components["b"]["dense"] == 1.0
    assert components["a"]["dense"] < 1.0 and len(by_label) == 3
    d = deltas(scores, components)
    assert all(d[label][n] == scores[label][n] - 1.0 for label in d for n in ("a", "b"))


def test_report_prints_the_table_the_maximin_picks_and_the_paired_tests(tmp_path):
    _cache(tmp_path)
    lines = report(tmp_path, "tune", ["a", "b"], top=3)
    assert lines[0] == "better component per set (tune): a bm25 1.000, b dense 1.000"
    assert lines[1] == "| setting | worst delta | tune mean | a | b |"
    assert any(line.startswith("maximin interp: ") for line in lines)
    assert any(line.startswith("maximin over every setting: ") for line in lines)
    assert lines[-3].startswith("paired tests of the default `--fusion` (")
    assert lines[-2].startswith("  a: ") and lines[-1].startswith("  b: ")
