"""Weight-space ensembling of a fine-tuned model with the model it started from (WiSE-FT; Wortsman et al.,
"Robust fine-tuning of zero-shot models", CVPR 2022): ``alpha * fine_tuned + (1 - alpha) * start``, one
parameter at a time. ``alpha = 1`` is the fine-tuned model unchanged and ``0`` the starting model.

A short fine-tune on a few thousand agent steps moves all-MiniLM-L6-v2 away from what its billion training
pairs taught it; the mix keeps most of the gain on the training sources and gives back the general retrieval
that the fine-tune lost (docs/benchmarks.md, "Weight-space ensembling"). Training applies it to ``final/``
when ``train.wise_ft_alpha < 1``; ``scripts/agent_wise_ft.py`` sweeps alpha over a saved fine-tune.

Only two models of one architecture mix: same parameter names, same shapes. Tensors that are not floating
point (position ids and other integer buffers) are the fine-tuned model's, and so are a LoRA adapter's ``A``
matrices: its ``B`` starts at zero, so mixing ``B`` alone gives ``W0 + alpha * s * B A``, exactly the mix of
the merged weights (the frozen ``W0`` is the same on both sides and stays bit for bit).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from hopscotch.retriever.errors import UsageError


def interpolate_weights(fine_tuned: Mapping[str, torch.Tensor], start: Mapping[str, torch.Tensor],
                        alpha: float) -> dict[str, torch.Tensor]:
    """``alpha * fine_tuned + (1 - alpha) * start`` per tensor, computed in float32 and returned in the
    fine-tuned tensor's dtype and device; ``alpha`` 1 and 0 return exact copies of one side."""
    _check(fine_tuned, start, alpha)
    return {name: _mix(name, tuned, start[name], alpha) for name, tuned in fine_tuned.items()}


@torch.no_grad()
def mix_with_start(model: torch.nn.Module, start: torch.nn.Module, alpha: float) -> None:
    """Overwrite ``model``'s parameters and buffers, in place, with their WiSE-FT mix with ``start``'s: one
    tensor at a time, so the mix needs no second copy of the model; nothing is written unless the two match."""
    state, first = model.state_dict(), start.state_dict()
    _check(state, first, alpha)
    for name, tensor in state.items():
        tensor.copy_(_mix(name, tensor, first[name], alpha))


def _check(fine_tuned: Mapping[str, torch.Tensor], start: Mapping[str, torch.Tensor], alpha: float) -> None:
    """alpha in [0, 1]; the same tensor names and shapes on both sides."""
    if not 0.0 <= alpha <= 1.0:
        raise UsageError(f"WiSE-FT alpha must be in [0, 1], got {alpha}")
    missing, extra = sorted(set(fine_tuned) - set(start)), sorted(set(start) - set(fine_tuned))
    if missing or extra:
        lacks = f"the starting model lacks {missing[:3]}" if missing else f"the fine-tuned model lacks {extra[:3]}"
        raise UsageError(f"WiSE-FT needs two models of one architecture: {lacks}")
    for name, tuned in fine_tuned.items():
        if tuned.shape != start[name].shape:
            raise UsageError(f"WiSE-FT needs two models of one architecture: {name} is {tuple(tuned.shape)} "
                             f"fine-tuned but {tuple(start[name].shape)} at the start")


def _mix(name: str, tuned: torch.Tensor, first: torch.Tensor, alpha: float) -> torch.Tensor:
    """One tensor's mix (a new tensor; the starting one moved to the fine-tuned one's device once)."""
    if not tuned.is_floating_point() or alpha == 1.0 or ".lora_A." in name:
        return tuned.detach().clone()
    first = first.detach().to(tuned.device)
    if torch.equal(tuned, first.to(tuned.dtype)):
        return tuned.detach().clone()
    if alpha == 0.0:
        return first.to(dtype=tuned.dtype, copy=True)
    return (alpha * tuned.detach().float() + (1.0 - alpha) * first.float()).to(tuned.dtype)
