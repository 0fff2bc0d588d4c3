#!/usr/bin/env python
"""One check of every GPU path of Hopscotch, under 8 minutes on one H200: ``bash scripts/gpu_check.sh OUT.md``.

Sections (each the script ``scripts/gpu_check_<name>.py`` run as its own process, with a hard time
budget; a section that fails or runs out of time records FAIL with a one-line reason and the others
still run; the rows, deadlines and section entry point they share are
:mod:`hopscotch_experiments.benchmarks.gpu_check`):

1. ``kernel`` (180 s) -- fused InfoNCE kernel vs reference: accuracy sweeps (fp32 / bf16 / fp16 x
   exclusion none / ids / dense x backward fused / chunked), ``scripts/bench_kernel.py``'s check and its
   time / memory table against torch ``matmul`` + ``cross_entropy``  (``gpu_check_kernel.py``);
2. ``encode`` (40 s) -- ``encode_corpus`` vs ``SentenceTransformer.encode``, fp16, docs/s  (``gpu_check_encode.py``);
3. ``faiss`` (65 s) -- IVF-PQ on 1M clustered vectors, faiss-gpu vs faiss-cpu: build time, q/s,
   recall@100 vs exact; ``skipped: faiss-gpu not importable`` without faiss-gpu  (``gpu_check_faiss.py``);
4. ``train`` (65 s) -- 30 steps of recipes/minilm_hotpot.yaml, fused vs reference loss: per-step
   losses within 1e-3, samples/s  (``gpu_check_train.py``);
5. ``qwen`` (85 s) -- one LoRA + gradient-checkpointing bf16 step of a random Qwen3-Embedding-4B-sized
   model, query 512 / passage 1024 tokens, group 8: s/step and peak memory, fused vs reference
   (``gpu_check_qwen.py``).

Prints every row as it is measured, then one Markdown table (also written to ``OUT``, with the
detail tables below it) and, as the very last line, one of:

* ``GPU CHECK: PASS`` -- every section that ran passed (a skipped section does not fail it); exit 0;
* ``GPU CHECK: FAIL`` -- some section failed or timed out; exit 1;
* ``GPU CHECK: SKIPPED (dry run)`` -- ``--dry-run``: nothing measured, every section ``skipped: no
  CUDA`` (or ``skipped: dry run`` on a CUDA machine); exit 0;
* ``GPU CHECK: SKIPPED (CPU smoke run: sections PASS|FAIL)`` -- ``--cpu-smoke``: every section on the
  CPU with tiny sizes (Triton's interpreter for the kernels), to catch errors before a GPU session;
  exit 0 or 1; not a measurement.

Without ``--dry-run`` / ``--cpu-smoke`` on a machine without CUDA: a message naming CUDA, exit 2.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hopscotch_experiments.benchmarks.common import md_row
from hopscotch_experiments.benchmarks.gpu_check import one_line, read_records

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = Path(__file__).resolve().parent

#: (name, title, budget in seconds on the GPU): section ``name`` is ``scripts/gpu_check_<name>.py``, whose
#: ``run_<name>(rec, device, deadline, **SIZES[size])`` runs under ``section_main``
SECTIONS = [
    ("kernel", "fused InfoNCE kernel vs reference, bench vs torch", 180),
    ("encode", "CUDA encoding: encode_corpus vs SentenceTransformer.encode", 40),
    ("faiss", "IVF-PQ: faiss-gpu vs faiss-cpu", 65),
    ("train", "MiniLM recipe, 30 steps: fused vs reference loss", 65),
    ("qwen", "Qwen3-Embedding-4B-sized LoRA step: fused vs reference", 85),
]
GRACE_S = 5.0      # a section process is killed this long after its budget
HEADER = ["section", "item", "value", "status"]
_RUNNING: list = []  # the section process now running, for the SIGTERM handler


def _stop(signum, frame) -> None:
    """SIGTERM (the shell wrapper's 8-minute stop): kill the running section's process group too --
    it runs in its own session, so it would outlive this process otherwise."""
    for proc in _RUNNING:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    print(f"gpu_check: stopped by signal {signum}", file=sys.stderr, flush=True)
    os._exit(124)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", nargs="?", default=str(ROOT / "runs" / "gpu_check.md"),
                        help="Markdown file for the table (default runs/gpu_check.md)")
    parser.add_argument("--dry-run", action="store_true", help="measure nothing; every section reports skipped")
    parser.add_argument("--cpu-smoke", action="store_true", help="every section on CPU with tiny sizes")
    parser.add_argument("--sections", nargs="+", choices=[s[0] for s in SECTIONS], help="run only these")
    parser.add_argument("--budget-scale", type=float, help="multiply every budget (default 1; 4 with --cpu-smoke)")
    return parser.parse_args(argv)


def section_script(name: str) -> Path:
    """The script of section ``name``."""
    return SCRIPTS / f"gpu_check_{name}.py"


def section_env(device: str) -> dict:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               WANDB_MODE="disabled")
    env.pop("TRITON_INTERPRET", None)
    if not device.startswith("cuda"):
        env["TRITON_INTERPRET"] = "1"  # the fused loss runs in Triton's interpreter on CPU
    return env


def spawn_section(name: str, budget: float, device: str, size: str, rows: Path) -> tuple[list, list, float]:
    """Run a section in a child process with a hard time limit; its rows (plus a FAIL row when it timed
    out or died), its detail blocks and its seconds."""
    rows.unlink(missing_ok=True)
    cmd = [sys.executable, str(section_script(name)), "--device", device, "--size", size, "--rows", str(rows),
           "--budget-s", str(budget)]
    start = time.time()
    proc = subprocess.Popen(cmd, env=section_env(device), start_new_session=True)
    _RUNNING[:] = [proc]
    try:
        rc, timed_out = proc.wait(timeout=budget + GRACE_S), False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # its whole process group: worker processes too
        rc, timed_out = proc.wait(), True
    _RUNNING.clear()
    records, details = read_records(rows)
    if timed_out:
        records.append({"section": name, "item": "error", "value": f"timed out after {budget:.0f} s (hard budget)",
                        "status": "FAIL"})
    elif rc != 0 and not any(r["status"] == "FAIL" for r in records):
        records.append({"section": name, "item": "error", "value": f"the section process exited with {rc}",
                        "status": "FAIL"})
    return records, details, time.time() - start


def section_status(records: list[dict]) -> str:
    statuses = {r["status"] for r in records}
    if "FAIL" in statuses:
        return "FAIL"
    return "SKIP" if statuses <= {"SKIP"} else "PASS"


def environment_lines(cuda: bool) -> list[str]:
    lines = [f"date: {datetime.datetime.now().isoformat(timespec='seconds')}, host: {platform.node()}"]
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                                check=False)
        lines.append(f"commit: {commit.stdout.strip() or 'unknown'}")
    except OSError:
        pass
    try:
        import torch

        gpu = torch.cuda.get_device_name(0) if cuda else "none"
        lines.append(f"torch {torch.__version__}, CUDA {torch.version.cuda}, GPU: {gpu}")
    except Exception as exc:  # noqa: BLE001 -- a broken torch: the sections will say more
        lines.append(f"torch: {one_line(exc)}")
    return lines


def cuda_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001 -- no usable torch: no CUDA
        return False


def write_report(path: Path, env_lines: list[str], sections: list[tuple], final: str) -> str:
    """The Markdown table (and detail blocks) to ``path``; returns the table."""
    table = [md_row(HEADER), md_row(["---"] * len(HEADER))]
    for name, title, records, _, (seconds, budget), status in sections:
        spent = "not run" if budget is None else f"{seconds:.0f} s (budget {budget:.0f} s)"
        table.append(md_row([name, f"**{title}**", spent, f"**{status}**"]))
        table += [md_row([r["section"], r["item"], r["value"], r["status"]]) for r in records]
    text = ["# GPU check", "", *[f"- {line}" for line in env_lines], "", *table, ""]
    for name, _, _, details, _, _ in sections:
        text += [f"## Details: {name}", "", *[block + "\n" for block in details]] if details else []
    text += [final, ""]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(text), encoding="utf-8")
    return "\n".join(table)


def final_line(args, failed: bool) -> tuple[str, int]:
    """The last line and the exit status (see the module docstring)."""
    if args.dry_run:
        return "GPU CHECK: SKIPPED (dry run)", 0
    if args.cpu_smoke:
        return f"GPU CHECK: SKIPPED (CPU smoke run: sections {'FAIL' if failed else 'PASS'})", int(failed)
    return f"GPU CHECK: {'FAIL' if failed else 'PASS'}", int(failed)


def main(argv=None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _stop)
    cuda = cuda_available()
    if not (cuda or args.dry_run or args.cpu_smoke):
        print("gpu_check: CUDA is not available (torch.cuda.is_available() is False); use --dry-run or "
              "--cpu-smoke on a machine without a GPU", file=sys.stderr)
        print("GPU CHECK: FAIL (no CUDA)")
        return 2
    device, size = ("cpu", "tiny") if args.cpu_smoke else ("cuda", "full")
    scale = args.budget_scale or (4.0 if args.cpu_smoke else 1.0)
    out = Path(args.out)
    env_lines = environment_lines(cuda)
    print("\n".join(env_lines) + "\n\n" + md_row(HEADER) + "\n" + md_row(["---"] * len(HEADER)), flush=True)
    done = []
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as work:
        for name, title, budget in SECTIONS:
            if args.sections and name not in args.sections:
                continue
            if args.dry_run:
                reason = "skipped: " + ("dry run" if cuda else "no CUDA")
                print(md_row([name, "section", reason, "SKIP"]), flush=True)
                done.append((name, title, [{"section": name, "item": "section", "value": reason, "status": "SKIP"}],
                             [], (0.0, None), "SKIP"))
                continue
            records, details, seconds = spawn_section(name, budget * scale, device, size, Path(work) / f"{name}.jsonl")
            done.append((name, title, records, details, (seconds, budget * scale), section_status(records)))
    final, code = final_line(args, any(status == "FAIL" for *_, status in done))
    table = write_report(out, env_lines, done, final)
    for name, _, _, details, _, _ in done:
        print("".join(f"\n{block}\n" for block in details), end="")
    print(f"\n## GPU check summary (written to {out})\n\n{table}\n\n{final}", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
