"""GPU check, section 1: the fused InfoNCE kernel against the reference, then its time and memory.

1. accuracy: :func:`hopscotch.kernels.accuracy.sweep` of ``hopscotch.kernels.infonce_loss`` against float64,
   one row per dtype (fp32 / bf16 / fp16) x exclusion kind (none / ids / dense) x backward variant
   (fused / chunked); each row checks the fixed seeds of that kind plus fresh ones. On CUDA the tiles
   are fixed (64 x 64, as bench_kernel's check) so that the many small shapes compile once each; the
   rows run in parallel worker processes because Triton compilation is CPU-bound.
2. the autotuned kernels at the loss shapes of sections 4 and 5 (:data:`TRAINING_SHAPES`), and
   ``scripts/bench_kernel.py``'s check (odd shapes with fixed tiles, bench-sized shapes with the
   autotuned kernels, the all-but-positive row), one case per worker, at the same time.
3. ``scripts/bench_kernel.py``'s bench table (bf16, ``N = 8 B``, d 384 / 1024, B up to 16,384): fused and
   chunked against torch ``matmul`` + ``cross_entropy``, time and extra memory, in this process.
"""

from __future__ import annotations

import contextlib
import io
import os
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

from gpu_check_common import Deadline, ensure_paths

DTYPES = ("fp32", "bf16", "fp16")
KINDS = ("none", "ids", "dense")
BACKWARDS = ("fused", "chunked")

#: (dtype, B, N, d, temperature, what): the loss shapes of sections 4 and 5, checked here with the
#: autotuned kernels and docid exclusion as the trainer calls them; compiling them here (in parallel,
#: into Triton's on-disk cache) also spares those sections the compilation.
TRAINING_SHAPES = (("fp32", 32, 64, 384, 0.05, "MiniLM recipe, section 4"),
                   ("bf16", 4, 32, 2560, 0.01, "Qwen3-Embedding-4B step, section 5"))

SIZES = {
    "full": {"fresh_per_kind": 12, "fixed_per_kind": None, "workers": 16, "training_shapes": TRAINING_SHAPES,
             "bench_sizes": (1024, 4096, 16384), "bench_dims": (384, 1024), "reps": 25, "warmup": 5,
             "bench_check": True},
    "tiny": {"fresh_per_kind": 1, "fixed_per_kind": 1, "workers": 2,
             "training_shapes": (("fp32", 4, 8, 32, 0.05, "tiny"),),
             "bench_sizes": (16,), "bench_dims": (16,), "reps": 1, "warmup": 0, "bench_check": True},
}


def seeds_by_kind(fresh_per_kind: int, fixed_per_kind: int | None = None) -> dict:
    """``{kind: seeds}``: the fixed seeds of each exclusion kind (the first ``fixed_per_kind``; all when
    None) plus ``fresh_per_kind`` fresh ones."""
    from hopscotch.kernels.accuracy import FIXED_SEEDS, draw_case, fresh_seeds

    def kind_of(seed: int) -> str:
        return draw_case(seed).kind.split()[0].split("=")[1]

    out = {kind: [s for s in FIXED_SEEDS if kind_of(s) == kind][:fixed_per_kind] for kind in KINDS}
    fresh = {kind: 0 for kind in KINDS}
    while min(fresh.values()) < fresh_per_kind:
        for seed in fresh_seeds(16):
            kind = kind_of(seed)
            if fresh[kind] < fresh_per_kind:
                out[kind].append(seed)
                fresh[kind] += 1
    return out


