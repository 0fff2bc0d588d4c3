"""Recipes: typed sections with EncoderConfig's defaults, YAML files and ``key=value`` overrides, and
errors that name the key (unknown keys with a guess, wrong types, values out of range or not finite, keys
that contradict each other, lengths over the base model's), raised before any model loads."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.model.config import EncoderConfig
from hopscotch.retriever.training.recipe import load_recipe, parse_override, recipe_keys
from hopscotch.retriever.training.recipe.sections import LoraRecipe, Recipe

ROOT = Path(__file__).resolve().parents[4]
MINIMAL = {"data": {"train": "a.jsonl"}}


def test_defaults_file_and_overrides(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump({"data": {"train": "a.jsonl"}, "train": {"lr": 1e-4}}))
    r = load_recipe(path, ["train.lr=3e-5", "data.train=[x.jsonl, y.jsonl]", "model.lora.r=8",
                           "train.max_steps=null", "loss.temperature=1", "train.epochs=2.0"])
    assert isinstance(r, Recipe) and isinstance(r.model.lora, LoraRecipe)
    assert r.train.lr == 3e-5 and r.data.train == ["x.jsonl", "y.jsonl"]
    assert r.model.lora.r == 8 and r.train.max_steps is None
    assert r.loss.temperature == 1.0 and isinstance(r.loss.temperature, float)
    assert r.train.epochs == 2 and isinstance(r.train.epochs, int)
    assert r.model.pooling == "mean" and r.train.batch_size == 16  # untouched defaults
    assert parse_override("eval.metric=ndcg@10") == {"eval": {"metric": "ndcg@10"}}
    assert load_recipe(MINIMAL, ["train.lr=3e-5"]).train.lr == 3e-5  # YAML 1.1 reads '3e-5' as a string


def test_the_model_knobs_are_encoder_configs():
    """``model`` and ``loss`` carry every EncoderConfig field (lora as a typed section) with its default."""
    defaults, encoder = Recipe(), EncoderConfig()
    for f in dataclasses.fields(EncoderConfig):
        if f.name == "lora":
            continue
        section = defaults.loss if f.name in ("temperature", "learn_temperature", "matryoshka_dims",
                                              "matryoshka_weights") else defaults.model
        # None: resolved by EncoderConfig (padding_side from pooling, query_input from reasoning_aware)
        expected = None if f.name in ("padding_side", "query_input") else getattr(encoder, f.name)
        assert getattr(section, f.name) == expected, f.name
    keys = set(recipe_keys())
    assert {"model.pooling", "model.query_max_len", "loss.temperature", "model.lora.r", "train.lr"} <= keys
    assert {"loss.matryoshka_dims", "loss.matryoshka_weights"} <= keys
    assert "model.temperature" not in keys and "model.lora" not in keys and "model.matryoshka_dims" not in keys


def test_encoder_config_maps_the_sections():
    r = load_recipe(MINIMAL, ["model.pooling=last", "loss.temperature=0.02", "loss.learn_temperature=true",
                              "model.query_max_len=64", "model.lora.enabled=true", "model.lora.target_modules=[q]"])
    c = r.encoder_config()
    assert (c.pooling, c.padding_side, c.temperature, c.learn_temperature, c.query_max_len) == \
        ("last", "left", 0.02, True, 64)
    assert c.lora == {"enabled": True, "r": 16, "alpha": 32, "dropout": 0.1, "target_modules": ["q"]}
    assert load_recipe(MINIMAL).encoder_config().lora == {}
    assert load_recipe(MINIMAL, ["model.padding_side=left"]).encoder_config().padding_side == "left"


def test_query_input_knob_and_its_reasoning_aware_alias():
    assert load_recipe(MINIMAL).encoder_config().query_input == "reasoning"  # the default: reasoning_aware true
    c = load_recipe(MINIMAL, ["model.reasoning_aware=false"]).encoder_config()
    assert (c.query_input, c.reasoning_aware) == ("query", False)
    c = load_recipe(MINIMAL, ["model.query_input=reasoning_tail:64"]).encoder_config()
    assert (c.query_input, c.reasoning_aware) == ("reasoning_tail:64", True)
    c = load_recipe(MINIMAL, ["model.query_input=query"]).encoder_config()
    assert (c.query_input, c.reasoning_aware) == ("query", False)
    with pytest.raises(UsageError, match=r"unknown query input 'tail:3'.*current_reasoning"):
        load_recipe(MINIMAL, ["model.query_input=tail:3"])
    with pytest.raises(UsageError, match="contradicts model.reasoning_aware=false"):
        load_recipe(MINIMAL, ["model.query_input=current_reasoning", "model.reasoning_aware=false"])


def test_recipe_round_trips_through_asdict():
    r = load_recipe(ROOT / "recipes" / "qwen3_embedding_4b_agentir.yaml")
    assert load_recipe(dataclasses.asdict(r)) == r
    assert load_recipe(r, ["train.lr=1e-3"]).train.lr == 1e-3 and r.train.lr == 1e-4


@pytest.mark.parametrize("overrides,message", [
    (["train.learning_rate=1"], "unknown recipe key 'train.learning_rate'"),
    (["train.batchsize=4"], "did you mean 'train.batch_size'"),
    (["model.temperature=0.1"], "did you mean 'loss.temperature'"),
    (["train.lr=fast"], "train.lr: expected a number, got 'fast'"),
    (["train.batch_size=2.5"], "train.batch_size: expected a whole number"),
    (["model.normalize=3"], "model.normalize: expected true/false"),
    (["model.name=3"], "model.name: expected a string"),
    (["data.train=[a.jsonl, 3]"], "data.train: expected a string or a list of strings or null"),
    (["train.scheduler=step"], "train.scheduler: expected one of 'linear', 'cosine', 'constant'"),
    (["train.mixed_precision=no"], "quote the word"),
    (["train=1"], "'train' is a section"),
    (["model.lora=1"], "'model.lora' is a section"),
    (["lr"], "expected key=value"),
    (["train.lr=0"], "command line: recipe key train.lr must be > 0, got 0$"),
    (["train.lr=-1"], "recipe key train.lr must be > 0, got -1$"),
    (["train.lr=-3e-5"], "recipe key train.lr must be > 0, got -3e-05$"),
    (["train.lr=.inf"], "recipe key train.lr must be a finite number, got inf"),
    (["loss.temperature=.nan"], "recipe key loss.temperature must be a finite number, got nan"),
    (["train.max_steps=0"], "train.max_steps must be >= 1, got 0 \\(null, the default: train.epochs decide\\)"),
    (["train.max_steps=-1"], "train.max_steps must be >= 1, got -1 \\(null, the default: train.epochs decide\\)"),
    (["train.batch_size=0"], "train.batch_size must be >= 1, got 0$"),
    (["train.grad_accum_steps=0"], "train.grad_accum_steps must be >= 1"),
    (["train.epochs=0"], "train.epochs must be >= 1"),
    (["train.save_every=-1"], "train.save_every must be >= 0, got -1 \\(0: only the final model\\)"),
    (["train.save_total_limit=-2"], "train.save_total_limit must be >= 0, got -2 \\(0 or null: keep all\\)"),
    (["train.warmup_steps=-1"], "train.warmup_steps must be >= 0"),
    (["train.warmup_ratio=1.5"], "train.warmup_ratio must be >= 0 and <= 1, got 1.5"),
    (["train.weight_decay=-0.1"], "train.weight_decay must be >= 0"),
    (["train.max_grad_norm=-1"], "train.max_grad_norm must be >= 0, got -1 \\(0 or null: no clipping\\)"),
    (["data.group_size=0"], "data.group_size must be >= 1"),
    (["eval.batch_size=0"], "eval.batch_size must be >= 1"),
    (["model.lora.r=0"], "model.lora.r must be >= 1"),
    (["model.lora.dropout=1"], "model.lora.dropout must be >= 0 and < 1, got 1"),
    (["loss.temperature=0"], "command line: recipe key loss.temperature must be > 0, got 0"),
    (["model.query_max_len=0"], "command line: recipe key model.query_max_len must be >= 1, got 0"),
    (["model.passage_max_len=-5"], "model.passage_max_len must be >= 1, got -5"),
    (["train.max_steps=5", "train.warmup_steps=6"], "train.warmup_steps must be <= train.max_steps \\(5\\), got 6"),
    (["eval.metric=ndcg10"], "recipe key eval.metric: unknown metric 'ndcg10'"),
    (["model.pooling=max"], "model.pooling: expected one of"),
    (["eval.queries=q.jsonl"], "eval.corpus and eval.qrels are required"),
])
def test_bad_values_name_the_key(overrides, message):
    with pytest.raises(UsageError, match=message.replace("[", r"\[")):
        load_recipe(MINIMAL, overrides)


def test_errors_say_where(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("data: {train: a.jsonl}\ntrain: {lr: -1}\n")
    with pytest.raises(UsageError, match=r"r.yaml: recipe key train.lr must be > 0, got -1$"):
        load_recipe(path)
    with pytest.raises(UsageError, match=r"^command line: unknown recipe key 'eval.nope'"):
        load_recipe(MINIMAL, ["eval.nope=1"])


def test_recipe_errors(tmp_path):
    with pytest.raises(UsageError, match="data.train is required"):
        load_recipe({})
    bad = tmp_path / "bad.yaml"
    bad.write_text("train: [1, 2\n")
    with pytest.raises(UsageError, match="bad.yaml:"):
        load_recipe(bad)
    bad.write_text("- a\n- b\n")
    with pytest.raises(UsageError, match="expected a YAML mapping of sections, got list"):
        load_recipe(bad)
    with pytest.raises(UsageError, match="no such file"):
        load_recipe(tmp_path / "missing.yaml")


@pytest.mark.parametrize("path", sorted((ROOT / "recipes").glob("*.yaml")), ids=lambda p: p.stem)
def test_every_bundled_recipe_loads(path):
    r = load_recipe(path)
    assert r.data.train and (r.train.max_steps is None or r.train.max_steps > 0)
    r.encoder_config()


def test_agentir_recipe_values():
    agentir = load_recipe(ROOT / "recipes" / "qwen3_embedding_4b_agentir.yaml")
    assert agentir.model.pooling == "last" and agentir.loss.temperature == 0.01
    assert agentir.model.instruction.startswith("Instruct: Given a user's reasoning")
    assert agentir.data.group_size == 8 and agentir.model.lora.enabled and agentir.model.lora.alpha == 64
    assert agentir.encoder_config().padding_side == "left"


@pytest.mark.parametrize("override, message", [("train.lr=-1", "recipe key train.lr must be > 0, got -1"),
                                               ("train.max_steps=-1", "recipe key train.max_steps must be >= 1")])
def test_cli_reports_a_range_error_on_one_line(cli, tmp_path, override, message):
    code, _, err = cli("train", "--recipe", ROOT / "recipes" / "minilm_hotpot.yaml", "--output", tmp_path / "o",
                       override)
    assert code == 2 and err.strip().count("\n") == 0 and message in err
    assert not (tmp_path / "o").exists()  # refused before the run folder, let alone a model


@pytest.fixture
def no_model_load(monkeypatch):
    from hopscotch.retriever.model.dual_encoder import DualEncoder

    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded before the check")

    monkeypatch.setattr(DualEncoder, "from_pretrained", refuse)


@pytest.mark.parametrize("overrides, message", [
    (["model.passage_max_len=600"], r"recipe key model.passage_max_len must be <= 512 \(the position embeddings"),
    (["model.query_max_len=513"], r"recipe key model.query_max_len must be <= 512"),
    (["train.max_steps=null", "train.warmup_steps=100"], r"train.warmup_steps must be <= the run's 3 steps \(train.epochs 1 x 3 steps an epoch\), got 100"),
    (["data.train=missing.jsonl"], r"data.train: missing.jsonl: no such file or folder"),
    (["eval.queries=q.jsonl", "eval.corpus=c.jsonl", "eval.qrels=r.tsv"], r"recipe key eval.queries: q.jsonl: no such"),
])
def test_checks_that_need_the_model_or_the_data_come_before_it_loads(tiny_bert_dir, tmp_path, write_training_tuples,
                                                                      no_model_load, overrides, message):
    """The base model's config.json (max_position_embeddings 512) bounds the lengths; the data the warmup."""
    from hopscotch.retriever.training.trainer import train

    r = {"model": {"name": str(tiny_bert_dir)}, "data": {"train": str(write_training_tuples(tmp_path / "t.jsonl"))},
         "train": {"batch_size": 16, "max_steps": 2}}
    with pytest.raises(UsageError, match=message):
        train(r, tmp_path / "run", overrides, show_progress=False)


