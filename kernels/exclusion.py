"""Checking the arguments of an InfoNCE loss and normalising its ``exclude`` argument.

Both the reference loss (:mod:`hopscotch.kernels.reference`) and the fused Triton loss (:mod:`hopscotch.kernels.infonce`)
accept the same two encodings of "passages to drop from a query's denominator":

* **dense** -- a ``[B, N]`` ``torch.bool`` tensor; ``exclude[i, j] = True`` drops passage ``j`` from
  query ``i``'s log-sum-exp. Simple, but it costs ``B x N`` bytes, so use it for small cases.
* **ids** -- a pair ``(q_pos_ids, p_ids)`` of integer tensors, ``q_pos_ids`` of shape ``[B]`` and
  ``p_ids`` of shape ``[N]``: passage ``j`` is dropped from query ``i`` when
  ``p_ids[j] == q_pos_ids[i]``. With ``p_ids`` the (hashed) docid of every passage in the gathered
  batch and ``q_pos_ids`` the docid of each query's positive, this is the trainer's rule "a copy of my
  positive that belongs to another query is not my negative", at ``O(B + N)`` memory.

In both encodings the positive itself, ``j == labels[i]``, is never excluded: a row whose every
passage is excluded except its positive has log-sum-exp equal to the positive's score, so its loss
is exactly 0 and its gradient is 0.

>>> import torch
>>> from hopscotch.kernels.exclusion import normalize_exclude
>>> q_doc_hash, p_doc_hash = torch.tensor([11, 12]), torch.tensor([11, 13, 12, 11])
>>> normalize_exclude((q_doc_hash, p_doc_hash), torch.tensor([0, 2]), num_queries=2, num_passages=4).mode
'ids'
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Tuple, Union

import torch

ExcludeArg = Union[None, torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


@dataclass(frozen=True)
class ExcludeSpec:
    """A validated exclusion: ``mode`` is ``'none'``, ``'dense'`` or ``'ids'``.

    ``mask`` is set for ``'dense'`` (``[B, N]`` bool); ``q_pos_ids`` (``[B]`` int64) and ``p_ids``
    (``[N]`` int64) are set for ``'ids'``.
    """

    mode: str
    mask: Optional[torch.Tensor] = None
    q_pos_ids: Optional[torch.Tensor] = None
    p_ids: Optional[torch.Tensor] = None

    def dense_mask(self, labels: torch.Tensor, num_passages: int) -> Optional[torch.Tensor]:
        """Return the ``[B, N]`` bool mask of excluded passages, positives never excluded.

        Returns ``None`` for ``mode == 'none'``. Costs ``B x N`` memory: for the reference only.
        """
        if self.mode == "none":
            return None
        if self.mode == "dense":
            mask = self.mask.clone()
        else:
            mask = self.p_ids.unsqueeze(0) == self.q_pos_ids.unsqueeze(1)
        rows = torch.arange(labels.shape[0], device=labels.device)
        mask[rows, labels] = False
        return mask

    def kernel_args(self, labels: torch.Tensor) -> tuple:
        """The Triton kernels' exclusion arguments ``(q_pos_ids, p_ids, dense mask as uint8, its row stride)``;
        ``labels`` stands in for the tensors this mode does not use (and the stride is 0)."""
        q_pos = self.q_pos_ids if self.mode == "ids" else labels
        p_ids = self.p_ids if self.mode == "ids" else labels
        mask = self.mask.view(torch.uint8) if self.mode == "dense" else labels
        stride_mask = self.mask.stride(0) if self.mode == "dense" else 0
        return q_pos, p_ids, mask, stride_mask


def check_inputs(q: torch.Tensor, p: torch.Tensor, labels: torch.Tensor, temperature) -> float:
    """Check shapes, dtypes and devices of ``q``, ``p``, ``labels`` and return ``temperature`` as float.

    Raises:
        TypeError: a tensor has the wrong dtype.
        ValueError: shapes, devices, label range or temperature are wrong; the message names the
            argument and what was expected.
    """
    if not isinstance(q, torch.Tensor) or q.dim() != 2:
        raise ValueError(f"q: expected a 2-D tensor [B, d], got {_describe(q)}")
    if not isinstance(p, torch.Tensor) or p.dim() != 2:
        raise ValueError(f"p: expected a 2-D tensor [N, d], got {_describe(p)}")
    if q.dtype not in FLOAT_DTYPES or p.dtype not in FLOAT_DTYPES:
        raise TypeError(f"q, p: expected floating tensors, got {q.dtype} and {p.dtype}")
    if q.dtype != p.dtype:
        raise TypeError(f"q, p: expected the same dtype, got {q.dtype} and {p.dtype}")
    if q.shape[1] != p.shape[1]:
        raise ValueError(f"q, p: expected the same embedding size d, got q {tuple(q.shape)} and p {tuple(p.shape)}")
    if q.shape[0] == 0 or p.shape[0] == 0 or q.shape[1] == 0:
        raise ValueError(f"q, p: expected B >= 1, N >= 1, d >= 1, got q {tuple(q.shape)} and p {tuple(p.shape)}")
    if q.device != p.device:
        raise ValueError(f"q, p: expected one device, got {q.device} and {p.device}")
    if not isinstance(labels, torch.Tensor) or labels.dim() != 1 or labels.shape[0] != q.shape[0]:
        raise ValueError(f"labels: expected a 1-D tensor of length B={q.shape[0]}, got {_describe(labels)}")
    if labels.dtype.is_floating_point or labels.dtype == torch.bool or labels.is_complex():
        raise TypeError(f"labels: expected an integer tensor, got {labels.dtype}")
    if labels.device != q.device:
        raise ValueError(f"labels: expected device {q.device}, got {labels.device}")
    bad = (labels < 0) | (labels >= p.shape[0])
    if bool(bad.any()):
        row = int(bad.nonzero()[0, 0])
        raise ValueError(
            f"labels: expected indices in [0, N={p.shape[0]}), got labels[{row}] = {int(labels[row])}"
        )
    if isinstance(temperature, torch.Tensor):
        if temperature.numel() != 1:
            raise ValueError(f"temperature: expected a scalar, got shape {tuple(temperature.shape)}")
        temperature = float(temperature.detach())
    try:
        temperature = float(temperature)
    except (TypeError, ValueError):
        raise TypeError(f"temperature: expected a positive number, got {temperature!r}") from None
    if not math.isfinite(temperature) or temperature <= 0:
        raise ValueError(f"temperature: expected a finite number > 0, got {temperature}")
    return temperature


def normalize_exclude(exclude: ExcludeArg, labels: torch.Tensor, num_queries: int, num_passages: int) -> ExcludeSpec:
    """Validate ``exclude`` (``None``, a ``[B, N]`` bool tensor or ``(q_pos_ids, p_ids)``).

    Args:
        exclude: the exclusion in one of the encodings described in the module docstring.
        labels: ``[B]`` positive indices; gives the device.
        num_queries: ``B``.
        num_passages: ``N``.

    Returns:
        An :class:`ExcludeSpec`; id tensors are converted to contiguous int64.
    """
    device = labels.device
    if exclude is None:
        return ExcludeSpec("none")
    if isinstance(exclude, torch.Tensor):
        if exclude.dtype != torch.bool:
            raise TypeError(
                f"exclude: expected a [B, N] torch.bool mask or a (q_pos_ids, p_ids) tuple, got a {exclude.dtype} tensor"
            )
        if tuple(exclude.shape) != (num_queries, num_passages):
            raise ValueError(
                f"exclude: expected a bool mask of shape [B, N] = [{num_queries}, {num_passages}], "
                f"got {tuple(exclude.shape)}"
            )
        if exclude.device != device:
            raise ValueError(f"exclude: expected device {device}, got {exclude.device}")
        return ExcludeSpec("dense", mask=exclude.contiguous())
    if isinstance(exclude, (tuple, list)) and len(exclude) == 2:
        q_pos_ids, p_ids = exclude
        for name, ids, size in (("q_pos_ids", q_pos_ids, num_queries), ("p_ids", p_ids, num_passages)):
            if not isinstance(ids, torch.Tensor) or ids.dim() != 1 or ids.shape[0] != size:
                raise ValueError(f"exclude[{name}]: expected a 1-D integer tensor of length {size}, got {_describe(ids)}")
            if ids.dtype.is_floating_point or ids.is_complex():
                raise TypeError(f"exclude[{name}]: expected an integer tensor, got {ids.dtype}")
            if ids.device != device:
                raise ValueError(f"exclude[{name}]: expected device {device}, got {ids.device}")
        return ExcludeSpec(
            "ids",
            q_pos_ids=q_pos_ids.to(torch.int64).contiguous(),
            p_ids=p_ids.to(torch.int64).contiguous(),
        )
    raise TypeError(
        "exclude: expected None, a [B, N] torch.bool mask or a (q_pos_ids [B], p_ids [N]) tuple of "
        f"integer tensors, got {_describe(exclude)}"
    )


def _describe(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"a {value.dtype} tensor of shape {tuple(value.shape)}"
    return f"{type(value).__name__}"
