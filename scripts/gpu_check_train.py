"""GPU check, section 4: MiniLM recipe training with the fused loss against the reference loss.

A small generated world, its BM25 index and its DR-Synth tuples are made with the demo's own stages
(:mod:`hopscotch.retriever.commands.demo_pipeline`); then ``recipes/minilm_hotpot.yaml`` is trained
for ``steps`` steps twice through :func:`hopscotch.retriever.training.trainer.train`, once with
``loss.backend=reference`` and once with ``loss.backend=fused`` (same seed, so the same data order,
initialisation and dropout). The per-step loss comes from the trainer's ``on_step_end(state, loss)``
hook, and so does the time of every step: samples/s counts steps 2..N (step 1 holds the Triton
compilation and autotuning). The section passes when every step's two losses agree within ``tol``.
On CPU (``--cpu-smoke``) training runs on one thread (``threads``: ``train.threads``; default: the recipe's):
at tiny sizes a second thread only waits (on two busy cores both runs took 28 s on two threads, 10 s on one).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from hopscotch_experiments.benchmarks.gpu_check import Deadline, section_main

ROOT = Path(__file__).resolve().parents[1]

SIZES = {
    "full": {"steps": 30, "batch_size": 32, "docs": 2000, "questions": 400, "query_max_len": 128,
             "passage_max_len": 160, "threads": None},
    "tiny": {"steps": 2, "batch_size": 4, "docs": 150, "questions": 20, "query_max_len": 32, "passage_max_len": 32,
             "threads": 1},
}


def make_tuples(work: Path, docs: int, questions: int) -> Path:
    """World -> BM25 index -> DR-Synth tuples, with the demo pipeline's functions."""
    import contextlib
    import io

    from hopscotch.retriever.commands.demo_pipeline import make_world, synthesize_tuples
    from hopscotch.retriever.index.bm25 import BM25Index
    from hopscotch.retriever.io.corpus import read_corpus

    with contextlib.redirect_stdout(io.StringIO()):  # the demo stages narrate; the table is the output here
        world = make_world(work, docs, questions, seed=5)
        BM25Index.build(read_corpus(world / "corpus.jsonl"), show_progress=False).save(work / "bm25")
        return synthesize_tuples(world, work, questions, work / "bm25")


def train_once(tuples: Path, out: Path, backend: str, steps: int, batch_size: int, query_max_len: int,
               passage_max_len: int, threads: int | None = None) -> tuple[list[float], float]:
    """Per-step losses and samples/s (steps 2..N) of one run of the MiniLM recipe."""
    from hopscotch.retriever.training.trainer import train

    losses, stamps = [], []

    def on_step_end(state, loss):
        stamps.append(time.perf_counter())
        losses.append(float(loss))

    overrides = [f"data.train={tuples}", f"loss.backend={backend}", f"train.max_steps={steps}",
                 f"train.batch_size={batch_size}", f"train.encode_chunk_size={batch_size}",
                 f"model.query_max_len={query_max_len}", f"model.passage_max_len={passage_max_len}",
                 "train.save_every=0", "eval.every=0"] + ([f"train.threads={threads}"] if threads else [])
    start = time.perf_counter()
    train(str(ROOT / "recipes" / "minilm_hotpot.yaml"), out, overrides, on_step_end=on_step_end, show_progress=False)
    if len(stamps) > 1:
        rate = batch_size * (len(stamps) - 1) / (stamps[-1] - stamps[0])
    else:
        rate = batch_size * len(stamps) / max(stamps[-1] - start if stamps else 1.0, 1e-9)
    return losses, rate


def run_train(rec, device: str = "cuda", deadline: Deadline | None = None, steps: int = 30, batch_size: int = 32,
              docs: int = 2000, questions: int = 400, query_max_len: int = 128, passage_max_len: int = 160,
              tol: float = 1e-3, threads: int | None = None) -> None:
    """Section 4 (see the module docstring). ``device`` only labels the rows: the trainer itself picks
    CUDA when it is available (the fused backend runs Triton's interpreter on CPU)."""
    deadline = deadline or Deadline()
    with tempfile.TemporaryDirectory(prefix="gpu-check-train-") as tmp:
        work = Path(tmp)
        tuples = make_tuples(work, docs, questions)
        runs = {}
        for backend in ("reference", "fused"):
            if runs and deadline.passed():
                rec.row(f"train {backend}", "skipped: the section's time budget is spent", "FAIL")
                return
            runs[backend] = train_once(tuples, work / backend, backend, steps, batch_size, query_max_len,
                                       passage_max_len, threads)
            losses, rate = runs[backend]
            rec.row(f"train minilm loss.backend={backend} ({steps} steps, batch {batch_size}, {device})",
                    f"{rate:.1f} samples/s (steps 2-{len(losses)}); loss {losses[0]:.4f} -> {losses[-1]:.4f}")
    (ref, ref_rate), (fused, fused_rate) = runs["reference"], runs["fused"]
    diffs = [abs(a - b) for a, b in zip(fused, ref)]
    worst = max(range(len(diffs)), key=diffs.__getitem__) if diffs else 0
    ok = len(fused) == len(ref) == steps and max(diffs, default=float("inf")) <= tol
    rec.row(f"train loss curves fused vs reference (per step, tol {tol:g})",
            f"max abs diff {max(diffs, default=float('nan')):.2e} at step {worst + 1} of {len(diffs)}; "
            f"samples/s fused / reference {fused_rate / ref_rate:.2f}x", "PASS" if ok else "FAIL")


if __name__ == "__main__":
    sys.exit(section_main('train', run_train, SIZES))
