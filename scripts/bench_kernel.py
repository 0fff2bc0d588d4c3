#!/usr/bin/env python
"""Check the fused InfoNCE kernel against the reference, then time it against torch.

Two phases, one table each:

1. **check** -- fresh random inputs (the seed is printed): loss, dQ and dP of ``hopscotch.kernels.infonce_loss``
   (both backward variants, fp32 / bf16 / fp16, no exclusion / ids / dense mask) against
   ``hopscotch.kernels.reference_infonce_loss`` evaluated in fp32. Tolerances: 1e-5 relative for fp32 inputs,
   1e-2 for bf16 / fp16. Prints ``CHECK: PASS`` or ``CHECK: FAIL``.
2. **bench** -- bf16, ``N = 8 B`` (group size 8), ``B`` in ``--sizes``, ``d`` in ``--dims``: forward +
   backward time (median of ``--reps`` runs after ``--warmup``, CUDA events) and extra memory
   (``max_memory_allocated`` after ``reset_peak_memory_stats`` minus what was allocated before:
   the inputs) of three losses: ``torch`` = ``cross_entropy((q @ p.T).float() / t, labels)`` (the peer),
   ``fused`` and ``chunked`` (``hopscotch.kernels.infonce_loss(backward=...)``). A size that runs out of memory
   prints ``OOM``; sizes left when ``--budget-s`` is spent print ``skipped``.

Usage::

    python scripts/bench_kernel.py --device cuda           # on a CUDA machine: both phases
    python scripts/bench_kernel.py --device cpu --dry-run  # CPU, Triton interpreter, tiny sizes

``bash scripts/gpu_check.sh`` runs both as part of its section 1 (the check's cases in parallel
processes, through ``check_cases`` and ``run_check(only=...)``).

Exit status: 0 when the check passed, 1 when it failed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                        help="cpu runs the Triton interpreter (TRITON_INTERPRET=1): for testing this script")
    parser.add_argument("--dry-run", action="store_true", help="tiny sizes and few repetitions")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 4096, 16384], help="batch sizes B")
    parser.add_argument("--dims", type=int, nargs="+", default=[384, 1024], help="embedding sizes d")
    parser.add_argument("--group", type=int, default=8, help="passages per query: N = group * B")
    parser.add_argument("--temperature", type=float, default=0.02)
    parser.add_argument("--reps", type=int, default=25, help="timed runs per loss (median reported)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed runs before timing")
    parser.add_argument("--budget-s", type=float, default=240.0, help="skip sizes once this much time is spent")
    parser.add_argument("--skip-check", action="store_true")
    parser.add_argument("--skip-bench", action="store_true")
    args = parser.parse_args(argv)
    if args.dry_run:
        args.sizes, args.dims, args.reps, args.warmup = [16, 40], [16, 48], 2, 1
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"  # before kernels defines its Triton kernels
    sys.path.insert(0, str(ROOT))
    import torch
    import triton

    from hopscotch import kernels

    torch.set_num_threads(min(2, torch.get_num_threads()))
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("bench_kernel: --device cuda but torch.cuda.is_available() is False", file=sys.stderr)
        return 2
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU (Triton interpreter)"
    print(f"device: {where} | torch {torch.__version__} | triton {triton.__version__} | kernels from {Path(kernels.__file__).parent}")
    start = time.perf_counter()
    ok = True
    if not args.skip_check:
        ok = run_check(device, dry_run=args.dry_run)
        print(f"CHECK: {'PASS' if ok else 'FAIL'}  ({time.perf_counter() - start:.0f} s)", flush=True)
    if not args.skip_bench:
        run_bench(device, args, deadline=start + args.budget_s)
    print(f"total {time.perf_counter() - start:.0f} s; CHECK: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


# ----------------------------------------------------------------------------------------- check
def _random_case(torch, device, seed, num_q, num_p, dim, dtype, exclusion):
    gen = torch.Generator(device="cpu").manual_seed(seed)
    q = torch.nn.functional.normalize(torch.randn(num_q, dim, generator=gen), dim=-1)
    p = torch.nn.functional.normalize(torch.randn(num_p, dim, generator=gen), dim=-1)
    labels = torch.randint(0, num_p, (num_q,), generator=gen)
    exclude = None
    if exclusion == "ids":
        p_ids = torch.randint(0, max(1, num_p // 3), (num_p,), generator=gen)
        exclude = (p_ids[labels].to(device), p_ids.to(device))
    elif exclusion == "dense":
        exclude = (torch.rand(num_q, num_p, generator=gen) < 0.3).to(device)
    elif exclusion == "all-but-positive":
        exclude = torch.ones(num_q, num_p, dtype=torch.bool, device=device)
    return q.to(device, dtype), p.to(device, dtype), labels.to(device), exclude


def _loss_and_grads(torch, fn, q, p, labels, temperature, exclude, **options):
    q = q.detach().clone().requires_grad_()
    p = p.detach().clone().requires_grad_()
    loss = fn(q, p, labels, temperature, exclude, **options)
    dq, dp = torch.autograd.grad(loss, (q, p))
    return loss.detach(), dq, dp


def _relative_error(a, b) -> float:
    a, b = a.double(), b.double()
    scale = b.norm().item()
    return (a - b).norm().item() / scale if scale > 0 else (a - b).norm().item()


def check_cases(dry_run: bool) -> list:
    """The check's cases: ``(B, N, d, dtype, exclusion, backward, temperature, tiles)``."""
    import torch

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


