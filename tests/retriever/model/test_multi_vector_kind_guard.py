"""A multi-vector folder is never loaded as a single-vector model (issue 36, mechanism 4): sentence-transformers would
convert it and drop its projection. Every single-vector path (search, index, audits through the encoder, training
from it) goes through DenseEncoder or DualEncoder.from_pretrained, which both refuse it (model/config.py:
refuse_multi_vector)."""

from __future__ import annotations

import json

import pytest

from hopscotch.retriever.errors import UsageError


@pytest.fixture
def mv_folder(tmp_path):
    folder = tmp_path / "mv"
    folder.mkdir()
    (folder / "hopscotch_config.json").write_text(json.dumps({"kind": "multi_vector"}))
    (folder / "config.json").write_text("{}")
    return folder


def test_the_single_vector_encoder_refuses_a_multi_vector_folder(mv_folder):
    from hopscotch.retriever.model.dense_encoder import DenseEncoder

    with pytest.raises(UsageError, match="a multi-vector .* not a single-vector encoder") as err:
        DenseEncoder(mv_folder, device="cpu")
    assert str(mv_folder) in str(err.value) and "\n" not in str(err.value)


def test_training_from_a_multi_vector_folder_is_refused(mv_folder):
    from hopscotch.retriever.model.dual_encoder import DualEncoder

    with pytest.raises(UsageError, match="multi-vector"):
        DualEncoder.from_pretrained(mv_folder)


def test_the_cli_says_it_in_one_line(mv_folder, tmp_path, cli, small_world, small_world_index):
    # a single-vector index searched with a multi-vector model's queries
    code, _, err = cli("search", "--queries", small_world / "queries.jsonl", "--index", small_world_index, "--model",
                       mv_folder, "--out", tmp_path / "run.trec")
    assert code == 2 and "multi-vector" in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("content, needle", [
    ("{not json", "not readable JSON"),
    ('{"kind": "single_vector", "settings": {}, "probes": []}', "non-empty 'probes'"),
    ('{"kind": "single_vector", "settings": {}, "probes": [{"vector": [0.1, NaN]}]}', "finite numbers"),
    ('{"kind": "single_vector", "settings": {}, "probes": [{"vector": [0.1, 0.2]}, {"vector": [0.3]}]}',
     "vectors of 1 and 2 numbers"),
    ('{"kind": "multi_vector", "probes": [{"vectors": [["x"]]}]}', "finite numbers"),
], ids=["json", "empty", "nan", "ragged", "multi-vector-strings"])
def test_malformed_golden_vectors_are_named_not_blamed_on_the_model(tmp_path, content, needle):
    from hopscotch.retriever.model.golden import GOLDEN_FILE, read_golden

    (tmp_path / GOLDEN_FILE).write_text(content)
    with pytest.raises(UsageError, match="malformed golden vectors") as err:
        read_golden(tmp_path)
    assert needle in str(err.value) and GOLDEN_FILE in str(err.value) and "\n" not in str(err.value)
