"""Which implementation of a loss runs: the fused Triton kernel or the PyTorch reference.

:func:`choose_impl` is the one rule, used by everything that picks between the two:
:func:`hopscotch.kernels.select_infonce_loss` and :func:`hopscotch.kernels.select_maxsim_infonce_loss` (and
through them the trainer's loss, :mod:`hopscotch.retriever.training.loss`, whose ``loss.backend`` recipe key
is ``impl``), and the fused losses themselves when they are called on tensors the kernels cannot take.

* ``"auto"``: fused on CUDA, the reference elsewhere (CPU included, even under ``TRITON_INTERPRET=1``:
  the interpreter is for testing the kernels, far too slow to train with);
* ``"fused"``: the fused kernel where Triton runs (:func:`fused_available`: CUDA, or CPU while
  ``TRITON_INTERPRET=1`` runs the kernels in Triton's interpreter); elsewhere the reference, with a one-time
  warning per loss;
* ``"reference"``: the reference.

``choose_impl("cpu", "fused")`` is ``'reference'`` and a warning (``'fused'`` under ``TRITON_INTERPRET=1``):

>>> choose_impl("cuda:0"), choose_impl("cpu")
('fused', 'reference')
"""

from __future__ import annotations

import importlib
import os
import warnings

import torch

#: the values of ``impl`` (the trainer's ``loss.backend``)
IMPLS = ("auto", "fused", "reference")
#: the losses whose "no Triton here" warning was given (once each)
_warned: set[str] = set()


def interpreter_enabled() -> bool:
    """True when ``TRITON_INTERPRET=1``: Triton kernels then run on CPU tensors, slowly."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def kernel_module(name: str):
    """The Triton kernel module ``name`` (``"hopscotch.kernels._triton_kernels"``), imported, and redefined when
    ``TRITON_INTERPRET`` changed since it was defined (its ``INTERPRET`` says how it was)."""
    module = importlib.import_module(name)
    if module.INTERPRET != interpreter_enabled():
        module = importlib.reload(module)
    return module


def fused_available(device: torch.device | str) -> bool:
    """True when the Triton kernels run for tensors on ``device``."""
    device = torch.device(device)
    return device.type == "cuda" or (device.type == "cpu" and interpreter_enabled())


def checked_impl(impl: str, key: str = "impl") -> str:
    """``impl`` when it is one of :data:`IMPLS`, else ValueError naming ``key``: the one check of the value (the
    trainer's ``loss.backend`` and recipe key go through it, :func:`hopscotch.retriever.training.loss.checked_backend`)."""
    if impl not in IMPLS:
        raise ValueError(f"{key}: expected one of {', '.join(map(repr, IMPLS))}, got {impl!r}")
    return impl


def choose_impl(device: torch.device | str, impl: str = "auto", loss: str = "infonce_loss") -> str:
    """``"fused"`` or ``"reference"``: what runs for tensors on ``device`` when ``impl`` is asked for (see the
    module docstring); ``loss`` names the loss in the warning. ValueError for an unknown ``impl``."""
    checked_impl(impl)
    device = torch.device(device)
    if impl == "reference" or (impl == "auto" and device.type != "cuda"):
        return "reference"
    if fused_available(device):
        return "fused"
    if loss not in _warned:
        warnings.warn(f"hopscotch.kernels.{loss}: no Triton for device {device} (set TRITON_INTERPRET=1 to run "
                      "the kernels on CPU); using the PyTorch reference", stacklevel=3)
        _warned.add(loss)
    return "reference"
