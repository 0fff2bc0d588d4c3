"""GPU check, section 1: the fused InfoNCE kernel against the reference, then its time and memory.

1. accuracy: :func:`hopscotch_experiments.kernel_checks.accuracy.sweep` of ``hopscotch.kernels.infonce_loss``
   against float64, one row per dtype (fp32 / bf16 / fp16) x exclusion kind (none / ids / dense) x backward variant
   (fused / chunked); each row checks the fixed seeds of that kind plus fresh ones. On CUDA the tiles
   are fixed (64 x 64, as the kernel bench's check) so that the many small shapes compile once each; the
   rows run in parallel worker processes because Triton compilation is CPU-bound.
2. the autotuned kernels at the loss shapes of sections 4 and 5 (:data:`TRAINING_SHAPES`), and
   ``scripts/bench_kernel.py``'s check (:func:`hopscotch_experiments.kernel_checks.bench.run_check`: odd shapes
   with fixed tiles, bench-sized shapes with the autotuned kernels, the all-but-positive row), one case per worker,
   at the same time.
3. ``scripts/bench_kernel.py``'s bench table (:func:`hopscotch_experiments.kernel_checks.bench.run_bench`: bf16,
   ``N = 8 B``, d 384 / 1024, B up to 16,384): fused and chunked against torch ``matmul`` + ``cross_entropy``, time and
   extra memory, in this process.
4. MaxSim (late interaction): :mod:`hopscotch_experiments.kernel_checks.maxsim_accuracy` sweeps of
   ``hopscotch.kernels.maxsim_infonce_loss`` against float64 (fp32: fixed and fresh cases, bf16: fixed;
   ragged masks, docid / dense exclusion, gathered passages) in the worker pool with the checks of 1 and
   2 (one worker also compiles the bench shapes into Triton's cache); then, in this process before the
   bench table of 3, the fused MaxSim loss against the reference (which builds the ``[B, N, Lq, Lp]``
   token similarities), forward + backward in bf16 at ``B = 32``, ``Lq`` 32-256, ``N = 2 B``,
   ``Lp = 180``, ``d = 128`` (:data:`MAXSIM_FULL`): median ms, extra memory (peak above the inputs),
   and the agreement of loss and gradients (bf16 bounds, 1e-2). It gets at most
   ``maxsim["budget_s"]`` of the section's time; the bench table gets what is left.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

from hopscotch_experiments.benchmarks.gpu_check import Deadline, section_main

DTYPES = ("fp32", "bf16", "fp16")
KINDS = ("none", "ids", "dense")
BACKWARDS = ("fused", "chunked")

#: (dtype, B, N, d, temperature, what): the loss shapes of sections 4 and 5, checked here with the
#: autotuned kernels and docid exclusion as the trainer calls them; compiling them here (in parallel,
#: into Triton's on-disk cache) also spares those sections the compilation.
TRAINING_SHAPES = (("fp32", 32, 64, 384, 0.05, "MiniLM recipe, section 4"),
                   ("bf16", 4, 32, 2560, 0.01, "Qwen3-Embedding-4B step, section 5"))

#: Part 4 (MaxSim) at the realistic size: B queries of Lq tokens (each length a row), group passages per
#: query (N = group B) of Lp tokens (real lengths Lp/2..Lp), d; accuracy seeds: fp32 on the first
#: ``fp32_fixed`` fixed seeds (None: all) and ``fresh`` fresh ones, bf16 on every fixed seed; reps. The CPU
#: smoke's fp32 takes one fixed case per exclusion kind (seeds 0-2): tests/kernels/test_maxsim_kernel.py
#: checks every fixed seed in fp32.
MAXSIM_FULL = {"batch": 32, "lengths": (32, 64, 128, 256), "group": 2, "passage_len": 180, "dim": 128,
               "temperature": 1.0, "fp32_fixed": None, "fresh": 6, "reps": 10, "warmup": 3, "budget_s": 40}
MAXSIM_TINY = {"batch": 2, "lengths": (4,), "group": 2, "passage_len": 6, "dim": 16, "temperature": 1.0,
               "fp32_fixed": 3, "fresh": 1, "reps": 1, "warmup": 0, "budget_s": 120}

SIZES = {
    "full": {"fresh_per_kind": 12, "fixed_per_kind": None, "workers": 16, "training_shapes": TRAINING_SHAPES,
             "bench_sizes": (1024, 4096, 16384), "bench_dims": (384, 1024), "reps": 25, "warmup": 5,
             "bench_check": True, "maxsim": MAXSIM_FULL},
    "tiny": {"fresh_per_kind": 1, "fixed_per_kind": 1, "workers": 2,
             "training_shapes": (("fp32", 4, 8, 32, 0.05, "tiny"),),
             "bench_sizes": (16,), "bench_dims": (16,), "reps": 1, "warmup": 0, "bench_check": True,
             "maxsim": MAXSIM_TINY},
}


def seeds_by_kind(fresh_per_kind: int, fixed_per_kind: int | None = None) -> dict:
    """``{kind: seeds}``: the fixed seeds of each exclusion kind (the first ``fixed_per_kind``; all when
    None) plus ``fresh_per_kind`` fresh ones."""
    from hopscotch_experiments.kernel_checks.accuracy import FIXED_SEEDS, draw_case, fresh_seeds

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
    from hopscotch_experiments.kernel_checks.accuracy import sweep
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
    from hopscotch_experiments.kernel_checks.accuracy import Case, compare

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


def maxsim_accuracy_task(dtype_name: str, seeds: list, device: str) -> tuple[str, str, str]:
    """Worker: :func:`hopscotch_experiments.kernel_checks.maxsim_accuracy.sweep` of the fused MaxSim loss on ``seeds``
    against float64."""
    import torch

    from hopscotch_experiments.kernel_checks import maxsim_accuracy
    from hopscotch.kernels.maxsim import MaxSimConfig, maxsim_infonce_loss

    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype_name]
    item = f"maxsim accuracy {dtype_name} ({len(seeds)} cases: ragged masks, exclusion, gathered passages)"
    # On CUDA the bench's tiles for every case (partial tiles everywhere): fewer variants to compile.
    options = {"config": MaxSimConfig(block_j=2, block_t=32, block_u=64, block_k=64, block_d=64)} \
        if device.startswith("cuda") else {}
    try:
        report = maxsim_accuracy.sweep(maxsim_infonce_loss, seeds, dtype, device, **options)
    except Exception as exc:  # noqa: BLE001 -- reported as the row's reason
        return item, f"{type(exc).__name__}: {exc}", "FAIL"
    value = "worst rel. error " + ", ".join(f"{k} {v:.1e}" for k, v in report.worst.items())
    if not report.ok:
        value = f"{len(report.failures)} failed, e.g. {report.failures[0].case}; {value}"
    return item, value, "PASS" if report.ok else "FAIL"


def maxsim_case(device: str, batch: int, len_q: int, group: int, passage_len: int, dim: int, dtype_name="bf16"):
    """The bench batch: unit-norm tokens, every query token real (query expansion), passages of
    ``passage_len / 2 .. passage_len`` real tokens, positives first in each group, docid exclusion."""
    import torch

    from hopscotch.kernels.maxsim_reference import group_labels

    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype_name]
    num_p = batch * group
    gen = torch.Generator().manual_seed(batch * 1000 + len_q)
    q = torch.nn.functional.normalize(torch.randn(batch, len_q, dim, generator=gen), dim=-1)
    p = torch.nn.functional.normalize(torch.randn(num_p, passage_len, dim, generator=gen), dim=-1)
    lengths = torch.randint(max(1, passage_len // 2), passage_len + 1, (num_p, 1), generator=gen)
    p_mask = torch.arange(passage_len) < lengths
    q_mask = torch.ones(batch, len_q, dtype=torch.bool)
    labels = group_labels(batch, group)
    p_ids = torch.randint(0, 2**62, (num_p,), generator=gen)
    q, p = q.to(device, dtype), p.to(device, dtype)
    labels, p_ids = labels.to(device), p_ids.to(device)
    return q, p, labels, (p_ids[labels], p_ids), q_mask.to(device), p_mask.to(device)


def maxsim_warm_task(device: str, batch: int, lengths, group: int, passage_len: int, dim: int,
                     temperature: float) -> tuple[str, str, str]:
    """Worker: one fused forward + backward per bench shape (bf16), so that the timing in the main
    process finds the kernels in Triton's on-disk cache."""
    import torch

    from hopscotch.kernels.maxsim import maxsim_infonce_loss

    start = time.perf_counter()
    for len_q in lengths:
        q, p, labels, exclude, q_mask, p_mask = maxsim_case(device, batch, len_q, group, passage_len, dim)
        q.requires_grad_()
        p.requires_grad_()
        loss = maxsim_infonce_loss(q, p, labels, temperature, exclude, q_mask=q_mask, p_mask=p_mask)
        torch.autograd.grad(loss, (q, p))
    return ("maxsim kernels compiled for the bench shapes", f"{time.perf_counter() - start:.1f} s", "INFO")


