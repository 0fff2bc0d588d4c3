"""``audit contamination --clean DIR``: planted evaluation questions, a quoted question and a shared gold page are
removed (and only those), every other line is copied byte for byte, the cleaned files audit to zero, the report
lists each removal, and bad input is refused."""

from __future__ import annotations

import json

import pytest

from hopscotch.retriever.audit.decontaminate import REPORT_NAME, decontaminate
from hopscotch.retriever.audit.eval_sets import load_eval_set
from hopscotch.retriever.cli import main as cli
from hopscotch.retriever.errors import UsageError

QUESTIONS = {
    "e0": "Which river does the stone bridge built by the guild of masons in 1342 cross?",
    "e1": "Who was the first woman to win the Nobel Prize in two different sciences?",
    "e2": "What is the name of the ship on which Charles Darwin sailed around the world?",
}
GOLD_TEXT = "Gold page one: " + " ".join(f"fact_{k}" for k in range(30))
CLEAN = ["how do bees make honey from flower nectar in the hive", "best way to store fresh basil leaves at home",
         "history of the printing press in fifteenth century europe", "why is the sky blue during the day time"]


def eval_folder(tmp_path):
    folder = tmp_path / "dev"
    folder.mkdir()
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in QUESTIONS.items()))
    (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\ne1\tg1\t1\n")
    (folder / "corpus.jsonl").write_text(json.dumps({"_id": "g1", "title": "", "text": GOLD_TEXT}) + "\n")
    return folder


def row(qid, query, reasoning=None, positive=("p", "an unrelated passage about gardening and the weather")):
    return {"query_id": qid, "query": query, "reasoning": reasoning,
            "positive_passages": [{"docid": positive[0], "title": "", "text": positive[1]}],
            "negative_passages": [{"docid": "n", "text": "a negative passage about cooking pasta"}]}


def planted_file(path):
    rows = [row(f"t{i}", c) for i, c in enumerate(CLEAN)]
    rows.insert(1, row("x_exact", QUESTIONS["e0"].lower()))                                  # asked
    rows.insert(3, row("x_quoted", "bridge history", reasoning="The user asks: " + QUESTIONS["e2"]))  # quoted
    rows.append(row("x_gold", "nobel facts", positive=("other_id", GOLD_TEXT)))             # shared evidence
    # a hand-spaced line and a blank line: kept lines must be copied byte for byte
    lines = [json.dumps(r, indent=None, separators=(", ", ":")) for r in rows]
    path.write_text("\n".join(lines[:2]) + "\n\n" + "\n".join(lines[2:]) + "\n")
    return path, lines


def test_clean_removes_exactly_the_planted_tuples_and_keeps_the_rest_byte_for_byte(tmp_path):
    sets = [load_eval_set(f"dev={eval_folder(tmp_path)}")]
    src, lines = planted_file(tmp_path / "train.jsonl")
    report = decontaminate(sets, [src], tmp_path / "clean", threshold=0.8)
    f = report["files"]["train.jsonl"]
    assert (f["kept"], f["removed"]) == (4, 3)
    # the asked question is also quoted whole in its own query: it counts under both kinds
    assert f["removed_by_kind"] == {"contained_question": 2, "exact_question": 1, "shared_evidence": 1}
    assert {r["query_id"] for r in f["removed_tuples"]} == {"x_exact", "x_quoted", "x_gold"}
    assert {h for r in f["removed_tuples"] for h in r["hits"]} == {
        "dev:e0:exact_question", "dev:e0:contained_question", "dev:e2:contained_question", "dev:e1:shared_evidence"}
    kept = [ln for ln in lines if not any(f'"{x}"' in ln for x in ("x_exact", "x_quoted", "x_gold"))]
    assert (tmp_path / "clean" / "train.jsonl").read_text() == "".join(ln + "\n" for ln in kept)
    assert json.loads((tmp_path / "clean" / REPORT_NAME).read_text())["removed"] == 3
    assert src.read_text().count("x_exact") == 1  # the input is untouched


def test_the_command_audits_the_cleaned_files_to_zero(tmp_path, capsys):
    folder = eval_folder(tmp_path)
    src, _ = planted_file(tmp_path / "train.jsonl")
    assert cli(["audit", "contamination", "--tuples", str(src), "--eval", f"dev={folder}"]) == 2
    code = cli(["audit", "contamination", "--tuples", str(src), "--eval", f"dev={folder}",
                "--clean", str(tmp_path / "clean"), "--report", str(tmp_path / "r.json")])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "train.jsonl: kept 4, removed 3" in err
    per_set = json.loads((tmp_path / "r.json").read_text())["details"]["per_set"]
    assert per_set["dev"]["contaminated"] == 0 and json.loads((tmp_path / "r.json").read_text())["verdict"] == "ok"


def test_clean_refuses_its_own_inputs_and_non_tuple_data(tmp_path):
    sets = [load_eval_set(f"dev={eval_folder(tmp_path)}")]
    src, _ = planted_file(tmp_path / "train.jsonl")
    with pytest.raises(UsageError, match="is an input"):
        decontaminate(sets, [src], tmp_path, threshold=0.8)
    with pytest.raises(UsageError, match="no such file"):
        decontaminate(sets, [tmp_path / "missing.jsonl"], tmp_path / "c", threshold=0.8)
    folder = eval_folder(tmp_path / "b") if (tmp_path / "b").mkdir() is None else None
    assert cli(["audit", "contamination", "--queries", str(src), "--tuples", str(src), "--eval", f"dev={folder}",
                "--clean", str(tmp_path / "c")]) == 2


def test_a_malformed_tuple_line_is_named_by_file_and_line(tmp_path, capsys):
    folder = eval_folder(tmp_path)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(row("a", CLEAN[0])) + "\n{not json\n")
    assert cli(["audit", "contamination", "--tuples", str(bad), "--eval", f"dev={folder}",
                "--clean", str(tmp_path / "c")]) == 2
    assert f"{bad}:2" in capsys.readouterr().err
    assert not (tmp_path / "c" / "bad.jsonl").exists()
