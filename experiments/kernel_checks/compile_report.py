"""Compile the fused InfoNCE kernels ahead of time for a GPU architecture, on any machine.

Triton ships ``ptxas`` and ``cuobjdump``, so the kernels can be compiled to a cubin for, say, an H100
/ H200 (``sm_90``) on a CPU-only host. That catches compile errors in the GPU code path (which the CPU
interpreter does not exercise) and reports, per autotuning config, the registers, spilled bytes
(``STACK``) and shared memory: spills and shared memory over the GPU's limit are what make a config
slow or unusable. No GPU and no CUDA driver needed.

Pointer and size arguments are compiled with the divisibility-by-16 hints Triton gives them at run
time when tensors are aligned and ``B``, ``N``, ``d`` are multiples of 16 (as in training), so the
code is the code that runs.

Usage::

    python -m hopscotch_experiments.kernel_checks.compile_report                  # sm_90, bf16, every autotuning config
    python -m hopscotch_experiments.kernel_checks.compile_report --arch 80 --dtype fp32 --exclude 1
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import Iterator, List, NamedTuple, Optional


class Kernel(NamedTuple):
    """A report row's kernel: its ``@triton.jit`` function, candidate list, whether it takes ``BLOCK_D``,
    and compile-time arguments that pick its variant."""

    name: str
    shapes: str
    with_block_d: bool
    constexprs: Optional[dict] = None


KERNELS = {
    "fwd": Kernel("infonce_fwd_kernel", "_FWD_SHAPES", False),
    "bwd_dq": Kernel("infonce_bwd_kernel", "_BWD_SHAPES", True, {"SIDE": 0}),
    "bwd_dp": Kernel("infonce_bwd_kernel", "_BWD_SHAPES", True, {"SIDE": 1}),
    "grad_tile": Kernel("infonce_grad_tile_kernel", "_FWD_SHAPES", False),
}
_FP32_POINTERS = {"m_ptr", "l_ptr", "pos_ptr", "lse2_ptr", "gpos_ptr", "ws_ptr"}
_ID_POINTERS = {"labels_ptr", "qpos_ptr", "pid_ptr"}
_ALIGNED_INTS = {"B", "N", "D", "stride_q", "stride_p", "stride_mask", "stride_g", "split_size", "col_start"}


@dataclass
class KernelReport:
    """Resources of one compiled kernel: registers per thread, spilled bytes, shared memory bytes."""

    kernel: str
    config: str
    registers: int
    spill_bytes: int
    shared_bytes: int
    seconds: float


def _jit_module():
    """The kernels module defined for the compiler, not the interpreter."""
    if os.environ.get("TRITON_INTERPRET", "0") == "1":
        raise RuntimeError("hopscotch_experiments.kernel_checks.compile_report: unset TRITON_INTERPRET to compile "
                           "for a GPU")
    from hopscotch.kernels.infonce import _kernel_module

    return _kernel_module()


class Tile(NamedTuple):
    """One autotuning config, in the order of the kernels' candidate lists."""

    block_m: int
    block_n: int
    block_k: int
    block_d: int
    num_warps: int
    num_stages: int


