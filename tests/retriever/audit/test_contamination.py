"""``audit contamination``: a tuple file holding 5 evaluation questions (found, and only those), near-duplicate,
quoted, answer-bearing and shared-evidence variants, clean data, the CLI's exit codes and ``train --eval-sets``."""

from __future__ import annotations

import json

import pytest

from hopscotch.retriever.audit.contamination import audit_contamination
from hopscotch.retriever.audit.eval_sets import load_eval_set, parse_eval_spec, tuple_items
from hopscotch.retriever.errors import UsageError

QUESTIONS = [
    ("e0", "Which river does the stone bridge built by the guild of masons in 1342 cross?", "the Arno river"),
    ("e1", "Who was the first woman to win the Nobel Prize in two different sciences?", "Marie Curie"),
    ("e2", "What is the name of the ship on which Charles Darwin sailed around the world?", "HMS Beagle"),
    ("e3", "In which city was the composer of the opera Carmen born in the year 1838?", "Paris"),
    ("e4", "Which element has the chemical symbol that comes from the Latin word for gold?", "gold"),
    ("e5", "What mountain range separates the Iberian Peninsula from the rest of Europe?", "the Pyrenees"),
    ("e6", "Which planet in the solar system has the longest day of all the planets?", "Venus"),
    ("e7", "Who painted the ceiling of the Sistine Chapel between the years 1508 and 1512?", "Michelangelo"),
]
GOLD = {f"e{i}": (f"g{i}", f"Gold page {i}: " + " ".join(f"fact{i}_{k}" for k in range(30))) for i in range(8)}
CLEAN = ["how do bees make honey from flower nectar in the hive", "best way to store fresh basil leaves at home",
         "history of the printing press in fifteenth century europe", "why is the sky blue during the day time",
         "how many bones are there in the adult human hand", "what causes the northern lights to appear"]


def eval_folder(tmp_path, name="dev"):
    folder = tmp_path / name
    folder.mkdir(parents=True)
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t, "answers": [a]}) + "\n"
                                                  for q, t, a in QUESTIONS))
    (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n"
                                      + "".join(f"{q}\t{d}\t1\n" for q, (d, _) in GOLD.items()))
    docs = [{"_id": d, "title": "", "text": t} for d, t in GOLD.values()]
    docs += [{"_id": f"c{i}", "title": "", "text": f"clean document {i} about " + c} for i, c in enumerate(CLEAN)]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    return folder


def tuple_row(qid, query, reasoning=None, positive=None):
    docid, text = positive or (f"p_{qid}", f"an unrelated passage number {qid} about gardening and weather")
    return {"query_id": qid, "query": query, "reasoning": reasoning,
            "positive_passages": [{"docid": docid, "title": "", "text": text}],
            "negative_passages": [{"docid": f"n_{qid}", "text": "a negative passage about cooking pasta"}]}