def test_the_query_input_mixture_keys():
    from hopscotch.retriever.training.recipe.sections import query_input_mixture

    r = load_recipe(MINIMAL, ["data.query_inputs=[query, empty_reasoning, reasoning_tail:8]",
                              "data.query_input_weights=[2, 1, 1]"])
    assert r.data.query_inputs == ["query", "empty_reasoning", "reasoning_tail:8"]
    assert query_input_mixture(r.data) == {"query": 0.5, "empty_reasoning": 0.25, "reasoning_tail:8": 0.25}
    assert query_input_mixture(load_recipe(MINIMAL, ["data.query_inputs=[query, reasoning]"]).data) == \
        {"query": 0.5, "reasoning": 0.5}
    assert query_input_mixture(load_recipe(MINIMAL).data) is None
    for overrides, message in [
        (["data.query_inputs=[query, nope]"], "data.query_inputs: unknown query input 'nope'"),
        (["data.query_inputs=[]"], "expected a non-empty list"),
        (["data.query_inputs=[query]", "data.query_input_weights=[1, 2]"], "one weight per data.query_inputs"),
        (["data.query_input_weights=[1]"], "one weight per data.query_inputs"),
        (["data.query_inputs=[query]", "data.query_input_weights=[0]"], "not all 0"),
        (["data.query_inputs=[query, reasoning]", "data.query_input_weights=[-1, 2]"], "weights >= 0"),
    ]:
        with pytest.raises(UsageError, match=message):
            load_recipe(MINIMAL, overrides)


