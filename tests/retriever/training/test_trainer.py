"""The training loop end to end on a tiny model (GradCache, accumulation, dev evaluation keeping the best
model, a final folder sentence-transformers loads) and the two command lines; recipes: test_recipe.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def dev_set(tmp_path):
    """Queries whose relevant passage is one of the training positives (so training can help)."""
    rows = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    corpus = {p["docid"]: p for r in rows for p in r["positive_passages"] + r["negative_passages"]}
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, "title": "", "text": p["text"]}) + "\n"
                                                   for d, p in corpus.items()))
    (tmp_path / "queries.jsonl").write_text("".join(
        json.dumps({"_id": r["query_id"], "text": r["query"], "reasoning": r["reasoning"]}) + "\n" for r in rows[:16]))
    (tmp_path / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"{r['query_id']}\t{r['positive_passages'][0]['docid']}\t1\n" for r in rows[:16]))


def test_train_with_gradcache_accumulation_and_dev_evaluation(tiny_bert_dir, tmp_path, write_training_tuples):
    from sentence_transformers import SentenceTransformer

    from hopscotch.retriever.training.trainer import train

    write_training_tuples(tmp_path / "t.jsonl")
    dev_set(tmp_path)
    recipe = {"model": {"name": str(tiny_bert_dir), "query_max_len": 32, "passage_max_len": 32},
              "data": {"train": [str(tmp_path / "t.jsonl")], "group_size": 3},
              "train": {"batch_size": 6, "grad_accum_steps": 2, "gradcache_chunk_size": 4, "lr": 5e-4,
                        "max_steps": 4, "save_every": 0, "threads": 1},
              "eval": {"queries": str(tmp_path / "queries.jsonl"), "corpus": str(tmp_path / "corpus.jsonl"),
                       "qrels": str(tmp_path / "qrels.tsv"), "every": 2, "metric": "recall@100"}}
    final = train(recipe, tmp_path / "run", ["train.lr=1e-3"], show_progress=False)
    assert final == str(tmp_path / "run" / "final")
    summary = json.loads((tmp_path / "run" / "train_summary.json").read_text())
    assert summary["steps"] == 4 and summary["samples"] == 4 * 6 * 2
    assert summary["best_step"] in (2, 4) and 0.0 < summary["best_metric"] <= 1.0
    assert summary["recipe"]["train"]["lr"] == 1e-3
    assert (tmp_path / "run" / "best" / "modules.json").is_file()
    st_model = SentenceTransformer(final, device="cpu")
    assert st_model.encode(["a passage"]).shape == (1, 32)


def test_cli_and_train_py_report_errors_on_one_line(cli, tmp_path):
    code, _, err = cli("train", "--recipe", tmp_path / "missing.yaml", "--output", tmp_path / "out")
    assert code == 2 and err.strip().count("\n") == 0 and "no such file" in err
    proc = subprocess.run([sys.executable, str(ROOT / "train.py"), "--recipe", str(tmp_path / "missing.yaml"),
                           "--output", str(tmp_path / "out"), "train.lr=1"], check=False, capture_output=True, text=True,
                          cwd=ROOT, timeout=1800)
    assert proc.returncode == 2 and "train.py: error:" in proc.stderr and "no such file" in proc.stderr


def test_the_query_input_mixture_is_trained_on_and_recorded(tiny_bert_dir, tmp_path, write_training_tuples,
                                                           monkeypatch):
    from hopscotch.retriever.training import batches
    from hopscotch.retriever.training.trainer import train

    seen = []
    collate = batches.Collator.__call__

    def recording(self, groups):
        out = collate(self, groups)
        seen.extend(self.model.tokenizer.decode(row, skip_special_tokens=True) for row in out.queries["input_ids"])
        return out

    monkeypatch.setattr(batches.Collator, "__call__", recording)
    write_training_tuples(tmp_path / "t.jsonl")
    recipe = {"model": {"name": str(tiny_bert_dir), "query_max_len": 32, "passage_max_len": 32,
                        "query_input": "current_reasoning"},
              "data": {"train": str(tmp_path / "t.jsonl"), "group_size": 2,
                       "query_inputs": ["query", "reasoning", "empty_reasoning"], "query_input_weights": [1, 1, 2]},
              "train": {"batch_size": 8, "max_steps": 5, "save_every": 0, "threads": 1}}
    final = train(recipe, tmp_path / "run", show_progress=False)
    assert any("reasoning :" not in t for t in seen)                    # query only
    assert any("reasoning : empty" in t for t in seen)                  # empty reasoning (and tuples without)
    assert any("reasoning :" in t and "reasoning : empty" not in t for t in seen)   # full reasoning
    summary = json.loads((tmp_path / "run" / "train_summary.json").read_text())
    assert summary["query_input_mixture"] == {"query": 0.25, "reasoning": 0.25, "empty_reasoning": 0.5}
    assert summary["query_input"] == "current_reasoning"
    assert summary["recipe"]["data"]["query_inputs"] == ["query", "reasoning", "empty_reasoning"]
    config = json.loads((Path(final) / "hopscotch_config.json").read_text())
    assert config["query_input"] == "current_reasoning"   # what search uses; the mixture is training only


def test_trains_on_tevatron_newer_format_rows_against_data_corpus(tiny_bert_dir, tmp_path, write_training_tuples):
    """Tevatron's newer rows name documents by id; ``data.corpus`` gives their texts."""
    from hopscotch.retriever.training.trainer import train

    write_training_tuples(tmp_path / "t.jsonl")
    rows = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    corpus = {p["docid"]: p["text"] for r in rows for p in r["positive_passages"] + r["negative_passages"]}
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps({"docid": d, "text": t}) + "\n"
                                                   for d, t in corpus.items()))
    (tmp_path / "newer.jsonl").write_text("".join(json.dumps({
        "query_id": r["query_id"], "query_text": r["query"],
        "positive_document_ids": [p["docid"] for p in r["positive_passages"]],
        "negative_document_ids": [p["docid"] for p in r["negative_passages"]]}) + "\n" for r in rows))
    recipe = {"model": {"name": str(tiny_bert_dir), "query_max_len": 32, "passage_max_len": 32},
              "data": {"train": str(tmp_path / "newer.jsonl"), "corpus": str(tmp_path / "corpus.jsonl"),
                       "group_size": 2},
              "train": {"batch_size": 8, "max_steps": 2, "save_every": 0, "threads": 1}}
    final = train(recipe, tmp_path / "run", show_progress=False)
    assert (Path(final) / "hopscotch_config.json").is_file()
    summary = json.loads((tmp_path / "run" / "train_summary.json").read_text())
    assert summary["recipe"]["data"]["corpus"] == str(tmp_path / "corpus.jsonl")


