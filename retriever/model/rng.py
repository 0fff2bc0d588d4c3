"""Capturing and restoring random-number-generator state, so a forward pass can be replayed exactly.

GradCache encodes every mini-batch twice (once without gradients, once with); dropout must draw the
same masks both times, so the state before the first pass is captured and restored before the second.
"""

from __future__ import annotations

import torch


def capture_rng(device: torch.device | None = None):
    """The CPU generator state, plus the CUDA one of ``device`` when it is a GPU."""
    cuda = None
    if device is not None and device.type == "cuda":
        cuda = (device, torch.cuda.get_rng_state(device))
    return torch.get_rng_state(), cuda


def restore_rng(state) -> None:
    """Undo :func:`capture_rng`; ``None`` leaves the generators alone."""
    if state is None:
        return
    cpu, cuda = state
    torch.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state(cuda[1], cuda[0])
