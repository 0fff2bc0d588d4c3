#!/usr/bin/env python
"""Check the fused InfoNCE kernel against the reference, then time it against torch.

Two phases, one table each:

1. **check** -- fresh random inputs (the seed is printed): loss, dQ and dP of ``hopscotch.kernels.infonce_loss``
   (both backward variants, fp32 / bf16 / fp16, no exclusion / ids / dense mask) against
   ``hopscotch.kernels.reference_infonce_loss`` evaluated in float64 on the same rounded inputs. Tolerances:
   1e-5 relative for fp32 inputs, 1e-2 for bf16 / fp16 (an absolute bound where the loss is near zero:
   :mod:`hopscotch_experiments.kernel_checks.accuracy`). Prints ``CHECK: PASS`` or ``CHECK: FAIL``.
2. **bench** -- bf16, ``N = 8 B`` (group size 8), ``B`` in ``--sizes``, ``d`` in ``--dims``: forward +
   backward time (median of ``--reps`` runs after ``--warmup``, CUDA events) and extra memory
   (``max_memory_allocated`` after ``reset_peak_memory_stats`` minus what was allocated before:
   the inputs) of three losses: ``torch`` = ``cross_entropy((q @ p.T).float() / t, labels)`` (the peer),
   ``fused`` and ``chunked`` (``hopscotch.kernels.infonce_loss(backward=...)``). A size that runs out of memory
   prints ``OOM``; sizes left when ``--budget-s`` is spent print ``skipped``.

Usage::

    python scripts/bench_kernel.py --device cuda           # on a CUDA machine: both phases
    python scripts/bench_kernel.py --device cpu --dry-run  # CPU, Triton interpreter, tiny sizes

The check and the bench are :mod:`hopscotch_experiments.kernel_checks.bench` (the check grades by
:mod:`hopscotch_experiments.kernel_checks.accuracy`, against the float64 reference);
``bash scripts/gpu_check.sh`` runs both as part of its section 1 (the check's cases in parallel processes, through ``check_cases`` and
``run_check(only=...)``).

Exit status: 0 when the check passed, 1 when it failed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path


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
    import torch
    import triton

    from hopscotch import kernels
    from hopscotch_experiments.kernel_checks.bench import run_bench, run_check

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
        run_bench(device, args.sizes, args.dims, group=args.group, temperature=args.temperature, reps=args.reps,
                  warmup=args.warmup, deadline=start + args.budget_s)
    print(f"total {time.perf_counter() - start:.0f} s; CHECK: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