def test_wise_ft_final_is_the_exact_mix_of_the_plain_run_and_the_start(tiny_bert_dir, tmp_path, write_training_tuples):
    """``train.wise_ft_alpha=0.25``: the same run, and final/ = 0.25 * (the plain run's final) + 0.75 * start,
    tensor by tensor; the summary records alpha; an alpha over 1 is refused before anything runs."""
    import pytest
    import torch
    from safetensors.torch import load_file

    from hopscotch.retriever.errors import UsageError
    from hopscotch.retriever.model.weight_merge import interpolate_weights
    from hopscotch.retriever.training.trainer import train

    write_training_tuples(tmp_path / "t.jsonl")
    recipe = {"model": {"name": str(tiny_bert_dir), "query_max_len": 32, "passage_max_len": 32},
              "data": {"train": str(tmp_path / "t.jsonl"), "group_size": 2},
              "train": {"batch_size": 8, "lr": 1e-3, "max_steps": 3, "save_every": 0, "threads": 1}}
    plain = Path(train(recipe, tmp_path / "plain", show_progress=False))
    mixed = Path(train(recipe, tmp_path / "mixed", ["train.wise_ft_alpha=0.25"], show_progress=False))
    start, tuned = load_file(tiny_bert_dir / "model.safetensors"), load_file(plain / "model.safetensors")
    got = load_file(mixed / "model.safetensors")
    assert set(got) == set(tuned) == set(start)
    expected = interpolate_weights(tuned, start, 0.25)
    changed = 0
    for name, value in got.items():
        assert torch.equal(value, expected[name]), name
        changed += not torch.equal(value, tuned[name])
    assert changed > 10                                                # training moved the weights; the mix moved them back
    assert json.loads((tmp_path / "mixed" / "train_summary.json").read_text())["wise_ft_alpha"] == 0.25
    assert json.loads((tmp_path / "plain" / "train_summary.json").read_text())["wise_ft_alpha"] == 1.0
    with pytest.raises(UsageError, match=r"train.wise_ft_alpha must be >= 0 and <= 1, got 1.5"):
        train(recipe, tmp_path / "bad", ["train.wise_ft_alpha=1.5"], show_progress=False)
    assert not (tmp_path / "bad").exists()


def test_wise_ft_with_lora_scales_the_adapter_delta(tiny_bert_dir, tmp_path, write_training_tuples):
    """With LoRA, final/ (adapters merged) = W0 + alpha * (the plain run's merged W - W0): the same mix as
    full fine-tuning, though the adapters' A matrices start random (only B, which starts at zero, is mixed)."""
    import torch
    from safetensors.torch import load_file

    from hopscotch.retriever.training.trainer import train

    write_training_tuples(tmp_path / "t.jsonl")
    recipe = {"model": {"name": str(tiny_bert_dir), "query_max_len": 32, "passage_max_len": 32,
                        "lora": {"enabled": True, "r": 4, "alpha": 8, "dropout": 0.0}},
              "data": {"train": str(tmp_path / "t.jsonl"), "group_size": 2},
              "train": {"batch_size": 8, "lr": 1e-2, "max_steps": 3, "save_every": 0, "threads": 1}}
    plain = load_file(Path(train(recipe, tmp_path / "plain", show_progress=False)) / "model.safetensors")
    mixed = load_file(Path(train(recipe, tmp_path / "mixed", ["train.wise_ft_alpha=0.25"], show_progress=False))
                      / "model.safetensors")
    start = load_file(tiny_bert_dir / "model.safetensors")
    moved = [k for k in start if not torch.equal(plain[k], start[k])]
    assert moved and all("query" in k or "value" in k for k in moved)      # peft's default BERT targets
    for name, w0 in start.items():
        if name in moved:
            assert torch.allclose(mixed[name], w0 + 0.25 * (plain[name] - w0), atol=1e-6, rtol=0), name
        else:
            assert torch.equal(mixed[name], w0), name                      # frozen weights: bit for bit

