"""WiSE-FT weight mixing (model/weight_merge.py): exact ends, the midpoint, dtypes, integer buffers, and
refusals naming what does not match."""

from __future__ import annotations

import pytest
import torch

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.model.weight_merge import interpolate_weights, mix_with_start


def _states():
    g = torch.Generator().manual_seed(0)
    tuned = {"w": torch.randn(3, 4, generator=g), "b": torch.randn(4, generator=g).to(torch.bfloat16),
             "ids": torch.arange(5)}
    start = {"w": torch.randn(3, 4, generator=g), "b": torch.randn(4, generator=g).to(torch.bfloat16),
             "ids": torch.arange(5) + 7}
    return tuned, start


def test_alpha_one_and_zero_are_exact_copies_of_one_side():
    tuned, start = _states()
    one, zero = interpolate_weights(tuned, start, 1.0), interpolate_weights(tuned, start, 0.0)
    for name in ("w", "b"):
        assert torch.equal(one[name], tuned[name]) and torch.equal(zero[name], start[name])
        assert one[name].data_ptr() != tuned[name].data_ptr()          # copies, not views
    assert torch.equal(zero["ids"], tuned["ids"])                      # integer buffers stay the fine-tuned ones


def test_the_mix_is_computed_in_float32_and_kept_in_each_tensors_dtype():
    tuned, start = _states()
    mixed = interpolate_weights(tuned, start, 0.3)
    assert torch.allclose(mixed["w"], 0.3 * tuned["w"] + 0.7 * start["w"], atol=0, rtol=1e-6)
    assert mixed["b"].dtype == torch.bfloat16
    assert torch.equal(mixed["b"], (0.3 * tuned["b"].float() + 0.7 * start["b"].float()).to(torch.bfloat16))


@pytest.mark.parametrize("alpha", [-0.1, 1.5, float("nan")])
def test_alpha_outside_zero_one_is_refused(alpha):
    tuned, start = _states()
    with pytest.raises(UsageError, match=r"alpha must be in \[0, 1\]"):
        interpolate_weights(tuned, start, alpha)


def test_models_of_different_architectures_are_refused_naming_the_tensor():
    tuned, start = _states()
    with pytest.raises(UsageError, match="starting model lacks \\['extra'\\]"):
        interpolate_weights({**tuned, "extra": torch.zeros(1)}, start, 0.5)
    with pytest.raises(UsageError, match="fine-tuned model lacks"):
        interpolate_weights({"w": tuned["w"]}, start, 0.5)
    with pytest.raises(UsageError, match=r"w is \(3, 4\) fine-tuned but \(4, 3\) at the start"):
        interpolate_weights(tuned, {**start, "w": torch.zeros(4, 3)}, 0.5)


def test_mix_with_start_overwrites_a_module_in_place():
    torch.manual_seed(0)
    model, start = torch.nn.Linear(4, 2), torch.nn.Linear(4, 2)
    expected = {k: 0.5 * v + 0.5 * start.state_dict()[k] for k, v in model.state_dict().items()}
    weight = model.weight
    mix_with_start(model, start, 0.5)
    assert model.weight is weight                                      # the same parameter, new values
    for name, value in model.state_dict().items():
        assert torch.allclose(value, expected[name], atol=0, rtol=1e-6)


def test_lora_a_matrices_are_the_fine_tuned_ones_and_equal_tensors_stay_bit_for_bit():
    g = torch.Generator().manual_seed(3)
    frozen = torch.randn(4, 4, generator=g)
    tuned = {"q.base_layer.weight": frozen.clone(), "q.lora_A.default.weight": torch.randn(2, 4, generator=g),
             "q.lora_B.default.weight": torch.randn(4, 2, generator=g)}
    start = {"q.base_layer.weight": frozen.clone(), "q.lora_A.default.weight": torch.randn(2, 4, generator=g),
             "q.lora_B.default.weight": torch.zeros(4, 2)}
    mixed = interpolate_weights(tuned, start, 0.3)
    assert torch.equal(mixed["q.base_layer.weight"], frozen)                 # not 0.3 w + 0.7 w, rounded
    assert torch.equal(mixed["q.lora_A.default.weight"], tuned["q.lora_A.default.weight"])
    delta = mixed["q.lora_B.default.weight"] @ mixed["q.lora_A.default.weight"]
    full = tuned["q.lora_B.default.weight"] @ tuned["q.lora_A.default.weight"]
    assert torch.allclose(delta, 0.3 * full, atol=1e-6, rtol=0)              # the merged update, scaled
