"""GPU kernels of Hopscotch and their PyTorch references.

* :func:`infonce_loss` -- the fused Triton InfoNCE loss (:mod:`hopscotch.kernels.infonce`): loss and both
  gradients tile by tile, ``O((B + N) d)`` memory. On CPU tensors it falls back to the reference with
  a one-time warning, unless ``TRITON_INTERPRET=1`` runs the kernels in Triton's interpreter.
* :func:`reference_infonce_loss` -- the same loss in plain PyTorch (:mod:`hopscotch.kernels.reference`).
* :func:`select_infonce_loss` -- the one choice between the two, which the trainer's loss makes through it:
  fused on CUDA, reference elsewhere, or the ``impl`` asked for (:mod:`hopscotch.kernels.select`).
* :func:`maxsim_infonce_loss`, :func:`reference_maxsim_infonce_loss`, :func:`select_maxsim_infonce_loss` --
  the same three for late interaction: InfoNCE over MaxSim scores of token embeddings
  (:mod:`hopscotch.kernels.maxsim`, :mod:`hopscotch.kernels.maxsim_reference`); the fused one never builds
  the ``[B, N, Lq, Lp]`` token similarities.

The single-vector losses take ``(q [B, d], p [N, d], labels [B], temperature, exclude=None)``, the
MaxSim ones ``(q [B, Lq, d], p [N, Lp, d], labels, temperature, exclude=None, *, q_mask=None,
p_mask=None)``; see :mod:`hopscotch.kernels.exclusion` for the two encodings of ``exclude``.

Importing this package is cheap: it imports neither torch nor triton until a name is used.

>>> import torch
>>> from hopscotch import kernels
>>> q, p = torch.randn(2, 8), torch.randn(6, 8)              # 2 queries, 6 passages
>>> loss_fn = kernels.select_infonce_loss(q.device)          # the reference on a CPU
>>> loss_fn is kernels.reference_infonce_loss
True
>>> q_pos_ids, p_ids = torch.tensor([10, 12]), torch.tensor([10, 11, 12, 13, 10, 14])   # document ids
>>> loss = loss_fn(q, p, torch.tensor([0, 2]), temperature=0.02, exclude=(q_pos_ids, p_ids))
>>> loss.shape, bool(loss.isfinite())
(torch.Size([]), True)
"""

from __future__ import annotations

if __name__ == "kernels":  # pragma: no cover - exercised in subprocesses (tests/test_entry_points.py)
    # This folder imported under the top-level name ``kernels``: the clone root is on sys.path (``python train.py``,
    # ``accelerate launch train.py``, ``python -c`` or ``python -m`` typed in the clone root). That name is Hugging
    # Face's kernels package (transformers imports it); Hopscotch's kernels are ``hopscotch.kernels``. So the import
    # gets Hugging Face's package (the import system returns what a module leaves in sys.modules under its name), or
    # fails as it would without this folder.
    import importlib.machinery as _machinery
    import importlib.util as _util
    import os as _os
    import sys as _sys

    def _foreign_kernels():
        here = _os.path.realpath(_os.path.dirname(_os.path.abspath(__file__)))
        root = _os.path.dirname(here)
        path = [p for p in _sys.path if _os.path.realpath(p or _os.curdir) != root]
        for finder in _sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            spec = find("kernels", path if finder is _machinery.PathFinder else None)
            if spec is not None and not (spec.origin or "").startswith(here + _os.sep):
                return spec
        return None

    _spec = _foreign_kernels()
    if _spec is None:
        del _sys.modules[__name__]
        raise ModuleNotFoundError("No module named 'kernels'", name="kernels")
    _module = _util.module_from_spec(_spec)
    _sys.modules[__name__] = _module
    try:
        _spec.loader.exec_module(_module)
    except BaseException:
        _sys.modules.pop(__name__, None)
        raise

__all__ = ["infonce_loss", "reference_infonce_loss", "select_infonce_loss", "maxsim_infonce_loss",
           "reference_maxsim_infonce_loss", "select_maxsim_infonce_loss"]


def infonce_loss(q, p, labels, temperature, exclude=None, **options):
    """Fused InfoNCE loss; see :func:`hopscotch.kernels.infonce.infonce_loss` for the arguments."""
    from .infonce import infonce_loss as fused

    return fused(q, p, labels, temperature, exclude, **options)


def reference_infonce_loss(q, p, labels, temperature, exclude=None):
    """Reference InfoNCE loss in PyTorch; see :func:`hopscotch.kernels.reference.infonce_loss`."""
    from .reference import infonce_loss as reference

    return reference(q, p, labels, temperature, exclude)


def select_infonce_loss(device, impl: str = "auto"):
    """Return the loss function to use for tensors on ``device``: the one place that picks between the fused
    kernel and the reference (by :func:`hopscotch.kernels.select.choose_impl`); the trainer's loss calls it.

    Args:
        device: a ``torch.device`` or string such as ``"cuda:0"`` or ``"cpu"``.
        impl: ``"auto"`` (fused on CUDA, reference otherwise), ``"fused"`` (the reference, with a one-time
            warning, where Triton cannot run: CPU without ``TRITON_INTERPRET=1``) or ``"reference"``.

    Returns:
        :func:`infonce_loss` or :func:`reference_infonce_loss`.
    """
    from .select import choose_impl

    return infonce_loss if choose_impl(device, impl, "infonce_loss") == "fused" else reference_infonce_loss


def maxsim_infonce_loss(q, p, labels, temperature, exclude=None, *, q_mask=None, p_mask=None, **options):
    """Fused InfoNCE loss over MaxSim scores; see :func:`hopscotch.kernels.maxsim.maxsim_infonce_loss`."""
    from .maxsim import maxsim_infonce_loss as fused

    return fused(q, p, labels, temperature, exclude, q_mask=q_mask, p_mask=p_mask, **options)


def reference_maxsim_infonce_loss(q, p, labels, temperature, exclude=None, *, q_mask=None, p_mask=None,
                                  **options):
    """InfoNCE over MaxSim scores in PyTorch; see :func:`hopscotch.kernels.maxsim_reference.maxsim_infonce_loss`."""
    from .maxsim_reference import maxsim_infonce_loss as reference

    return reference(q, p, labels, temperature, exclude, q_mask=q_mask, p_mask=p_mask, **options)


def select_maxsim_infonce_loss(device, impl: str = "auto"):
    """:func:`maxsim_infonce_loss` or :func:`reference_maxsim_infonce_loss`, by the rule of
    :func:`select_infonce_loss` (``impl`` ``"auto"``: fused on CUDA, reference otherwise)."""
    from .select import choose_impl

    fused = choose_impl(device, impl, "maxsim_infonce_loss") == "fused"
    return maxsim_infonce_loss if fused else reference_maxsim_infonce_loss