def bench_check_task(device: str, index: int) -> tuple[bool, str]:
    """Worker: case ``index`` of :func:`hopscotch_experiments.kernel_checks.bench.run_check` (whether it passed, the
    table it printed)."""
    from hopscotch_experiments.kernel_checks.bench import run_check

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        ok = run_check(device, dry_run=not device.startswith("cuda"), only=[index])
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
               training_shapes=(), maxsim: dict | None = None) -> None:
    """Accuracy rows and bench_kernel's check cases, in parallel worker processes (spawned: CUDA-safe):
    Triton compiles one kernel at a time per process, so the compilation spreads over the CPU cores."""
    from hopscotch_experiments.kernel_checks.bench import check_cases

    cases = len(check_cases(dry_run=not device.startswith("cuda"))) if bench_check else 0
    workers = max(1, min(workers, os.cpu_count() or 1))
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn"))
    try:
        shapes = [pool.submit(training_shape_task, *shape, device) for shape in training_shapes]
        checks = [pool.submit(bench_check_task, device, i) for i in range(cases)]
        sweeps = [pool.submit(sweep_task, d, b, seeds, device) for d in DTYPES for b in BACKWARDS]
        maxsim_rows = []
        if maxsim:
            from hopscotch_experiments.kernel_checks.maxsim_accuracy import FIXED_SEEDS, fresh_seeds

            fresh = fresh_seeds(maxsim["fresh"])
            warm = {k: maxsim[k] for k in ("batch", "lengths", "group", "passage_len", "dim", "temperature")}
            maxsim_rows = [pool.submit(maxsim_accuracy_task, "fp32", list(FIXED_SEEDS)[:maxsim["fp32_fixed"]], device),
                           pool.submit(maxsim_accuracy_task, "fp32", fresh, device),
                           pool.submit(maxsim_accuracy_task, "bf16", list(FIXED_SEEDS), device),
                           pool.submit(maxsim_warm_task, device, **warm)]
        for future in sweeps:
            for item, value, status in future.result(timeout=deadline.timeout()):
                rec.row(item, value, status)
        for future in shapes + maxsim_rows:
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


