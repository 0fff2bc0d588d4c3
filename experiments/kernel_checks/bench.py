"""The fused InfoNCE kernel's check and bench tables (``scripts/bench_kernel.py``, ``scripts/gpu_check.sh``).

1. :func:`run_check` -- :func:`check_cases` (odd shapes with fixed 64 x 64 tiles, bench-sized shapes
   with the autotuned kernels) on fresh random inputs (:func:`hopscotch_experiments.kernel_checks.accuracy.make_case`):
   loss, dQ and dP of :func:`hopscotch.kernels.infonce_loss` graded against the float64 reference by
   :func:`hopscotch_experiments.kernel_checks.accuracy.grade` (1e-5 relative in fp32, 1e-2 in bf16 / fp16; the absolute
   rule where the loss is near zero). One Markdown table; the caller prints ``CHECK: PASS|FAIL``.
2. :func:`run_bench` -- bf16, ``N = group * B``: forward + backward time (:func:`measure`: median of
   ``reps`` runs after ``warmup``, CUDA events on a GPU) and extra memory (``max_memory_allocated``
   after ``reset_peak_memory_stats`` minus what was allocated before: the inputs) of three losses:
   ``torch`` = ``cross_entropy((q @ p.T).float() / t, labels)`` (the peer), ``fused`` and ``chunked``
   (``infonce_loss(backward=...)``); ``OOM`` for a size that runs out of memory, ``skipped`` for the
   sizes left once ``deadline`` (a ``time.perf_counter()``) has passed.

Run it on CPU through Triton's interpreter (``TRITON_INTERPRET=1`` set before the first kernel call).
"""

from __future__ import annotations

import os
import statistics
import time

import torch

from hopscotch.kernels import infonce_loss
from hopscotch_experiments.kernel_checks.accuracy import grade, loss_and_grads, make_case, reference_grads

CHECK_HEADER = ("| B | N | d | dtype | exclude | backward | tiles | t | loss err | dQ err | dP err | result |\n"
                "|---|---|---|---|---|---|---|---|---|---|---|---|")
BENCH_HEADER = ("| d | B | N | torch ms | fused ms | fused / torch | chunked ms | chunked / torch | "
                "torch extra MiB | fused extra MiB | fused / torch | chunked extra MiB | chunked / torch |\n"
                "|---|---|---|---|---|---|---|---|---|---|---|---|---|")


# ----------------------------------------------------------------------------------------- check
def check_cases(dry_run: bool) -> list:
    """The check's cases: ``(B, N, d, dtype, exclusion, backward, temperature, tiles)``."""
    from hopscotch.kernels.infonce import KernelConfig

    f32, bf16, f16 = torch.float32, torch.bfloat16, torch.float16
    # Odd sizes run with fixed 64x64 tiles (one compile per kernel, dtype and exclusion mode); the
    # bench-sized cases run the autotuned kernels, i.e. exactly what the bench and the trainer run.
    fixed = KernelConfig(block_m=64, block_n=64, block_k=64, block_d=64, num_warps=4, num_stages=2)
    cases = [  # (B, N, d, dtype, exclusion, backward, temperature, tiles)
        (1, 1, 16, bf16, "none", "fused", 0.05, fixed),
        (3, 7, 16, f32, "none", "fused", 0.05, fixed),
        (64, 513, 384, f32, "ids", "fused", 0.05, fixed),
        (64, 513, 384, f32, "dense", "chunked", 0.05, fixed),
        (257, 1031, 384, f16, "ids", "fused", 0.05, fixed),
        (300, 2400, 1024, bf16, "ids", "fused", 0.01, fixed),
        (300, 2400, 1024, bf16, "dense", "chunked", 0.01, fixed),
        (96, 800, 384, bf16, "all-but-positive", "fused", 0.01, fixed),
        (1024, 8192, 384, bf16, "ids", "fused", 0.02, None),
        (1024, 8192, 384, bf16, "none", "fused", 0.02, None),
        (1024, 8192, 384, bf16, "none", "chunked", 0.02, None),
    ]
    if dry_run:
        cases = [c for c in cases if c[0] * c[1] <= 64 * 513]
        cases.append((40, 300, 48, bf16, "all-but-positive", "chunked", 0.01, None))
    return cases


def run_check(device, dry_run: bool, only=None, seed: int | None = None) -> bool:
    """Print the check table (fresh seed unless ``seed``); ``only``: indices into :func:`check_cases` to
    run (all when None), so that scripts/gpu_check.sh can run the cases in parallel processes."""
    device = torch.device(device)
    cases = [(i, c) for i, c in enumerate(check_cases(dry_run)) if only is None or i in only]
    seed = int.from_bytes(os.urandom(4), "little") >> 1 if seed is None else seed
    print(f"\n## check (seed {seed})\n")
    print(CHECK_HEADER)
    all_ok = True
    for index, (num_q, num_p, dim, dtype, exclusion, backward, temperature, tiles) in cases:
        case = make_case(seed + index, num_q, num_p, dim, temperature, exclusion)
        try:
            got = loss_and_grads(infonce_loss, case, dtype, device, backward=backward, config=tiles)
            errors = grade(case.describe(), got, reference_grads(case, dtype), dtype)
            finite = all(bool(torch.isfinite(t).all()) for t in got)
            ok = finite and errors.ok
            if exclusion == "all-but-positive":  # loss exactly 0; gradient 0 up to the rounding of
                # the recomputed score (exactly 0 when forward and backward use the same tile width)
                ok = ok and got[0].item() == 0.0 and got[1].abs().max().item() < 1e-5
            cells = [f"{e:.1e}" for e in (errors.loss, errors.dq, errors.dp)]
            verdict = "PASS" if ok else ("FAIL (not finite)" if not finite else "FAIL")
        except Exception as exc:  # noqa: BLE001 -- report and carry on: one broken case must not hide the others
            ok, cells, verdict = False, ["-", "-", "-"], f"FAIL ({type(exc).__name__}: {str(exc)[:80]})"
        all_ok &= ok
        dtype_name = str(dtype).replace("torch.", "")
        tiles_name = f"{tiles.block_m}x{tiles.block_n}" if tiles else ("autotuned" if device.type == "cuda" else "default")
        print(f"| {num_q} | {num_p} | {dim} | {dtype_name} | {exclusion} | {backward} | {tiles_name} | {temperature} | "
              f"{' | '.join(cells)} | {verdict} |", flush=True)
    return all_ok


