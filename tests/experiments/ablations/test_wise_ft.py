"""Choosing train.wise_ft_alpha (:mod:`hopscotch_experiments.ablations.wise_ft`): the mixed model folders it
searches with (the trainer's own mix), the cache key of a fine-tune, the choice of alpha, its docs section and
its JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from hopscotch_experiments.ablations import wise_ft as wise


@pytest.fixture(scope="module")
def finetuned(tiny_bert_dir, tmp_path_factory) -> Path:
    """The tiny BERT with every weight moved, saved with recorded search defaults."""
    from hopscotch.retriever.model.config import EncoderConfig
    from hopscotch.retriever.model.dual_encoder import DualEncoder

    model = DualEncoder.from_pretrained(tiny_bert_dir, EncoderConfig(query_input="current_reasoning",
                                                                      passage_windows=4, window_stride=16))
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.1)
    out = tmp_path_factory.mktemp("ft") / "final"
    model.save(out)
    return out


def _weights(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(folder / "model.safetensors")


def test_mixed_model_is_the_weighted_mean_and_keeps_the_recorded_defaults(finetuned, tiny_bert_dir, tmp_path):
    from hopscotch.retriever.model.weight_merge import interpolate_weights

    half = wise.mixed_model(finetuned, str(tiny_bert_dir), 0.5, tmp_path / "a0.5")
    one = wise.mixed_model(finetuned, str(tiny_bert_dir), 1.0, tmp_path / "a1")
    tuned, start = _weights(finetuned), _weights(tiny_bert_dir)
    expected = interpolate_weights(tuned, start, 0.5)
    assert all(torch.equal(v, expected[k]) for k, v in _weights(half).items())
    assert all(torch.equal(v, tuned[k]) for k, v in _weights(one).items())
    config = json.loads((half / "hopscotch_config.json").read_text())
    assert config["query_input"] == "current_reasoning" and config["passage_windows"] == 4
    before = (half / "model.safetensors").stat().st_mtime_ns
    wise.mixed_model(finetuned, str(tiny_bert_dir), 0.5, tmp_path / "a0.5")   # cached: not rewritten
    assert (half / "model.safetensors").stat().st_mtime_ns == before


def test_fingerprint_follows_the_weights_not_the_folder(finetuned, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(finetuned, copy)
    assert wise.fingerprint(copy) == wise.fingerprint(finetuned) and len(wise.fingerprint(copy)) == 10
    (copy / "hopscotch_config.json").write_text("{}")
    assert wise.fingerprint(copy) == wise.fingerprint(finetuned)
    data = bytearray((copy / "model.safetensors").read_bytes())
    data[-1] ^= 1
    (copy / "model.safetensors").write_bytes(bytes(data))
    assert wise.fingerprint(copy) != wise.fingerprint(finetuned)


def test_choose_takes_the_best_tune_mean_and_the_larger_alpha_among_equals():
    assert wise.choose({0.0: 0.4, 0.5: 0.61, 1.0: 0.6}) == 0.5
    assert wise.choose({0.3: 0.6, 0.7: 0.6, 1.0: 0.59}) == 0.7


def test_render_marks_the_chosen_alpha_and_reports_p_against_alpha_one():
    def c(mean, p=None):
        return {"mean": mean, "ci95": 0.02, "tune": mean} | ({"p": p} if p is not None else {})

    result = {"sets": {"a": "Set A", "b": "Set B"}, "alphas": [0.5, 1.0], "chosen": 0.5,
              "tune_mean": {0.5: 0.61, 1.0: 0.6},
              "table": {0.5: {("a", "default"): c(0.7, 0.01), ("b", "default"): c(0.5, 0.4),
                              ("a", "query"): c(0.6, 0.2), ("b", "query"): c(0.4, 0.9)},
                        1.0: {("a", "default"): c(0.65), ("b", "default"): c(0.5),
                              ("a", "query"): c(0.55), ("b", "query"): c(0.45)}}}
    lines = wise.render(result).splitlines()
    assert "| alpha | tune mean (defaults) | Set A | Set B |" in lines
    assert "| 0.5 (chosen) | 0.610 | 0.700 ± 0.020 (p=0.010*) | 0.500 ± 0.020 (p=0.400) |" in lines
    assert "| 1 | 0.600 | 0.650 ± 0.020 | 0.500 ± 0.020 |" in lines
    assert "| 0.5 (chosen) |  | 0.600 ± 0.020 (p=0.200) | 0.400 ± 0.020 (p=0.900) |" in lines
    as_json = json.loads(json.dumps(wise.to_json(result)))
    assert as_json["tune_mean"] == {"0.5": 0.61, "1": 0.6} and as_json["chosen"] == 0.5
    assert as_json["table"]["0.5"]["a|default"] == c(0.7, 0.01) and set(as_json["table"]["1"]) == {
        "a|default", "b|default", "a|query", "b|query"}