def run_check(device, dry_run: bool, only=None) -> bool:
    """Print the check table; ``only``: indices into :func:`check_cases` to run (all when None), so
    that scripts/gpu_check.py can run the cases in parallel processes."""
    import torch

    from hopscotch import kernels

    f32 = torch.float32
    cases = [(i, c) for i, c in enumerate(check_cases(dry_run)) if only is None or i in only]
    seed = int.from_bytes(os.urandom(4), "little") >> 1
    print(f"\n## check (seed {seed})\n")
    print("| B | N | d | dtype | exclude | backward | tiles | t | loss err | dQ err | dP err | result |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    all_ok = True
    for index, (num_q, num_p, dim, dtype, exclusion, backward, temperature, tiles) in cases:
        q, p, labels, exclude = _random_case(torch, device, seed + index, num_q, num_p, dim, dtype, exclusion)
        try:
            options = {"backward": backward, "config": tiles}
            fused = _loss_and_grads(torch, kernels.infonce_loss, q, p, labels, temperature, exclude, **options)
            ref = _loss_and_grads(torch, kernels.reference_infonce_loss, q.float(), p.float(), labels, temperature,
                                  exclude)
            errors = [_relative_error(a, b) for a, b in zip(fused, ref)]
            tolerance = 1e-5 if dtype == f32 else 1e-2
            finite = all(bool(torch.isfinite(t).all()) for t in fused)
            ok = finite and max(errors) < tolerance
            if exclusion == "all-but-positive":  # loss exactly 0; gradient 0 up to the rounding of
                # the recomputed score (exactly 0 when forward and backward use the same tile width)
                ok = ok and fused[0].item() == 0.0 and fused[1].abs().max().item() < 1e-5
            cells = [f"{e:.1e}" for e in errors]
            verdict = "PASS" if ok else ("FAIL (not finite)" if not finite else "FAIL")
        except Exception as exc:  # report and carry on: one broken case must not hide the others
            ok, cells, verdict = False, ["-", "-", "-"], f"FAIL ({type(exc).__name__}: {str(exc)[:80]})"
        all_ok &= ok
        dtype_name = str(dtype).replace("torch.", "")
        tiles_name = f"{tiles.block_m}x{tiles.block_n}" if tiles else ("autotuned" if device.type == "cuda" else "default")
        print(f"| {num_q} | {num_p} | {dim} | {dtype_name} | {exclusion} | {backward} | {tiles_name} | {temperature} | "
              f"{' | '.join(cells)} | {verdict} |", flush=True)
    return all_ok


# ----------------------------------------------------------------------------------------- bench
def _peer_loss(q, p, labels, temperature, exclude=None):
    import torch.nn.functional as F

    return F.cross_entropy((q @ p.T).float() / temperature, labels)


def _measure(torch, device, fn, reps: int, warmup: int):
    """Return (median ms, extra bytes or None) of ``fn`` (forward + backward)."""
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


def run_bench(device, args, deadline: float) -> None:
    import torch

    from hopscotch import kernels

    methods = [
        ("torch", _peer_loss, {}),
        ("fused", kernels.infonce_loss, {"backward": "fused"}),
        ("chunked", kernels.infonce_loss, {"backward": "chunked"}),
    ]
    print(f"\n## bench (bf16, N = {args.group} B, t = {args.temperature}, forward + backward, median of "
          f"{args.reps} after {args.warmup} warm-up)\n")
    print("| d | B | N | torch ms | fused ms | fused / torch | chunked ms | chunked / torch | "
          "torch extra MiB | fused extra MiB | fused / torch | chunked extra MiB | chunked / torch |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for dim in args.dims:
        for num_q in args.sizes:
            num_p = args.group * num_q
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
                    labels = torch.arange(num_q, device=device) * args.group

                    def step(fn=fn, options=options, q=q, p=p, labels=labels):
                        loss = fn(q, p, labels, args.temperature, None, **options)
                        return torch.autograd.grad(loss, (q, p))

                    results[name] = _measure(torch, device, step, args.reps, args.warmup)
                    del q, p, labels, step
                except torch.cuda.OutOfMemoryError:
                    results[name] = "OOM"
                if device.type == "cuda":
                    torch.cuda.empty_cache()
            print(_row(dim, num_q, num_p, results), flush=True)


def _row(dim, num_q, num_p, results) -> str:
    def ms(name):
        value = results.get(name)
        return f"{value[0]:.2f}" if isinstance(value, tuple) else str(value)

    def mib(name):
        value = results.get(name)
        if not isinstance(value, tuple):
            return str(value)
        return "n/a" if value[1] is None else f"{value[1] / 2**20:.0f}"

    def ratio(name, slot):
        a, b = results.get(name), results.get("torch")
        if not (isinstance(a, tuple) and isinstance(b, tuple)) or a[slot] is None or not b[slot]:
            return "-"
        return f"{a[slot] / b[slot]:.2f}x"

    cells = [str(dim), str(num_q), str(num_p), ms("torch"), ms("fused"), ratio("fused", 0), ms("chunked"),
             ratio("chunked", 0), mib("torch"), mib("fused"), ratio("fused", 1), mib("chunked"),
             ratio("chunked", 1)]
    return "| " + " | ".join(cells) + " |"


if __name__ == "__main__":
    sys.exit(main())
