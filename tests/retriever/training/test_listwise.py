"""Training a cross-encoder (``model.kind: cross_encoder``) with Hopscotch's trainer: the listwise loss is the
cross-entropy of the positive among each query's own group (hand-computed here, duplicates masked, the distillation
term beside it), a short run on a toy set learns (its loss goes down) and saves a folder sentence-transformers'
``CrossEncoder`` loads with the trained scores, and the recipe refuses what a cross-encoder cannot use."""

from __future__ import annotations

import json
import math

import pytest
import torch

WORDS = "red green blue cyan magenta yellow black white grey brown pink olive navy teal".split()


def _tuples(path, n: int = 48):
    """Toy tuples whose positive repeats the query's words (the negatives do not): a pattern a tiny model learns."""
    rows = []
    for i in range(n):
        text = lambda k: " ".join(WORDS[(i * k + j) % len(WORDS)] for j in range(4 + (i * k) % 9))  # noqa: E731
        rows.append({"query_id": f"q{i}", "query": text(1), "reasoning": text(2) if i % 3 else None,
                     "positive_passages": [{"docid": f"p{i}", "text": f"{text(1)} {text(3)}", "score": 3.0}],
                     "negative_passages": [{"docid": f"n{i}_{k}", "text": text(5 + k), "score": 1.0 - k / 4}
                                           for k in range(4)]})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def ce_recipe(model_dir, tuples, **train) -> dict:
    return {"model": {"name": str(model_dir), "kind": "cross_encoder", "query_max_len": 32, "passage_max_len": 48},
            "loss": {"temperature": 1.0},
            "data": {"train": str(tuples), "group_size": 4},
            "train": {"batch_size": 8, "lr": 3e-3, "threads": 1, "save_every": 0, "log_every": 0,
                      "scheduler": "constant", "warmup_steps": 0, "encode_chunk_size": 8, **train}}


def test_the_listwise_loss_is_the_positives_cross_entropy_within_its_group():
    from hopscotch.retriever.training.listwise import ListwiseLoss

    # two queries: the first with 3 candidates, the second with 2 plus a copy of its own positive (masked)
    scores = torch.tensor([2.0, 0.5, -1.0, 0.3, 1.2, 0.3], requires_grad=True)
    labels = torch.tensor([0, 3])
    p_ids = torch.tensor([10, 11, 12, 20, 21, 20])
    q_pos = torch.tensor([10, 20])
    out = ListwiseLoss()(None, scores, labels, 2.0, q_pos, p_ids)
    first = -(1.0 - math.log(math.exp(1.0) + math.exp(0.25) + math.exp(-0.5)))
    second = -(0.15 - math.log(math.exp(0.15) + math.exp(0.6)))  # the duplicate of the positive left out
    assert out.value == pytest.approx((first + second) / 2, abs=1e-6)
    assert float(out.loss.detach()) == pytest.approx((first + second) / 2, abs=1e-6)
    out.loss.backward()
    assert scores.grad[5] == 0 and scores.grad[0] < 0 < scores.grad[1]
    kept = ListwiseLoss(exclude_positive_duplicates=False)(None, scores.detach(), labels, 2.0, q_pos, p_ids)
    assert kept.value > out.value  # the copy counts as a negative without the mask


def test_distillation_matches_the_teacher_over_the_same_group():
    from hopscotch.retriever.training.listwise import ListwiseLoss

    scores = torch.tensor([1.0, 0.0, -1.0])
    teacher = torch.tensor([2.0, 1.0, 0.0])
    loss = ListwiseLoss(distill="kl", infonce_weight=0.0, teacher_temperature=1.0)
    value = loss(None, scores, torch.tensor([0]), 1.0, torch.tensor([1]), torch.tensor([1, 2, 3]), teacher).value
    assert value == pytest.approx(0.0, abs=1e-6)  # the same softmax: no divergence
    half = ListwiseLoss(distill="margin_mse", infonce_weight=0.0)(None, scores * 0.5, torch.tensor([0]), 1.0,
                                                                    torch.tensor([1]), torch.tensor([1, 2, 3]), teacher)
    assert half.value == pytest.approx(((1 - 0.5) ** 2 + (2 - 1) ** 2) / 2, abs=1e-6)
    both = ListwiseLoss(distill="kl", distill_weight=0.5)(None, scores, torch.tensor([0]), 1.0, None, None, teacher)
    ce = -(1.0 - math.log(math.exp(1) + 1 + math.exp(-1)))
    assert both.value == pytest.approx(ce, abs=1e-6)  # KL 0 here: the listwise term alone


