"""The GPU code path of the fused InfoNCE kernels, checked without a GPU.

Triton compiles the kernels to ``sm_90`` (H100 / H200) cubins on this CPU host with its bundled
``ptxas``; the CPU interpreter used by tests/kernels/test_infonce.py never runs this code path. Every
autotuning config must compile, fit in shared memory and (for bf16, the training dtype) not spill
registers beyond a few bytes; every dtype and exclusion mode must compile.
"""

from __future__ import annotations

import os

import pytest

triton = pytest.importorskip("triton")

H100_SHARED_LIMIT = 227 * 1024  # bytes of shared memory one block may use on sm_90


@pytest.fixture(autouse=True, scope="module")
def _compiler_mode():
    """Define the kernels for the compiler: no TRITON_INTERPRET while this module runs."""
    previous = os.environ.pop("TRITON_INTERPRET", None)
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    yield
    if previous is not None:
        os.environ["TRITON_INTERPRET"] = previous


def _compile_report():
    from hopscotch_experiments.kernel_checks import compile_report

    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")
    if not os.path.exists(tool):
        pytest.skip("this Triton build ships no ptxas")
    return compile_report


@pytest.mark.slow
def test_every_autotuning_config_compiles_for_sm90_without_spilling():
    compile_report = _compile_report()
    reports = list(compile_report.reports(dtype="bf16", exclude=0, arch=90))
    expected = sum(len(compile_report.autotune_configs(kind)) for kind in compile_report.KERNELS)
    assert len(reports) == expected
    for report in reports:
        assert report.shared_bytes <= H100_SHARED_LIMIT, report
        assert report.spill_bytes <= 64, report
        assert 0 < report.registers <= 255, report


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp32"])
@pytest.mark.parametrize("exclude", [0, 1, 2])
def test_each_dtype_and_exclusion_mode_compiles_for_sm90(dtype, exclude):
    compile_report = _compile_report()
    for kind in compile_report.KERNELS:
        block_d = 64 if kind.startswith("bwd") else 0
        tile = compile_report.Tile(64, 64, 64, block_d, num_warps=4, num_stages=2)
        report = compile_report.compile_kernel(kind, tile, dtype=dtype, exclude=exclude)
        assert report.shared_bytes <= H100_SHARED_LIMIT, report


def test_backward_is_one_kernel_and_each_side_is_tuned_on_its_own(monkeypatch):
    """dQ and dP are ``infonce_bwd_kernel`` with ``SIDE`` 0 / 1; ``SIDE`` is in the autotuning key, so the
    autotuner keeps a best config per side (benchmarks faked: side 0 prefers the smallest ``BLOCK_M``,
    side 1 the smallest ``BLOCK_N``)."""
    from types import SimpleNamespace

    from hopscotch_experiments.kernel_checks import compile_report

    kernels = compile_report.KERNELS
    assert kernels["bwd_dq"].name == kernels["bwd_dp"].name == "infonce_bwd_kernel"
    assert (kernels["bwd_dq"].constexprs, kernels["bwd_dp"].constexprs) == ({"SIDE": 0}, {"SIDE": 1})
    module = compile_report._jit_module()
    tuned = module.infonce_bwd_tuned
    launched = []
    monkeypatch.setattr(tuned, "cache", {})
    monkeypatch.setattr(tuned, "fn", SimpleNamespace(run=lambda *args, **kwargs: launched.append(kwargs)))
    monkeypatch.setattr(tuned, "_bench", lambda *args, config, **kwargs: [
        float(config.kwargs["BLOCK_M" if kwargs["SIDE"] == 0 else "BLOCK_N"]), 0.0, 0.0])
    pointers = (SimpleNamespace(dtype="float32"),) * 9
    sizes = (64, 128, 64, 64, 64, 0, 1.0, 256, 10)  # B, N, D, strides, scale2, split_size, SIZE_CLASS
    for side in (0, 1, 0):
        tuned.run(*pointers, *sizes, grid=(1,), EXCLUDE=0, PRECISION="tf32", SIDE=side)
    assert len(tuned.cache) == 2
    shapes = module._BWD_SHAPES
    best_m = min(shapes, key=lambda shape: shape[0])
    best_n = min(shapes, key=lambda shape: shape[1])
    assert best_m[:2] != best_n[:2]
    expected = [(0, *best_m[:2]), (1, *best_n[:2]), (0, *best_m[:2])]
    assert [(kwargs["SIDE"], kwargs["BLOCK_M"], kwargs["BLOCK_N"]) for kwargs in launched] == expected
