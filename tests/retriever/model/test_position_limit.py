"""The one model position limit (:mod:`hopscotch.retriever.model.position_limit`), from tiny configs."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.model.position_limit import model_position_limit


def _folder(tmp_path, name, config, modules=None):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    if modules is not None:
        (folder / "modules.json").write_text(json.dumps(modules))
    return folder


@pytest.mark.parametrize("config, limit", [
    ({"model_type": "bert", "max_position_embeddings": 512}, 512),
    ({"model_type": "roberta", "max_position_embeddings": 514, "pad_token_id": 1}, 512),
    ({"model_type": "roberta", "max_position_embeddings": 514}, 512),  # pad_token_id 1 when unsaid
    ({"model_type": "xlm-roberta", "max_position_embeddings": 8194, "pad_token_id": 1}, 8192),
    ({"model_type": "camembert", "max_position_embeddings": 514, "pad_token_id": 1}, 512),
    ({"model_type": "roberta-prelayernorm", "max_position_embeddings": 514, "pad_token_id": 1}, 512),
    ({"model_type": "mpnet", "max_position_embeddings": 514, "pad_token_id": 1}, 512),
    ({"model_type": "roberta", "max_position_embeddings": 130, "pad_token_id": 0}, 129),  # the padding index decides
    ({"model_type": "gpt2", "n_positions": 1024}, 1024),
    ({"model_type": "qwen3", "max_position_embeddings": 40960, "pad_token_id": 0}, 40960),  # no offset
    ({"model_type": "t5"}, None),  # relative positions: no limit
    ({"model_type": "bert", "max_position_embeddings": True}, None),
    ({"model_type": "bert", "max_position_embeddings": 0}, None),
    ({"model_type": "roberta", "max_position_embeddings": 2, "pad_token_id": 1}, None),
])
def test_the_limit_of_a_config(tmp_path, config, limit):
    assert model_position_limit(_folder(tmp_path, "m", config)) == limit


def test_a_sentence_transformers_folder_reads_its_transformer_module(tmp_path, tiny_bert_dir):
    assert model_position_limit("minilm") == 512
    assert model_position_limit(tiny_bert_dir) == 512  # not the 128 sentence-transformers saved as max_seq_length
    nested = _folder(tmp_path, "st", {}, [{"path": "0_Transformer", "type": "sentence_transformers.models.Transformer"}])
    (nested / "0_Transformer").mkdir()
    (nested / "0_Transformer" / "config.json").write_text(json.dumps({"model_type": "xlm-roberta",
                                                                       "max_position_embeddings": 514}))
    assert model_position_limit(nested) == 512
    empty = tmp_path / "empty"
    empty.mkdir()
    assert model_position_limit(empty) is None


def test_training_and_the_commands_share_it(tmp_path):
    """``train``'s length check and the ``--max-length`` clamp both read this one function."""
    from hopscotch.retriever.commands import flag_types
    from hopscotch.retriever.training import preflight

    assert flag_types.model_position_limit is model_position_limit
    roberta = _folder(tmp_path, "roberta", {"model_type": "roberta", "max_position_embeddings": 514, "pad_token_id": 1})
    recipe = SimpleNamespace(model=SimpleNamespace(name="r", query_max_len=128, passage_max_len=512))
    preflight.check_model_lengths(recipe, roberta)
    recipe.model.passage_max_len = 513
    with pytest.raises(UsageError, match=r"model.passage_max_len must be <= 512"):
        preflight.check_model_lengths(recipe, roberta)
    gpt = _folder(tmp_path, "gpt", {"model_type": "gpt2", "n_positions": 256})
    with pytest.raises(UsageError, match=r"model.passage_max_len must be <= 256"):
        preflight.check_model_lengths(recipe, gpt)
    assert flag_types.clamp_max_length("index", 1000, gpt) == 256
