"""bf16 on CPU: whether this CPU computes bfloat16 natively, and what a requested precision runs as.

``torch.autocast("cpu", dtype=torch.bfloat16)`` runs on any CPU, but only CPUs with bfloat16 instructions
(x86 ``avx512_bf16`` / ``amx_bf16``, Arm ``bf16``) make it faster; elsewhere oneDNN emulates it, slower than
float32 and no more accurate. So a bf16 request on CPU is kept where the CPU has the instructions and falls
back to float32 where it has not, with one warning per setting (never an error: a recipe or command written
on one machine runs on another). The one rule for training (``train.mixed_precision``) and encoding
(``hopscotch index --precision``).

``runnable_precision("bf16", "cpu", "train.mixed_precision")`` is ``"bf16"`` on a CPU with the instructions, else
``"fp32"`` and a warning; ``auto`` is fp16 on CUDA, fp32 on CPU:

>>> runnable_precision("auto", "cpu"), runnable_precision("fp32", "cpu")
('fp32', 'fp32')
"""

from __future__ import annotations

import functools
import sys
import warnings

#: the CPU feature flags (``/proc/cpuinfo``) of native bfloat16 arithmetic: x86 ``flags``, Arm ``Features``
BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})
#: how "float32" is spelled: accelerate's ``no`` (``train.mixed_precision``) and ``fp32`` (``--precision``)
FP32_NAMES = ("no", "fp32")
_warned: set[str] = set()


@functools.lru_cache(maxsize=1)
def cpu_supports_bf16() -> bool:
    """Whether this CPU has native bfloat16 instructions: on Linux the flags of ``/proc/cpuinfo``, elsewhere
    what oneDNN (``torch.ops.mkldnn._is_mkldnn_bf16_supported``) says; False when neither can tell."""
    if sys.platform.startswith("linux"):
        flags = _cpuinfo_flags()
        if flags is not None:
            return bool(flags & BF16_FLAGS)
    return _onednn_bf16()


def _cpuinfo_flags() -> set[str] | None:
    """The feature flags of ``/proc/cpuinfo`` (x86 ``flags``, Arm ``Features`` lines); None when unreadable."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    flags = set()
    for line in lines:
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() in ("flags", "features"):
            flags.update(value.split())
    return flags


def _onednn_bf16() -> bool:
    try:
        import torch

        check = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
        return bool(torch.backends.mkldnn.is_available() and check is not None and check())
    except Exception:  # noqa: BLE001 - an old or stripped torch build: no native bf16 assumed
        return False


def runnable_precision(requested: str, device_type: str = "cpu", setting: str = "precision") -> str:
    """What runs for ``requested`` (``auto``, ``no`` / ``fp32``, ``bf16``, ``fp16``) on ``device_type``:
    ``fp32``, ``bf16`` or ``fp16``.

    ``auto`` is fp16 on CUDA and fp32 elsewhere; ``bf16`` on a CPU without native bfloat16 is fp32, with a
    warning naming ``setting`` (once per setting and process). Other requests run as asked: refusing fp16
    on CPU is the caller's choice (training refuses it, encoding runs it).
    """
    if requested in FP32_NAMES:
        return "fp32"
    if requested == "auto":
        return "fp16" if device_type == "cuda" else "fp32"
    if requested == "bf16" and device_type == "cpu" and not cpu_supports_bf16():
        if setting not in _warned:
            _warned.add(setting)
            warnings.warn(f"{setting}: bf16 asked for, but this CPU has no native bfloat16 instructions "
                          "(avx512_bf16, amx_bf16 or Arm bf16), where bf16 autocast is slower than float32; "
                          "running in float32", RuntimeWarning, stacklevel=2)
        return "fp32"
    return requested
