"""What ``hopscotch demo`` leaves (on the smallest demo, a tiny model): one document length for its trained model
(what it trained with is what the folder tells sentence-transformers and what its index is built at), so
``hopscotch audit model`` passes on it; its held-out queries and qrels, from which the ``hopscotch eval`` commands it
prints rebuild its table; and only the final model (no checkpoints)."""

from __future__ import annotations

import json
import shlex

import pytest

from hopscotch.retriever.commands.demo_pipeline import DOCUMENT_TOKENS, run_demo


@pytest.fixture(scope="module")
def demo(tiny_bert_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("demo") / "out"
    table = run_demo(out, docs=150, questions=20, seed=13, model=str(tiny_bert_dir), stage=lambda name: None,
                     train_steps=12)
    return out, table


def test_the_trained_model_has_one_document_length(demo):
    from hopscotch.retriever.index.layout import IndexMeta

    out, _ = demo
    final = out / "model" / "final"
    trained = json.loads((final / "hopscotch_config.json").read_text())
    st = json.loads((final / "sentence_bert_config.json").read_text())
    assert st["max_seq_length"] == trained["passage_max_len"] == DOCUMENT_TOKENS
    assert st.get("document_length", DOCUMENT_TOKENS) == DOCUMENT_TOKENS
    assert st.get("query_length", trained["query_max_len"]) == trained["query_max_len"]
    assert IndexMeta.load(out / "dense-trained").max_length == trained["passage_max_len"]


def test_audit_model_passes_on_the_demos_model(demo, cli):
    out, _ = demo
    code, stdout, err = cli("audit", "model", out / "model" / "final", "--report", out / "audit.json")
    assert code == 0, stdout + err
    report = json.loads((out / "audit.json").read_text())
    assert report["verdict"] == "ok", report["summary"]
    assert report["details"]["paths"]["sentence-transformers"]["status"] == "ok"


def test_only_the_final_model_is_kept(demo):
    out, _ = demo
    assert not list((out / "model").glob("checkpoint-*")) and (out / "model" / "final" / "modules.json").is_file()


def test_the_printed_eval_commands_rebuild_the_table(demo, cli):
    out, table = demo
    results = json.loads((out / "results.json").read_text())
    commands = [line.strip() for line in table.splitlines() if line.strip().startswith("hopscotch eval ")]
    cells = [c for c in commands if "--compare" not in c]
    assert len(cells) == len(results) and any("--compare" in c for c in commands)
    assert (out / "eval" / "steps.queries.jsonl").is_file() and (out / "eval" / "steps.qrels.tsv").is_file()
    for command in cells:
        words = shlex.split(command)[1:]
        run = words[words.index("--run") + 1]
        set_name, system = run.rsplit("/", 1)[1].removesuffix(".trec").split(".", 1)
        json_out = out / f"{set_name}.{system}.json"
        code, _, err = cli(*words, "--json", json_out)
        assert code == 0, err
        metrics = json.loads(json_out.read_text())["metrics"]
        for name, value in results[f"{set_name}/{system}"].items():
            assert metrics[name] == pytest.approx(value, abs=1e-9), (command, name)