@pytest.mark.parametrize("name, inputs, default_input", [
    ("minilm_agent", ["reasoning"], "current_reasoning"),
    ("qwen3_embedding_4b_agent", ["query", "current_reasoning", "reasoning", "empty_reasoning"], "current_reasoning")])
def test_agent_recipes_train_on_their_inputs(name, inputs, default_input):
    r = load_recipe(ROOT / "recipes" / f"{name}.yaml")
    assert r.data.query_inputs == inputs
    assert r.encoder_config().query_input == default_input


def test_the_agent_recipe_trains_on_the_whole_reasoning_and_searches_with_the_rules_pick():
    """Trained on the whole reasoning; searched as the selection rule picked on the trained model (2026-12-06): the
    current turn's thinking mixed with the query at 0.6, the query alone above 200 words."""
    r = load_recipe(ROOT / "recipes" / "minilm_agent.yaml")
    c = r.encoder_config()
    assert r.data.query_inputs == ["reasoning"]
    assert (c.query_input, c.late_fusion, c.late_fusion_max_words, c.late_fusion_long) == ("current_reasoning", 0.6, 200,
                                                                                          1.0)
    assert r.train.wise_ft_alpha == 1.0 and r.data.query_input_weights == [1]


def test_the_agent_reranker_and_distillation_recipes():
    rr = load_recipe(ROOT / "recipes" / "minilm_agent_reranker.yaml")
    assert rr.model.kind == "cross_encoder" and rr.loss.temperature == 1.0 and rr.data.group_size == 4
    assert rr.model.query_max_len + rr.model.passage_max_len == 256 and rr.model.query_max_len <= rr.model.passage_max_len
    script = (ROOT / "scripts" / "train_agent_retriever.sh").read_text()
    assert "--reranker" in script and "RECIPE=recipes/minilm_agent_reranker.yaml" in script
    distill = load_recipe(ROOT / "recipes" / "minilm_agent_distill.yaml")
    assert distill.loss.distill == "kl" and distill.data.group_size == 4
    assert all("teacher_both" in f for f in distill.data.train)  # the recipe says which teacher scored its tuples
    for name in ("minilm_agent", "minilm_agent_reranker", "minilm_agent_distill"):
        assert load_recipe(ROOT / "recipes" / f"{name}.yaml").train.encode_chunk_size == 8  # docs/benchmarks.md


