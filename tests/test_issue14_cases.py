"""Issue 14 acceptance audit: each silent-wrong and data-safety case of the issue -> the test that proves it
is now refused or correct through the code path the issue describes. "HERE" marks a case (or the part of
one) that no other test covered through that path; it is proved in this file. Paths are under tests/.

Silent wrong output
 1 a docid with a newline shifts every later docid of a BM25 index
   -> retriever/io/test_bad_input.py::test_bm25_index_refuses_a_bad_corpus (refused at bm25-index)
   -> HERE ::test_every_line_breaking_character_in_a_docid_is_refused_at_bm25_index (\r \v \f \x1c-\x1e
      \x85 U+2028/9: every character str.splitlines breaks at, not only \n)
 2 a docid with a space writes a broken TREC line
   -> HERE ::test_a_docid_with_a_space_is_refused_when_search_would_write_it (bm25-index + search)
   (the writer alone: retriever/io/test_bad_input.py::test_run_writer_refuses_a_line_it_cannot_write)
 3 search --out /dev/full replaced the device node with a regular file
   -> retriever/commands/test_output_boundary.py::test_device_node_and_fifo_are_refused_untouched[search]
 4 duplicate query ids give two rankings
   -> HERE ::test_search_refuses_duplicate_query_ids
   (the reader alone: retriever/io/test_bad_input.py::test_a_bad_field_names_file_and_line)
 5 bm25-index accepts duplicate docids
   -> retriever/io/test_bad_input.py::test_bm25_index_refuses_a_bad_corpus
 6 a BOM becomes part of the first qid
   -> HERE ::test_search_drops_a_bom_from_the_first_query_id (search + eval)
   (the reader alone: retriever/io/test_bad_input.py::test_a_utf8_bom_is_dropped)
 7 nan / inf scores
   -> retriever/io/test_bad_input.py::test_eval_with_a_bad_run_exits_2_with_one_line[nan.trec],
      ::test_run_writer_refuses_a_line_it_cannot_write, ::test_a_bad_field_names_file_and_line (run rows)
 8 --alpha nan (every score nan)
   -> retriever/commands/test_bad_input_suite.py::test_malformed_input_exits_2_with_one_line[search---alpha-nan]
 9 train.max_steps=-1 (an untrained final, exit 0)
   -> retriever/training/test_recipe.py::test_cli_reports_a_range_error_on_one_line[train.max_steps=-1-...]
10 a duplicate group given as a string is expanded letter by letter
   -> retriever/io/test_docids.py::test_bad_group_fields_name_file_and_line, ::test_duplicates_through_eval
11 grades like 0.9 truncated to 0
   -> retriever/io/test_bad_input.py::test_eval_with_fractional_grades_exits_2
12 --depth 0, --max-length 0, --metrics ""
   -> retriever/commands/test_bad_input_suite.py::test_malformed_input_exits_2_with_one_line
      [search---depth-0, synth---depth-0, index---max-length-0, eval---metrics=]

Data safety
13 index resume compares only the corpus path and size
   -> retriever/index/test_resume_fingerprint.py::test_a_same_size_corpus_edit_is_refused_naming_the_corpus
14 demo rerun with other settings reuses the old world / the old model's numbers
   -> retriever/commands/test_demo_reuse.py::
      test_a_rerun_reuses_what_is_unchanged_and_never_shows_an_older_models_numbers (another model)
   -> HERE ::test_a_demo_rerun_with_another_seed_reports_the_new_worlds_numbers (another world)
15 train --resume does not compare the recipe
   -> retriever/training/test_trusted_resume.py::test_resume_refuses_another_recipe_naming_the_field
16 rerunning train into a used folder mixes checkpoints
   -> retriever/training/test_trusted_resume.py::test_a_used_folder_is_refused_and_overwrite_clears_it
17 synth resume with another --bm25-index mixes two runs
   -> data_synth/test_synth_fingerprint.py::test_another_bm25_index_is_refused_and_the_same_one_resumes
18 search --out equal to --queries destroys it
   -> retriever/commands/test_output_boundary.py::test_output_onto_an_input_is_refused_and_the_input_kept[search]
19 eval --json equal to --run destroys it
   -> retriever/commands/test_output_boundary.py::test_output_onto_an_input_is_refused_and_the_input_kept[eval]
20 synth --out equal to --traces destroys it
   -> retriever/commands/test_output_boundary.py::test_output_onto_an_input_is_refused_and_the_input_kept[synth]
21 world, bm25-index and synth overwrite other runs' outputs
   -> retriever/commands/test_output_boundary.py::test_rerun_is_allowed_another_run_needs_overwrite
      [world, bm25-index, synth]
22 flipping --reasoning-aware on a rerun rewrites index.json without re-encoding
   -> retriever/index/test_resume_fingerprint.py::
      test_an_identical_rerun_resumes_to_the_bytes_of_an_uninterrupted_build_and_other_flags_are_refused
23 killed runs leave temp files behind forever
   -> retriever/io/test_outputs.py::test_stale_temp_files_are_removed_on_start_and_none_left_on_failure,
      retriever/commands/test_output_boundary.py::test_rerun_is_allowed_another_run_needs_overwrite,
      retriever/training/test_trusted_resume.py::test_same_run_resumes_and_stale_temp_files_go
   -> HERE ::test_a_killed_model_save_leaves_nothing_a_rerun_keeps (the model folder's temp,
      save_model's '.final.<random>.tmp', is removed by the next train)
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

#: every character ``str.splitlines`` breaks a line at, which a line-per-docid file would split on
LINE_BREAKS = ["\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _one_error(code: int, err: str, *needles: str) -> None:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and "Traceback" not in err, err
    assert len(lines) == 1, err
    for needle in needles:
        assert needle in lines[0], lines[0]


CORPUS = [{"_id": "d1", "text": "red apple fruit orchard"}, {"_id": "d2", "text": "blue sky over the sea"},
          {"_id": "d3", "text": "green grass in the meadow"}, {"_id": "d4", "text": "yellow sun at noon"}]


@pytest.fixture
def bm25(tmp_path, cli) -> Path:
    """A BM25 index of :data:`CORPUS` built by ``hopscotch bm25-index``."""
    code, _, err = cli("bm25-index", "--corpus", _jsonl(tmp_path / "corpus.jsonl", CORPUS), "--out", tmp_path / "bm25")
    assert code == 0, err
    return tmp_path / "bm25"


# -- case 1: every line-breaking character, not only "\n" -----------------------------------------------
@pytest.mark.parametrize("brk", LINE_BREAKS, ids=[f"U+{ord(c):04X}" for c in LINE_BREAKS])
def test_every_line_breaking_character_in_a_docid_is_refused_at_bm25_index(tmp_path, cli, brk):
    corpus = _jsonl(tmp_path / "corpus.jsonl", [CORPUS[0], {"_id": f"d{brk}x", "text": "blue sky"}, *CORPUS[1:]])
    before = corpus.read_bytes()
    code, _, err = cli("bm25-index", "--corpus", corpus, "--out", tmp_path / "idx")
    _one_error(code, err, "corpus.jsonl:2", "control or line-break")
    assert not (tmp_path / "idx").exists() and corpus.read_bytes() == before


# -- case 2: a docid with a space never reaches a TREC line ---------------------------------------------
def test_a_docid_with_a_space_is_refused_when_search_would_write_it(tmp_path, cli):
    corpus = _jsonl(tmp_path / "corpus.jsonl", [{"_id": "a b", "text": "red apple fruit"}, *CORPUS[1:]])
    code, _, err = cli("bm25-index", "--corpus", corpus, "--out", tmp_path / "bm25")
    assert code == 0, err  # a space is fine in a corpus id (BEIR allows it) ...
    hits = _jsonl(tmp_path / "q.jsonl", [{"_id": "q1", "text": "red apple"}])
    code, _, err = cli("search", "--queries", hits, "--bm25", tmp_path / "bm25", "--k", 3,
                       "--out", tmp_path / "run.trec")
    _one_error(code, err, "run.trec", "without whitespace", "'a b'")  # ... but not in a TREC run
    assert not (tmp_path / "run.trec").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".run.trec")] == []  # no half-written temp
    misses = _jsonl(tmp_path / "q2.jsonl", [{"_id": "q1", "text": "blue sky"}])
    code, _, err = cli("search", "--queries", misses, "--bm25", tmp_path / "bm25", "--k", 1,
                       "--out", tmp_path / "ok.trec")
    assert code == 0, err  # a run that does not hold that document is written, every line six columns
    rows = [line.split() for line in (tmp_path / "ok.trec").read_text().splitlines()]
    assert [r[:3] for r in rows] == [["q1", "Q0", "d2"]] and all(len(r) == 6 for r in rows)


# -- case 4: duplicate query ids ------------------------------------------------------------------------
@pytest.mark.parametrize("name, text", [
    ("q.jsonl", "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in [("q1", "red"), ("q2", "sky"),
                                                                             ("q1", "grass")])),
    ("q.tsv", "q1\tred\nq2\tsky\nq1\tgrass\n"),
], ids=["jsonl", "tsv"])
def test_search_refuses_duplicate_query_ids(tmp_path, cli, bm25, name, text):
    queries = tmp_path / name
    queries.write_text(text)
    code, _, err = cli("search", "--queries", queries, "--bm25", bm25, "--k", 2, "--out", tmp_path / "run.trec")
    _one_error(code, err, f"{name}:3", "unique query ids", "'q1' is already at line 1")
    assert not (tmp_path / "run.trec").exists()


# -- case 6: a UTF-8 BOM is not part of the first query id ----------------------------------------------
@pytest.mark.parametrize("name, text", [
    ("q.jsonl", "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in [("q1", "red apple"), ("q2", "sky")])),
    ("q.tsv", "q1\tred apple\nq2\tsky\n"),
], ids=["jsonl", "tsv"])
def test_search_drops_a_bom_from_the_first_query_id(tmp_path, cli, bm25, name, text):
    plain, bom = tmp_path / name, tmp_path / f"bom_{name}"
    plain.write_text(text, encoding="utf-8")
    bom.write_bytes(b"\xef\xbb\xbf" + text.encode())
    for queries, out in ((plain, "plain.trec"), (bom, "bom.trec")):
        code, _, err = cli("search", "--queries", queries, "--bm25", bm25, "--k", 2, "--out", tmp_path / out)
        assert code == 0, err
    run = (tmp_path / "bom.trec").read_bytes()
    assert run == (tmp_path / "plain.trec").read_bytes() and run.startswith(b"q1 Q0 d1 1 ")
    code, _, err = cli("eval", "--run", tmp_path / "bom.trec", "--qrels", _qrels(tmp_path), "--metrics", "recall@2",
                       "--json", tmp_path / "e.json")
    assert code == 0, err
    assert json.loads((tmp_path / "e.json").read_text())["per_query"]["q1"]["recall@2"] == 1.0  # q1 is judged


def _qrels(tmp_path: Path) -> Path:
    path = tmp_path / "qrels.tsv"
    path.write_bytes(b"\xef\xbb\xbfquery-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n")
    return path


# -- case 14: another world (seed) in a used demo folder ------------------------------------------------
@pytest.mark.slow  # three small demos
def test_a_demo_rerun_with_another_seed_reports_the_new_worlds_numbers(tiny_bert_dir, tmp_path, capsys):
    from hopscotch.retriever.commands.demo_pipeline import run_demo

    def demo(out: Path, seed: int) -> dict:
        run_demo(out, docs=150, questions=20, seed=seed, model=str(tiny_bert_dir), stage=lambda name: None,
                 train_steps=2)
        return json.loads((out / "results.json").read_text())

    first = demo(tmp_path / "demo", 13)
    capsys.readouterr()
    second = demo(tmp_path / "demo", 14)
    said = capsys.readouterr().out
    assert "world: " in said and "removing world to rebuild" in said and "reusing" not in said
    fresh = demo(tmp_path / "fresh", 14)
    assert second == fresh and second != first  # the new world's numbers, as a demo that never saw seed 13
    for name in ("world/corpus.jsonl", "world/qrels.tsv", "tuples.jsonl", "runs/steps.bm25.trec",
                 "runs/steps.dense-trained+reasoning.trec"):
        assert (tmp_path / "demo" / name).read_bytes() == (tmp_path / "fresh" / name).read_bytes(), name


# -- case 23: a model save killed part way --------------------------------------------------------------
def test_a_killed_model_save_leaves_nothing_a_rerun_keeps(tiny_bert_dir, tmp_path, monkeypatch):
    """The temp folder ``save_model`` really creates for ``final`` (caught as the kill would leave it) is
    removed by the next ``train`` into that folder, like the ``.*.tmp`` leftovers of the other writers."""
    import shutil
    import tempfile

    from hopscotch.retriever.model.dual_encoder import DualEncoder
    from hopscotch.retriever.training.trainer import train

    made: list[Path] = []
    real_mkdtemp = tempfile.mkdtemp

    def recording_mkdtemp(*args, **kwargs):
        made.append(Path(real_mkdtemp(*args, **kwargs)))
        return str(made[-1])

    model = DualEncoder.from_pretrained(str(tiny_bert_dir))
    run = tmp_path / "run"
    run.mkdir()
    monkeypatch.setattr(tempfile, "mkdtemp", recording_mkdtemp)
    model.save(run / "final")
    monkeypatch.undo()
    (leftover,) = [p for p in made if p.parent == run]
    shutil.copytree(run / "final", leftover)  # what a SIGKILL during the save leaves beside 'final'
    shutil.rmtree(run / "final")
    tuples = _jsonl(tmp_path / "t.jsonl", [
        {"query_id": f"q{i}", "query": f"colour {i}", "positive_passages": [{"docid": f"p{i}", "text": f"blue {i}"}],
         "negative_passages": [{"docid": f"n{i}", "text": f"grey {i}"}]} for i in range(8)])
    recipe = {"model": {"name": str(tiny_bert_dir), "query_max_len": 16, "passage_max_len": 16},
              "data": {"train": str(tuples), "group_size": 2},
              "train": {"batch_size": 4, "max_steps": 1, "save_every": 0, "threads": 1}}
    train(recipe, run, overwrite=True, show_progress=False)
    assert not leftover.exists(), f"{leftover.name} is still in {run}: {sorted(os.listdir(run))}"