def sweep_task(dtype_name: str, backward: str, seeds: dict, device: str) -> list[tuple[str, str, str]]:
    """Worker: one row ``(item, value, status)`` per exclusion kind for one dtype and backward variant."""
    import torch

    from hopscotch.kernels import infonce_loss
    from hopscotch.kernels.accuracy import sweep
    from hopscotch.kernels.infonce import KernelConfig

    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype_name]
    tiles = None
    if device.startswith("cuda"):
        tiles = KernelConfig(block_m=64, block_n=64, block_k=64, block_d=64, num_warps=4, num_stages=2)
    rows = []
    for kind in KINDS:
        item = f"accuracy {dtype_name} exclude={kind} backward={backward} ({len(seeds[kind])} cases)"
        try:
            report = sweep(infonce_loss, seeds[kind], dtype, device, backward=backward, config=tiles)
        except Exception as exc:  # noqa: BLE001 -- one broken variant must not hide the others
            rows.append((item, f"{type(exc).__name__}: {exc}", "FAIL"))
            continue
        worst = ", ".join(f"{k} {v:.1e}" for k, v in report.worst.items())
        value = f"worst rel. error {worst}"
        if not report.ok:
            first = report.failures[0]
            value = f"{len(report.failures)} failed, e.g. {first.case}; {value}"
        rows.append((item, value, "PASS" if report.ok else "FAIL"))
    return rows


def training_shape_task(dtype_name: str, num_q: int, num_p: int, dim: int, temperature: float, what: str,
                        device: str) -> tuple[str, str, str]:
    """Worker: the autotuned fused loss (backward fused, docid exclusion) at a trainer's shape vs float64."""
    import torch

    from hopscotch.kernels import infonce_loss
    from hopscotch.kernels.accuracy import Case, compare

    gen = torch.Generator().manual_seed(num_q * 1000 + dim)
    q = torch.nn.functional.normalize(torch.randn(num_q, dim, generator=gen), dim=-1)
    p = torch.nn.functional.normalize(torch.randn(num_p, dim, generator=gen), dim=-1)
    labels = torch.arange(num_q) * (num_p // num_q)
    p_ids = torch.randint(0, 2**62, (num_p,), generator=gen)
    p_ids[1::7] = p_ids[0]  # a few duplicates of a positive among the passages
    case = Case(0, q, p, labels, temperature, (p_ids[labels], p_ids), "exclude=ids")
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype_name]
    item = f"autotuned {dtype_name} B={num_q} N={num_p} d={dim} exclude=ids ({what})"
    try:
        errors = compare(infonce_loss, case, dtype, device, backward="fused")
    except Exception as exc:  # noqa: BLE001 -- reported as the row's reason
        return item, f"{type(exc).__name__}: {exc}", "FAIL"
    return item, f"rel. error loss {errors.loss:.1e}, dq {errors.dq:.1e}, dp {errors.dp:.1e}", \
        "PASS" if errors.ok else "FAIL"


def bench_check_task(device: str, index: int) -> tuple[bool, str]:
    """Worker: case ``index`` of ``bench_kernel.run_check`` (whether it passed, the table it printed)."""
    ensure_paths()
    import bench_kernel
    import torch

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        ok = bench_kernel.run_check(torch.device(device), dry_run=not device.startswith("cuda"), only=[index])
    return ok, out.getvalue()


def _last_cell(line: str) -> str:
    return line.strip().strip("|").split("|")[-1].strip() if line.startswith("|") else ""


def check_rows(results: list[tuple[bool, str]]) -> tuple[bool, list[str], list[str]]:
    """All the check tasks' table rows under one header, and each task's random seed."""
    header, rows, seeds = [], [], []
    for _, table in results:
        lines = [line for line in table.splitlines() if line.startswith("|")]
        header = header or lines[:2]
        rows += [line for line in lines[2:] if _last_cell(line)]
        seeds += [line.split("seed")[-1].strip(" )") for line in table.splitlines() if line.startswith("## check")]
    return all(ok for ok, _ in results), header + rows, seeds