def test_a_short_run_learns_and_saves_a_crossencoder(tiny_bert_dir, tmp_path):
    from sentence_transformers import CrossEncoder

    from hopscotch.retriever.model.cross_encoder import load_cross_encoder_model
    from hopscotch.retriever.training.trainer import train

    losses = []
    tuples = _tuples(tmp_path / "t.jsonl")
    final = train(ce_recipe(tiny_bert_dir, tuples, max_steps=48), tmp_path / "run",
                  on_step_end=lambda state, loss: losses.append(loss), show_progress=False)
    assert len(losses) == 48 and losses[0] == pytest.approx(math.log(4), abs=0.02)  # an untrained head: uniform
    assert sum(losses[-12:]) / 12 < 0.8 * sum(losses[:12]) / 12
    model = load_cross_encoder_model(final, device="cpu")
    assert model.config.query_max_len == 32 and model.config.query_input == "reasoning"
    rows = [json.loads(line) for line in tuples.read_text().splitlines()][:6]
    sides = model.format_queries([r["query"] for r in rows], [r["reasoning"] for r in rows])
    docs = [r["positive_passages"][0]["text"] for r in rows]
    st = CrossEncoder(final, device="cpu")
    assert model.score(sides, docs) == pytest.approx([float(x) for x in st.predict(list(zip(sides, docs)))], abs=1e-5)
    summary = json.loads((tmp_path / "run" / "train_summary.json").read_text())
    assert summary["steps"] == 48 and summary["recipe"]["model"]["kind"] == "cross_encoder"


def test_distillation_trains_a_crossencoder_on_the_tuples_scores(tiny_bert_dir, tmp_path):
    from hopscotch.retriever.training.trainer import train

    losses = []
    final = train(ce_recipe(tiny_bert_dir, _tuples(tmp_path / "t.jsonl", 16), max_steps=2),
                  tmp_path / "run", ["loss.distill=kl", "loss.teacher_temperature=0.5"],
                  on_step_end=lambda state, loss: losses.append(loss), show_progress=False)
    assert len(losses) == 2 and all(math.isfinite(x) for x in losses) and (tmp_path / "run" / "final").is_dir()
    assert final.endswith("final")


@pytest.mark.parametrize("override, message", [
    ("data.group_size=1", "data.group_size: a cross_encoder ranks each query's own passages"),
    ("train.gradcache_chunk_size=4", "train.gradcache_chunk_size applies to encoders"),
    ("eval.queries=q.jsonl", "eval.queries: a cross_encoder reranks a first stage"),
    ("model.query_mix=0.5", "model.query_mix applies to encoders"),
    ("model.query_max_len=64", "model.query_max_len must be <= model.passage_max_len"),
    ("model.pooling=cls", "model.pooling applies to model.kind single_vector only"),
    ("model.dim=64", "model.dim applies to model.kind multi_vector only"),
])
def test_the_recipe_refuses_what_a_crossencoder_cannot_use(tiny_bert_dir, tmp_path, override, message):
    from hopscotch.retriever.errors import UsageError
    from hopscotch.retriever.training.recipe import load_recipe

    recipe = ce_recipe(tiny_bert_dir, tmp_path / "t.jsonl")
    extra = ["eval.corpus=c.jsonl", "eval.qrels=q.tsv"] if override.startswith("eval.") else []
    with pytest.raises(UsageError, match=message):
        load_recipe(recipe, [override, *extra])


def test_a_pair_longer_than_the_positions_is_refused_before_training(tiny_bert_dir, tmp_path):
    from hopscotch.retriever.errors import UsageError
    from hopscotch.retriever.training.trainer import train

    recipe = ce_recipe(tiny_bert_dir, _tuples(tmp_path / "t.jsonl", 8))
    recipe["model"].update(query_max_len=256, passage_max_len=300)
    with pytest.raises(UsageError, match=r"model.query_max_len \+ model.passage_max_len .* must be <= 512"):
        train(recipe, tmp_path / "run", show_progress=False)