# ----------------------------------------------------------------------------------------- bench
def peer_loss(q, p, labels, temperature, exclude=None):
    """The peer: ``cross_entropy((q @ p.T).float() / t, labels)`` (no exclusion)."""
    return torch.nn.functional.cross_entropy((q @ p.T).float() / temperature, labels)


def measure(device, fn, reps: int, warmup: int) -> tuple:
    """``(median ms, extra bytes or None on CPU)`` of ``fn`` (a forward + backward)."""
    device = torch.device(device)
    fn()  # first call: compile and autotune, outside every measurement
    extra = None
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        grads = fn()
        torch.cuda.synchronize(device)
        extra = torch.cuda.max_memory_allocated(device) - before
        del grads
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        if device.type == "cuda":
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            fn()
            end.record()
            end.synchronize()
            times.append(begin.elapsed_time(end))
        else:
            begin = time.perf_counter()
            fn()
            times.append((time.perf_counter() - begin) * 1e3)
    return statistics.median(times), extra


def fmt_ms(value) -> str:
    """A :func:`measure` result's milliseconds, or the reason there are none (``OOM``, ``skipped``)."""
    return f"{value[0]:.2f}" if isinstance(value, tuple) else str(value)


def fmt_mib(value) -> str:
    """A :func:`measure` result's extra MiB (``n/a`` on CPU), or the reason there are none."""
    if not isinstance(value, tuple):
        return str(value)
    return "n/a" if value[1] is None else f"{value[1] / 2**20:.0f}"


def fmt_ratio(value, peer, slot: int) -> str:
    """``value / peer`` of slot 0 (time) or 1 (memory) of two :func:`measure` results, ``-`` without both."""
    if not (isinstance(value, tuple) and isinstance(peer, tuple)) or value[slot] is None or not peer[slot]:
        return "-"
    return f"{value[slot] / peer[slot]:.2f}x"


def run_bench(device, sizes, dims, *, group: int = 8, temperature: float = 0.02, reps: int = 25, warmup: int = 5,
              deadline: float = float("inf")) -> None:
    """Print the bench table (module doc); ``deadline`` is a ``time.perf_counter()``."""
    device = torch.device(device)
    methods = [
        ("torch", peer_loss, {}),
        ("fused", infonce_loss, {"backward": "fused"}),
        ("chunked", infonce_loss, {"backward": "chunked"}),
    ]
    print(f"\n## bench (bf16, N = {group} B, t = {temperature}, forward + backward, median of "
          f"{reps} after {warmup} warm-up)\n")
    print(BENCH_HEADER)
    for dim in dims:
        for num_q in sizes:
            num_p = group * num_q
            results = {}
            for name, fn, options in methods:
                if time.perf_counter() > deadline:
                    results[name] = "skipped"
                    continue
                try:
                    gen = torch.Generator(device="cpu").manual_seed(num_q * 7 + dim)
                    q = torch.nn.functional.normalize(torch.randn(num_q, dim, generator=gen), dim=-1)
                    p = torch.nn.functional.normalize(torch.randn(num_p, dim, generator=gen), dim=-1)
                    q = q.to(device, torch.bfloat16).requires_grad_()
                    p = p.to(device, torch.bfloat16).requires_grad_()
                    labels = torch.arange(num_q, device=device) * group

                    def step(fn=fn, options=options, q=q, p=p, labels=labels):
                        loss = fn(q, p, labels, temperature, None, **options)
                        return torch.autograd.grad(loss, (q, p))

                    results[name] = measure(device, step, reps, warmup)
                    del q, p, labels, step
                except torch.cuda.OutOfMemoryError:
                    results[name] = "OOM"
                if device.type == "cuda":
                    torch.cuda.empty_cache()
            print(bench_row(dim, num_q, num_p, results), flush=True)


def bench_row(dim, num_q, num_p, results) -> str:
    """One row of the bench table from ``{"torch" | "fused" | "chunked": measure result or reason}``."""
    torch_result, fused, chunked = results.get("torch"), results.get("fused"), results.get("chunked")
    cells = [str(dim), str(num_q), str(num_p), fmt_ms(torch_result), fmt_ms(fused), fmt_ratio(fused, torch_result, 0),
             fmt_ms(chunked), fmt_ratio(chunked, torch_result, 0), fmt_mib(torch_result), fmt_mib(fused),
             fmt_ratio(fused, torch_result, 1), fmt_mib(chunked), fmt_ratio(chunked, torch_result, 1)]
    return "| " + " | ".join(cells) + " |"
