"""The fusion defaults by the selection rule (:mod:`hopscotch_experiments.ablations.fusion_defaults`) over a tiny
ablation cache: the components, the rule's report and the pick's paired tests."""

from __future__ import annotations

from pathlib import Path

from hopscotch_experiments.ablations.fusion_defaults import grid, report, table


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


def test_components_are_each_sets_lists(tmp_path):
    _cache(tmp_path)
    scores, components, _, _, by_label = table(tmp_path, "tune", ["a", "b"], grid()[:3])
    assert set(components) == {"a", "b"} and components["a"]["bm25"] == 1.0 and components["b"]["dense"] == 1.0
    assert components["a"]["dense"] < 1.0 and len(by_label) == 3 and set(scores[next(iter(scores))]) == {"a", "b"}


def test_report_prints_the_rule_the_table_and_the_paired_tests(tmp_path):
    _cache(tmp_path)
    lines = report(tmp_path, "tune", ["a", "b"], top=3, objective=["a"], guards=["b"])
    assert lines[0] == "better component per set (tune): a bm25 1.000, b dense 1.000"
    assert any(line.startswith("selection rule: objective: mean tune ndcg@10 over the real agent sets a") for line in lines)
    assert any(line.startswith("pick: ") for line in lines) and any("guard b: delta" in line for line in lines)
    assert any(line.startswith("| setting | objective | a | b |") for line in lines)
    assert lines[-3].startswith("the pick (")
    assert lines[-2].startswith("  a: ") and lines[-1].startswith("  b: ") and "p = " in lines[-1]