def test_the_query_mix_keys_and_their_deprecated_names(capsys):
    from hopscotch.retriever.training.recipe.reading import load_recipe

    new = load_recipe({"model": {"query_mix": 0.5, "query_mix_max_words": 40, "query_mix_long": 0.2}},
                      ["data.train=t.jsonl"])
    assert capsys.readouterr().err == ""
    old = load_recipe({"model": {"late_fusion": 0.5}}, ["data.train=t.jsonl", "model.late_fusion_max_words=40",
                                                        "model.late_fusion_long=0.2"])
    assert (new.model.late_fusion, new.model.late_fusion_max_words, new.model.late_fusion_long) == (0.5, 40, 0.2)
    assert (old.model.late_fusion, old.model.late_fusion_max_words, old.model.late_fusion_long) == (0.5, 40, 0.2)
    notes = capsys.readouterr().err.splitlines()
    assert len(notes) == 3 and "recipe key model.late_fusion is deprecated, use model.query_mix" in notes[0]
    load_recipe(old)  # a recipe object read again: no note
    assert capsys.readouterr().err == ""
    with pytest.raises(UsageError, match="model.query_mix and model.late_fusion name the same setting"):
        load_recipe({"model": {"query_mix": 0.5, "late_fusion": 0.4}}, ["data.train=t.jsonl"])
    with pytest.raises(UsageError, match="model.query_mix: expected a weight"):
        load_recipe({"model": {"query_mix": 2}}, ["data.train=t.jsonl"])