def bench_table_row(rec, line: str) -> None:
    """One summary row per row of bench_kernel's bench table."""
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) != 13 or not cells[0].isdigit():
        return
    d, b, n, t_ms, f_ms, f_x, c_ms, c_x, t_mib, f_mib, f_mx, c_mib, c_mx = cells
    rec.row(f"bench bf16 d={d} B={b} N={n}",
            f"ms torch {t_ms} / fused {f_ms} ({f_x}) / chunked {c_ms} ({c_x}); extra MiB torch {t_mib} / "
            f"fused {f_mib} ({f_mx}) / chunked {c_mib} ({c_mx})", "FAIL" if "OOM" in (f_ms, c_ms) else "INFO")


def run_bench_table(rec, device: str, deadline: Deadline, bench_sizes, bench_dims, reps: int, warmup: int) -> None:
    """The kernel bench's time / memory table (:func:`hopscotch_experiments.kernel_checks.bench.run_bench`, as
    ``scripts/bench_kernel.py`` prints it), its budget what is left of this section's; an OOM of the
    fused or chunked loss fails (torch's own OOM at the largest sizes is expected)."""
    from hopscotch_experiments.kernel_checks import bench

    out = _Lines(lambda line: bench_table_row(rec, line))
    with contextlib.redirect_stdout(out):
        bench.run_bench("cuda" if device.startswith("cuda") else "cpu", bench_sizes, bench_dims, reps=reps,
                        warmup=warmup, deadline=time.perf_counter() + max(0.0, deadline.left() - 5))
    rec.detail("### bench_kernel.py bench\n" + out.getvalue().strip())