def compile_kernel(kind: str, tile: Tile, dtype: str = "bf16", exclude: int = 0, arch: int = 90) -> KernelReport:
    """Compile one kernel for ``sm_{arch}`` and read its resource usage from the cubin.

    Args:
        kind: a key of :data:`KERNELS`.
        tile: the tile sizes and launch options (``block_d`` is ignored by kernels without ``BLOCK_D``).
        dtype: ``"bf16"``, ``"fp16"`` or ``"fp32"`` (fp32 multiplies in IEEE fp32).
        exclude: 0 none, 1 ids, 2 dense mask.
    """
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    name, _, with_block_d, variant = KERNELS[kind]
    fn = getattr(_jit_module(), name)
    signature = _signature(fn.arg_names, dtype, exclude)
    constants = {**(variant or {}), "EXCLUDE": exclude, "PRECISION": "ieee" if dtype == "fp32" else "tf32",
                 "BLOCK_M": tile.block_m, "BLOCK_N": tile.block_n, "BLOCK_K": tile.block_k}
    if with_block_d:
        constants["BLOCK_D"] = tile.block_d
    attrs = {(i,): [["tt.divisibility", 16]] for i, arg in enumerate(fn.arg_names)
             if signature[arg].startswith("*") or arg in _ALIGNED_INTS}
    start = time.perf_counter()
    compiled = triton.compile(ASTSource(fn=fn, signature=signature, constexprs=constants, attrs=attrs),
                              target=GPUTarget("cuda", arch, 32),
                              options={"num_warps": tile.num_warps, "num_stages": tile.num_stages})
    seconds = time.perf_counter() - start
    registers, spill = _resource_usage(compiled.asm["cubin"])
    config = (f"{tile.block_m}x{tile.block_n}x{tile.block_k}" + (f" d{tile.block_d}" if with_block_d else "")
              + f" w{tile.num_warps} s{tile.num_stages}")
    return KernelReport(kind, config, registers, spill, int(compiled.metadata.shared), seconds)


def _signature(arg_names, dtype: str, exclude: int) -> dict:
    """Triton types of a kernel's arguments: inputs in ``dtype``, row statistics in fp32, ids in int64."""
    signature = {}
    for arg in arg_names:
        if arg in ("q_ptr", "p_ptr", "g_ptr"):
            signature[arg] = f"*{dtype}"
        elif arg in _FP32_POINTERS:
            signature[arg] = "*fp32"
        elif arg in _ID_POINTERS:
            signature[arg] = "*i64"
        elif arg == "mask_ptr":
            signature[arg] = "*u8" if exclude == 2 else "*i64"
        elif arg == "scale2":
            signature[arg] = "fp32"
        elif arg.isupper() and arg not in ("B", "N", "D", "SIZE_CLASS"):
            signature[arg] = "constexpr"
        else:
            signature[arg] = "i32"
    return signature


def _resource_usage(cubin: bytes):
    import triton

    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as handle:
        handle.write(cubin)
        handle.flush()
        text = subprocess.run([tool, "--dump-resource-usage", handle.name], capture_output=True, text=True,
                              check=True).stdout
    match = re.search(r"REG:(\d+) STACK:(\d+)", text)
    if not match:
        raise RuntimeError("hopscotch_experiments.kernel_checks.compile_report: no resource usage in cuobjdump "
                           f"output: {text[:200]!r}")
    return int(match.group(1)), int(match.group(2))


def autotune_configs(kind: str) -> List[Tile]:
    """The ``(BLOCK_M, BLOCK_N, BLOCK_K, BLOCK_D, warps, stages)`` candidates the autotuner tries."""
    return [Tile(*shape) for shape in getattr(_jit_module(), KERNELS[kind].shapes)]


def reports(kinds: Optional[List[str]] = None, dtype: str = "bf16", exclude: int = 0,
            arch: int = 90) -> Iterator[KernelReport]:
    """Compile every autotuning config of each kernel in ``kinds`` (default: all four)."""
    for kind in kinds or list(KERNELS):
        for tile in autotune_configs(kind):
            yield compile_kernel(kind, tile, dtype, exclude, arch)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Compile the InfoNCE kernels for a GPU and report resources.")
    parser.add_argument("--arch", type=int, default=90, help="compute capability x 10: 80 A100, 90 H100/H200")
    parser.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32"])
    parser.add_argument("--exclude", type=int, default=0, choices=[0, 1, 2], help="0 none, 1 ids, 2 dense")
    parser.add_argument("--kernels", nargs="+", choices=list(KERNELS), default=None)
    args = parser.parse_args(argv)
    print("| kernel | config (M x N x K, D, warps, stages) | registers | spilled bytes | shared KiB | compile s |")
    print("|---|---|---|---|---|---|")
    for report in reports(args.kernels, args.dtype, args.exclude, args.arch):
        print(f"| {report.kernel} | {report.config} | {report.registers} | {report.spill_bytes} | "
              f"{report.shared_bytes / 1024:.0f} | {report.seconds:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
