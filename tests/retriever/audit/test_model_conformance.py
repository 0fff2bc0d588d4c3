"""Model conformance: golden vectors written at save time (single- and multi-vector), re-encoded by Hopscotch,
its reload path and plain sentence-transformers; the planted cases: an untouched folder (exit 0), pooling edited
from mean to cls (exit 2, pooling named), no golden vectors (the --write-golden hint, then --write-golden), and
the settings the diagnosis names for other edits (normalisation, a query prompt, the documents' max length)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hopscotch.retriever.model.golden import GOLDEN_FILE, PROBES, read_golden

INSTRUCTION = "Instruct: find the film\nQuery:"


@pytest.fixture(scope="module")
def saved(tiny_bert_dir, tmp_path_factory) -> Path:
    """A tiny model saved through DualEncoder.save (queries 48 tokens, passages 64, an instruction)."""
    from hopscotch.retriever.model.config import EncoderConfig
    from hopscotch.retriever.model.dual_encoder import DualEncoder

    model = DualEncoder.from_pretrained(tiny_bert_dir, EncoderConfig(query_max_len=48, passage_max_len=64,
                                                                     instruction=INSTRUCTION))
    model.train()
    path = Path(model.save(tmp_path_factory.mktemp("saved") / "final"))
    assert model.training  # the save computed its probes in eval mode and gave the model back as it was
    return path


def copy(saved: Path, tmp_path: Path) -> Path:
    out = tmp_path / "model"
    shutil.copytree(saved, out)
    return out


def edit_json(path: Path, **changes) -> None:
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


def test_save_writes_golden_vectors_with_their_settings(saved):
    golden = read_golden(saved)
    assert golden["kind"] == "single_vector" and [p["name"] for p in golden["probes"]] == [p["name"] for p in PROBES]
    s = golden["settings"]
    assert (s["pooling"], s["normalize"], s["padding_side"], s["query_max_len"], s["passage_max_len"]) == \
        ("mean", True, "right", 48, 64)
    assert s["instruction"] == INSTRUCTION and s["query_input"] == "reasoning" and s["dtype"] == "float32"
    by_name = {p["name"]: p for p in golden["probes"]}
    assert by_name["short_query"]["input"] == INSTRUCTION + PROBES[0]["query"]
    long_query = by_name["long_query"]
    assert long_query["input"].endswith("Query: " + PROBES[2]["query"]) and long_query["tokens"] <= 48
    assert by_name["long_document"]["tokens"] == 64 and len(by_name["document"]["vector"]) == 32


def test_golden_vectors_leave_the_model_fingerprint_alone(saved, tmp_path):
    from hopscotch.retriever.io.fingerprint import model_fingerprint

    folder = copy(saved, tmp_path)
    before = model_fingerprint(folder)
    (folder / GOLDEN_FILE).unlink()
    assert model_fingerprint(folder) == before


def test_untouched_folder_conforms(saved, cli, tmp_path):
    code, out, _ = cli("audit", "model", saved, "--device", "cpu", "--report", tmp_path / "r.json")
    assert code == 0 and "audit model: OK" in out
    report = json.loads((tmp_path / "r.json").read_text())
    paths = report["details"]["paths"]
    assert set(paths) == {"hopscotch", "hopscotch-reload", "sentence-transformers"}
    assert all(p["status"] == "ok" and p["max_abs_diff"] <= 1e-5 for p in paths.values())


def test_pooling_edited_from_mean_to_cls_fails_and_names_pooling(saved, cli, tmp_path):
    folder = copy(saved, tmp_path)
    edit_json(folder / "1_Pooling" / "config.json", pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    edit_json(folder / "hopscotch_config.json", pooling="cls")
    code, out, _ = cli("audit", "model", folder, "--device", "cpu", "--url", "http://127.0.0.1:9",
                       "--report", tmp_path / "r.json")
    assert code == 2 and "audit model: FAIL" in out
    paths = json.loads((tmp_path / "r.json").read_text())["details"]["paths"]
    for name in ("hopscotch", "hopscotch-reload", "sentence-transformers"):
        assert paths[name]["status"] == "mismatch" and paths[name]["diagnosis"] == ["pooling cls (golden: mean)"]
    assert "sentence-transformers files: pooling = 'cls' (golden vectors: 'mean')" in out
    assert "service: not checked (hopscotch serve has no embedding endpoint" in out


def test_other_edits_are_named_by_the_variation_that_reproduces_them(saved, tmp_path):
    from hopscotch.retriever.audit.model_conformance import audit_model

    folder = copy(saved, tmp_path)  # sentence-transformers loses the Normalize module and the query prompt
    modules = json.loads((folder / "modules.json").read_text())
    (folder / "modules.json").write_text(json.dumps([m for m in modules if "Normalize" not in m["type"]]))
    st_config = folder / "config_sentence_transformers.json"
    edit_json(st_config, prompts={"query": "", "document": ""})
    report = audit_model(folder, device="cpu")
    st = report.details["paths"]["sentence-transformers"]
    assert report.verdict == "fail" and st["status"] == "mismatch"
    assert st["diagnosis"] == ["not normalised + query prefix/prompt '' (golden: 'Instruct: find the film\\nQuery:')"]
    assert report.details["paths"]["hopscotch"]["status"] == "ok"  # search reads hopscotch_config, normalises


def test_a_longer_query_length_keeps_one_document_length_and_a_folder_edited_to_another_is_named(tiny_bert_dir,
                                                                                                  tmp_path):
    """Saved with queries longer than documents (96 and 40 tokens), the folder tells sentence-transformers the
    document length (max_seq_length 40; encode_query takes 96), so every loader agrees; edited to cut documents at
    96, the audit names that length."""
    from hopscotch.retriever.audit.model_conformance import audit_model
    from hopscotch.retriever.model.config import EncoderConfig
    from hopscotch.retriever.model.dual_encoder import DualEncoder

    model = DualEncoder.from_pretrained(tiny_bert_dir, EncoderConfig(query_max_len=96, passage_max_len=40))
    folder = Path(model.save(tmp_path / "final"))
    st_file = folder / "sentence_bert_config.json"
    assert json.loads(st_file.read_text())["max_seq_length"] == 40
    report = audit_model(folder, device="cpu")
    assert report.verdict == "ok", report.summary
    config = json.loads(st_file.read_text())
    st_file.write_text(json.dumps({k: v for k, v in {**config, "max_seq_length": 96}.items()
                                   if k not in ("document_length", "query_length")}))
    report = audit_model(folder, device="cpu")
    st = report.details["paths"]["sentence-transformers"]
    assert st["probes"] == ["long_document"] and st["diagnosis"] == ["document max length 96 tokens (golden: 40)"]
    assert report.details["paths"]["hopscotch"]["status"] == "ok"


def test_folder_without_golden_vectors_says_how_to_record_them(saved, cli, tmp_path):
    folder = copy(saved, tmp_path)
    (folder / GOLDEN_FILE).unlink()
    code, out, _ = cli("audit", "model", folder, "--device", "cpu")
    assert code == 0 and "WARNING" in out
    assert "no golden vectors: saved before this version; run `hopscotch audit model" in out and "--write-golden" in out
    code, out, _ = cli("audit", "model", folder, "--device", "cpu", "--write-golden")
    assert code == 0 and "golden vectors written now" in out and (folder / GOLDEN_FILE).is_file()
    assert read_golden(folder)["settings"]["pooling"] == "mean"
    code, _, err = cli("audit", "model", folder, "--device", "cpu", "--write-golden")
    assert code == 2 and "already has golden vectors" in err


def test_multi_vector_folder_gets_token_golden_vectors_and_a_prompt_edit_fails(tiny_bert_dir, tmp_path, cli):
    from hopscotch.retriever.model.golden import write_multi_vector_golden
    from hopscotch.retriever.model.multi_vector import build_multi_vector_model

    model = build_multi_vector_model(tiny_bert_dir, dim=16, query_max_len=32, passage_max_len=48,
                                     query_augmentation=None, instruction="Find: ", device="cpu")
    folder = Path(model.save(tmp_path / "mv"))
    golden = read_golden(folder)
    assert golden["kind"] == "multi_vector" and [p["name"] for p in golden["probes"]] == ["query", "document"]
    assert len(golden["probes"][0]["vectors"][0]) == 16
    code, out, _ = cli("audit", "model", folder, "--device", "cpu")
    assert code == 0 and "OK" in out
    model.st.train()  # encode() switches to eval mode; the golden writer gives the mode back
    write_multi_vector_golden(tmp_path, model.st)
    assert model.st.training and read_golden(tmp_path)["probes"] == golden["probes"]
    st_config = folder / "config_sentence_transformers.json"
    prompts = json.loads(st_config.read_text())["prompts"]
    edit_json(st_config, prompts={**prompts, "query": "[Q] "})
    code, out, _ = cli("audit", "model", folder, "--device", "cpu")
    assert code == 2 and "token vectors" in out