def run_maxsim_bench(rec, device: str, deadline: Deadline, batch: int, lengths, group: int, passage_len: int,
                     dim: int, temperature: float, reps: int, warmup: int, budget_s: float, **_) -> None:
    """Part 4's timing: the fused MaxSim loss against the reference, forward + backward in bf16, one row
    per query length; FAIL when the fused loss runs out of memory or disagrees with the reference
    beyond the bf16 bounds (1e-2 relative for the loss and each gradient)."""
    import torch

    from hopscotch_experiments.kernel_checks.bench import measure
    from hopscotch.kernels.maxsim import maxsim_infonce_loss
    from hopscotch.kernels.maxsim_reference import maxsim_infonce_loss as reference

    stop = time.time() + min(budget_s, max(0.0, deadline.left()))
    methods = (("reference", reference), ("fused", maxsim_infonce_loss))
    for len_q in lengths:
        num_p = batch * group
        item = f"maxsim bf16 B={batch} Lq={len_q} N={num_p} Lp={passage_len} d={dim} (fwd+bwd)"
        if time.time() > stop:
            rec.row(item, "skipped: part 4's time budget is spent", "INFO")
            continue
        q, p, labels, exclude, q_mask, p_mask = maxsim_case(device, batch, len_q, group, passage_len, dim)
        q.requires_grad_()
        p.requires_grad_()
        results, outputs = {}, {}
        for name, fn in methods:
            def step(fn=fn):
                loss = fn(q, p, labels, temperature, exclude, q_mask=q_mask, p_mask=p_mask)
                return (loss.detach(), *torch.autograd.grad(loss, (q, p)))

            try:
                outputs[name] = step()
                results[name] = measure(device, step, reps, warmup)
            except torch.cuda.OutOfMemoryError:
                results[name] = "OOM"
            if device.startswith("cuda"):
                torch.cuda.empty_cache()
        rec.row(item, _maxsim_value(results, outputs), "FAIL" if results.get("fused") == "OOM"
                or _maxsim_disagrees(outputs) else "INFO")


def _maxsim_disagrees(outputs: dict) -> bool:
    from hopscotch_experiments.kernel_checks.accuracy import relative_error

    if len(outputs) < 2:
        return False
    return max(relative_error(a, b) for a, b in zip(outputs["fused"], outputs["reference"])) > 1e-2


def _maxsim_value(results: dict, outputs: dict) -> str:
    from hopscotch_experiments.kernel_checks.accuracy import relative_error
    from hopscotch_experiments.kernel_checks.bench import fmt_mib, fmt_ms, fmt_ratio

    ref, fused = results.get("reference"), results.get("fused")
    text = (f"ms reference {fmt_ms(ref)} / fused {fmt_ms(fused)} ({fmt_ratio(fused, ref, 0)}); extra MiB reference "
            f"{fmt_mib(ref)} / fused {fmt_mib(fused)} ({fmt_ratio(fused, ref, 1)})")
    if len(outputs) == 2:
        errors = [relative_error(a, b) for a, b in zip(outputs["fused"], outputs["reference"])]
        text += "; rel. diff loss {:.1e}, dq {:.1e}, dp {:.1e}".format(*errors)
    return text


def run_kernel(rec, device: str = "cuda", deadline: Deadline | None = None, fresh_per_kind: int = 12,
               fixed_per_kind: int | None = None, workers: int = 16, training_shapes=TRAINING_SHAPES,
               bench_sizes=(1024, 4096, 16384), bench_dims=(384, 1024), reps: int = 25, warmup: int = 5,
               bench_check: bool = True, maxsim: dict | None = None) -> None:
    """Section 1 (see the module docstring)."""
    deadline = deadline or Deadline()
    if not device.startswith("cuda"):
        os.environ["TRITON_INTERPRET"] = "1"  # CPU smoke: the kernels in Triton's interpreter
    run_checks(rec, device, deadline, seeds_by_kind(fresh_per_kind, fixed_per_kind), workers, bench_check,
               training_shapes, maxsim)
    if maxsim and not deadline.passed():
        run_maxsim_bench(rec, device, deadline, **maxsim)
    if deadline.passed():
        rec.row("bench", "skipped: the section's time budget was spent by the checks", "INFO")
        return
    run_bench_table(rec, device, deadline, bench_sizes, bench_dims, reps, warmup)


if __name__ == "__main__":
    sys.exit(section_main("kernel", run_kernel, SIZES))
