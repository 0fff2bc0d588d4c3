"""GPU kernels of Hopscotch and their PyTorch references.

* :func:`infonce_loss` -- the fused Triton InfoNCE loss (:mod:`hopscotch.kernels.infonce`): loss and both
  gradients tile by tile, ``O((B + N) d)`` memory. On CPU tensors it falls back to the reference with
  a one-time warning, unless ``TRITON_INTERPRET=1`` runs the kernels in Triton's interpreter.
* :func:`reference_infonce_loss` -- the same loss in plain PyTorch (:mod:`hopscotch.kernels.reference`).
* :func:`select_infonce_loss` -- the trainer's default: fused on CUDA, reference elsewhere.

Both losses take ``(q [B, d], p [N, d], labels [B], temperature, exclude=None)``; see
:mod:`hopscotch.kernels.exclusion` for the two encodings of ``exclude``.

Importing this package is cheap: it imports neither torch nor triton until a name is used.

Example::

    from hopscotch import kernels

    loss_fn = kernels.select_infonce_loss(q.device)
    loss = loss_fn(q, p, labels, temperature=0.02, exclude=(q_pos_ids, p_ids))
"""

from __future__ import annotations

__all__ = ["infonce_loss", "reference_infonce_loss", "select_infonce_loss"]


def infonce_loss(q, p, labels, temperature, exclude=None, **options):
    """Fused InfoNCE loss; see :func:`hopscotch.kernels.infonce.infonce_loss` for the arguments."""
    from .infonce import infonce_loss as fused

    return fused(q, p, labels, temperature, exclude, **options)


def reference_infonce_loss(q, p, labels, temperature, exclude=None):
    """Reference InfoNCE loss in PyTorch; see :func:`hopscotch.kernels.reference.infonce_loss`."""
    from .reference import infonce_loss as reference

    return reference(q, p, labels, temperature, exclude)


def select_infonce_loss(device, impl: str = "auto"):
    """Return the loss function to use for tensors on ``device``.

    Args:
        device: a ``torch.device`` or string such as ``"cuda:0"`` or ``"cpu"``.
        impl: ``"auto"`` (fused on CUDA, reference otherwise), ``"fused"`` or ``"reference"``.

    Returns:
        :func:`infonce_loss` or :func:`reference_infonce_loss`.
    """
    import torch

    if impl == "fused":
        return infonce_loss
    if impl == "reference":
        return reference_infonce_loss
    if impl != "auto":
        raise ValueError(f"impl: expected 'auto', 'fused' or 'reference', got {impl!r}")
    return infonce_loss if torch.device(device).type == "cuda" else reference_infonce_loss