def run_checks(rec, device: str, deadline: Deadline, seeds: dict, workers: int, bench_check: bool,
               training_shapes=()) -> None:
    """Accuracy rows and bench_kernel's check cases, in parallel worker processes (spawned: CUDA-safe):
    Triton compiles one kernel at a time per process, so the compilation spreads over the CPU cores."""
    ensure_paths()
    import bench_kernel

    cases = len(bench_kernel.check_cases(dry_run=not device.startswith("cuda"))) if bench_check else 0
    workers = max(1, min(workers, os.cpu_count() or 1))
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn"))
    try:
        shapes = [pool.submit(training_shape_task, *shape, device) for shape in training_shapes]
        checks = [pool.submit(bench_check_task, device, i) for i in range(cases)]
        sweeps = [pool.submit(sweep_task, d, b, seeds, device) for d in DTYPES for b in BACKWARDS]
        for future in sweeps:
            for item, value, status in future.result(timeout=deadline.timeout()):
                rec.row(item, value, status)
        for future in shapes:
            rec.row(*future.result(timeout=deadline.timeout()))
        if checks:
            ok, lines, case_seeds = check_rows([future.result(timeout=deadline.timeout()) for future in checks])
            rec.detail(f"### bench_kernel.py check (seeds {', '.join(case_seeds)}, one per row)\n\n" + "\n".join(lines))
            failed = [line for line in lines[2:] if _last_cell(line).startswith("FAIL")]
            value = f"{len(lines) - 2 - len(failed)} of {len(lines) - 2} cases pass" + (f"; {failed[0]}" if failed
                                                                                        else "")
            rec.row("bench_kernel.py check (odd and bench-sized shapes, autotuned tiles)", value,
                    "PASS" if ok else "FAIL")
    finally:  # after a timeout: do not wait for hung workers
        pool.shutdown(wait=False, cancel_futures=True)
        for process in list((getattr(pool, "_processes", None) or {}).values()):
            if process.is_alive():
                process.terminate()


class _Lines(io.StringIO):
    """A stdout that also hands every finished line to ``on_line`` (rows survive a later hard kill)."""

    def __init__(self, on_line):
        super().__init__()
        self.on_line, self.pending = on_line, ""

    def write(self, text: str) -> int:
        self.pending += text
        *lines, self.pending = self.pending.split("\n")
        for line in lines:
            self.on_line(line)
        return super().write(text)


def bench_row(rec, line: str) -> None:
    """One summary row per row of bench_kernel's bench table."""
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) != 13 or not cells[0].isdigit():
        return
    d, b, n, t_ms, f_ms, f_x, c_ms, c_x, t_mib, f_mib, f_mx, c_mib, c_mx = cells
    rec.row(f"bench bf16 d={d} B={b} N={n}",
            f"ms torch {t_ms} / fused {f_ms} ({f_x}) / chunked {c_ms} ({c_x}); extra MiB torch {t_mib} / "
            f"fused {f_mib} ({f_mx}) / chunked {c_mib} ({c_mx})", "FAIL" if "OOM" in (f_ms, c_ms) else "INFO")


def run_bench(rec, device: str, deadline: Deadline, bench_sizes, bench_dims, reps: int, warmup: int) -> None:
    """bench_kernel's time / memory table, its budget what is left of this section's; an OOM of the
    fused or chunked loss fails (torch's own OOM at the largest sizes is expected)."""
    ensure_paths()
    import bench_kernel
    import torch

    argv = ["--device", "cuda" if device.startswith("cuda") else "cpu", "--sizes", *map(str, bench_sizes),
            "--dims", *map(str, bench_dims), "--reps", str(reps), "--warmup", str(warmup)]
    args = bench_kernel.parse_args(argv)
    out = _Lines(lambda line: bench_row(rec, line))
    with contextlib.redirect_stdout(out):
        bench_kernel.run_bench(torch.device(device), args, deadline=time.perf_counter() + max(0.0, deadline.left() - 5))
    rec.detail("### bench_kernel.py bench\n" + out.getvalue().strip())


def run_kernel(rec, device: str = "cuda", deadline: Deadline | None = None, fresh_per_kind: int = 12,
               fixed_per_kind: int | None = None, workers: int = 16, training_shapes=TRAINING_SHAPES,
               bench_sizes=(1024, 4096, 16384), bench_dims=(384, 1024), reps: int = 25, warmup: int = 5,
               bench_check: bool = True) -> None:
    """Section 1 (see the module docstring)."""
    deadline = deadline or Deadline()
    if not device.startswith("cuda"):
        os.environ["TRITON_INTERPRET"] = "1"  # CPU smoke: the kernels in Triton's interpreter
    run_checks(rec, device, deadline, seeds_by_kind(fresh_per_kind, fixed_per_kind), workers, bench_check,
               training_shapes)
    if deadline.passed():
        rec.row("bench", "skipped: the section's time budget was spent by the checks", "INFO")
        return
    run_bench(rec, device, deadline, bench_sizes, bench_dims, reps, warmup)