def write_tuples(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def clean_rows(n=20):
    return [tuple_row(f"t{i}", CLEAN[i % len(CLEAN)] + f" part {i}") for i in range(n)]


def audit(tmp_path, rows, **kw):
    sets = [load_eval_set(f"dev={eval_folder(tmp_path)}")]
    return audit_contamination(sets, tuple_items(write_tuples(tmp_path / "t.jsonl", rows)), **kw)


def test_a_tuple_file_with_five_eval_questions_finds_exactly_those_five(tmp_path):
    planted = [tuple_row(f"x{i}", QUESTIONS[i][1].upper() + "  ") for i in (0, 2, 3, 5, 7)]  # case/space differ
    rows = clean_rows()
    for k, row in enumerate(planted):
        rows.insert(3 * k + 1, row)
    report = audit(tmp_path, rows)
    dev = report.details["per_set"]["dev"]
    assert report.verdict == "fail" and report.exit_code == 2
    assert dev["contaminated"] == 5 and dev["counts"]["exact_question"] == 5
    assert {e["qid"] for e in dev["examples"]["exact_question"]} == {"e0", "e2", "e3", "e5", "e7"}
    assert {e["train_id"] for e in dev["examples"]["exact_question"]} == {"x0", "x2", "x3", "x5", "x7"}
    assert dev["counts"]["near_question"] == dev["counts"]["shared_evidence"] == 0
    assert report.details["first_example"]["kind"] == "exact_question"
    assert "dev: 5 of 8 questions contaminated" in report.summary_text()
    assert audit(tmp_path / "b", rows, max_contaminated=5).verdict == "ok"


def test_near_duplicate_quoted_answer_bearing_and_shared_evidence_variants(tmp_path):
    q1 = QUESTIONS[1][1].replace("sciences?", "science?")                 # near duplicate, not contained: J 12/14
    rows = clean_rows() + [
        tuple_row("near", q1),
        tuple_row("quoted", "nobel prize chemistry", reasoning=f"The user asks: {QUESTIONS[2][1]} I should search."),
        tuple_row("answer", "who composed carmen bizet", positive=("pa", "Georges Bizet was born in Paris in 1838.")),
        tuple_row("evidence", "some other question entirely", positive=GOLD["e6"]),               # same doc, same id
        tuple_row("footer", "another unrelated query", positive=("copy", GOLD["e4"][1] + " footer text")),  # near text
        tuple_row("idclash", "a third unrelated query", positive=("g7", "a different page that reuses the id g7")),
    ]
    report = audit(tmp_path, rows)
    dev = report.details["per_set"]["dev"]
    ex = {k: {e["qid"]: e for e in v} for k, v in dev["examples"].items()}
    assert set(ex["near_question"]) == {"e1"} and 0.8 <= ex["near_question"]["e1"]["jaccard"] < 1
    assert set(ex["contained_question"]) == {"e2"} and ex["contained_question"]["e2"]["where"] == "reasoning"
    assert set(ex["shared_evidence"]) == {"e4", "e6"}
    assert ex["shared_evidence"]["e6"]["jaccard"] == 1.0 and 0.8 <= ex["shared_evidence"]["e4"]["jaccard"] < 1
    assert ex["shared_evidence"]["e4"]["docid"] == "copy" and ex["shared_evidence"]["e4"]["match"] == "text"
    assert dev["docid_collisions"] == 1                                   # g7 by id only: its text differs
    # answers: "Paris" (5 characters) is found; "gold" (4 characters, one word) is never matched
    assert set(ex["answer_overlap"]) == {"e3"} and ex["answer_overlap"]["e3"]["answer"] == "paris"
    assert dev["contaminated"] == 4                                       # answers are not counted by default
    counted = audit(tmp_path / "b", rows, count_answers=True).details["per_set"]["dev"]
    assert counted["contaminated"] == 5


def test_without_a_corpus_shared_evidence_is_by_docid(tmp_path):
    folder = eval_folder(tmp_path)
    (folder / "corpus.jsonl").unlink()
    rows = clean_rows() + [tuple_row("idonly", "unrelated query words here", positive=("g3", "any text at all"))]
    tuples = write_tuples(tmp_path / "t.jsonl", rows)
    report = audit_contamination([load_eval_set(f"dev={folder}")], tuple_items(tuples))
    ex = report.details["per_set"]["dev"]["examples"]["shared_evidence"]
    assert [(e["qid"], e["match"]) for e in ex] == [("e3", "docid")]


def test_clean_data_is_ok(tmp_path):
    report = audit(tmp_path, clean_rows() + [tuple_row("yes", "Yes."), tuple_row("no", "no")])
    assert report.verdict == "ok" and report.exit_code == 0
    assert report.details["per_set"]["dev"]["contaminated"] == 0


def test_eval_spec_forms(tmp_path):
    folder = eval_folder(tmp_path)
    assert parse_eval_spec("dev=a/b") == ("dev", "a/b", None, None)
    assert parse_eval_spec("dev=a::c.jsonl") == ("dev", "a", None, "c.jsonl")
    s = load_eval_set(f"dev={folder / 'queries.jsonl'}:{folder / 'qrels.tsv'}")
    assert s.corpus is None and s.relevant()["g0"] == ["e0"] and s.answers(s.queries[0]) == ["the Arno river"]
    assert load_eval_set(f"dev={folder}").corpus == str(folder / "corpus.jsonl")
    for bad in ("nodelimiter", "dev=", f"dev={tmp_path / 'missing'}", f"dev={folder}:q:c:extra"):
        with pytest.raises(UsageError):
            load_eval_set(bad)


def test_cli_exit_codes(cli, tmp_path):
    folder = eval_folder(tmp_path)
    dirty = write_tuples(tmp_path / "dirty.jsonl", clean_rows() + [tuple_row("x", QUESTIONS[4][1])])
    clean = write_tuples(tmp_path / "clean.jsonl", clean_rows())
    code, out, _ = cli("audit", "contamination", "--tuples", dirty, "--eval", f"dev={folder}", "--report",
                       tmp_path / "r.json")
    assert code == 2 and "FAIL" in out and "e4" in out
    assert json.loads((tmp_path / "r.json").read_text())["details"]["per_set"]["dev"]["contaminated"] == 1
    code, out, _ = cli("audit", "contamination", "--tuples", clean, "--eval", f"dev={folder}")
    assert code == 0 and "OK" in out
    code, out, _ = cli("audit", "contamination", "--queries", folder / "queries.jsonl", "--eval", f"dev={folder}")
    assert code == 2 and "8 of 8" in out                                  # a queries file: the set against itself
    code, _, err = cli("audit", "contamination", "--eval", f"dev={folder}")
    assert code == 2 and "--tuples" in err


def test_train_refuses_contaminated_data_unless_allowed(cli, tmp_path, tiny_bert_dir, write_training_tuples):
    tuples = write_training_tuples(tmp_path / "t.jsonl", n=16)
    texts = [json.loads(line)["query"] for line in tuples.read_text().splitlines()]
    dev = tmp_path / "dev.jsonl"
    dev.write_text("".join(json.dumps({"_id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(texts[:5])))
    clean = tmp_path / "clean.jsonl"
    clean.write_text(json.dumps({"_id": "c", "text": "a question about something else entirely"}) + "\n")
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(json.dumps({"model": {"name": str(tiny_bert_dir), "query_max_len": 16, "passage_max_len": 16},
                                  "data": {"train": str(tuples), "group_size": 2},
                                  "train": {"batch_size": 4, "max_steps": 1, "save_every": 0, "threads": 1}}))
    code, out, err = cli("train", "--recipe", recipe, "--output", tmp_path / "run", "--eval-sets", f"dev={dev}")
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "5 evaluation question(s)" in lines[0] and "d0" in lines[0]
    assert not (tmp_path / "run" / "final").exists()
    code, out, err = cli("train", "--recipe", recipe, "--output", tmp_path / "run", "--eval-sets", f"dev={dev}",
                         "--allow-contamination", "train.lr=1e-4")
    assert code == 0 and "training anyway" in err and (tmp_path / "run" / "final").is_dir()
    code, out, err = cli("train", "--recipe", recipe, "--output", tmp_path / "run2", "--eval-sets", f"clean={clean}")
    assert code == 0 and "contamination check ok" in err
