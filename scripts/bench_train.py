"""Training throughput: Hopscotch's trainer vs sentence-transformers' MultipleNegativesRankingLoss.

    flock /tmp/hopscotch-heavy.lock .venv/bin/python scripts/bench_train.py --json /tmp/bench_train.json

Same model (bundled all-MiniLM-L6-v2), same tuples (DR-Synth, HotpotQA questions 1-380; built as
``scripts/train_quality.py`` builds them, by :mod:`hopscotch_experiments.ablations.train_quality`, unless
``--tuples``), same batches in the same order (Hopscotch's epoch-0 plan; sentence-transformers reads them
sequentially), same group (1 positive + G-1 hard negatives per query: MNRL's ``anchor, positive,
negative_1..`` columns), same max length for queries and passages,
same temperature (MNRL scale 20 = 1/0.05), same optimizer settings, 2 threads.

``hopscotch-unchunked`` is an ablation: one forward per side instead of length-sorted sub-batches
(``train.encode_chunk_size``); ``hopscotch-bf16`` is ``hopscotch`` with ``train.mixed_precision: bf16`` (CPU
bf16 autocast; float32, with a warning, on a CPU without bfloat16 instructions: its ``precision`` says which
ran); ``sentence-transformers-bf16`` is the peer with its Trainer's ``bf16=True`` (the same CPU autocast).
Each system runs in its own fresh process, in rotating order, ``--rounds`` times; a step's time is the
wall time between two consecutive optimizer-step ends (data loading, tokenization, forward, loss, backward,
optimizer); the first ``--warmup`` steps of every process are left out. Reported: the median step time
(wall, and CPU time of the process, which other jobs on a shared machine disturb less), samples/s, the
ratios to sentence-transformers, and each process's whole wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from hopscotch_experiments.benchmarks.common import run_json

SYSTEMS = ["sentence-transformers", "hopscotch", "hopscotch-unchunked", "hopscotch-bf16", "sentence-transformers-bf16"]


def planned_groups(tuples_path: str, batch: int, group: int, steps: int):
    """The groups of the first ``steps`` batches of Hopscotch's epoch-0 plan, in order."""
    from hopscotch.retriever.io.tuples import read_training_tuples
    from hopscotch.retriever.training.batches import plan_epoch

    tuples = read_training_tuples(tuples_path)
    batches = plan_epoch(tuples, 0, 42, group, batch, length_grouping=True)[:steps]
    if len(batches) < steps:
        raise SystemExit(f"{tuples_path}: only {len(batches)} batches of {batch}")
    return [g for b in batches for g in b]


def run_sentence_transformers(args, bf16: bool = False) -> list[float]:
    import torch
    from datasets import Dataset
    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer, losses
    from sentence_transformers.base.sampler import DefaultBatchSampler
    from sentence_transformers.sentence_transformer.training_args import SentenceTransformerTrainingArguments
    from torch.utils.data import SequentialSampler
    from transformers import TrainerCallback

    from hopscotch.retriever.model.loading import bundled_minilm_path
    from hopscotch.retriever.model.query_template import format_document, format_query_truncated

    model = SentenceTransformer(bundled_minilm_path(), device="cpu")
    model.max_seq_length = args.max_len
    groups = planned_groups(args.tuples, args.batch, args.group, args.steps + args.warmup)
    columns = {"anchor": [format_query_truncated(model.tokenizer, args.max_len, g.query, g.reasoning) for g in groups]}
    columns["positive"] = [format_document(g.passages[0].title, g.passages[0].text) for g in groups]
    for k in range(1, args.group):
        columns[f"negative_{k}"] = [format_document(g.passages[k].title, g.passages[k].text) for g in groups]
    times: list[float] = []

    class StepClock(TrainerCallback):
        def on_step_end(self, *a, **kw):
            times.append((time.perf_counter(), time.process_time()))

    def sequential(dataset, **kw):
        return DefaultBatchSampler(SequentialSampler(dataset), batch_size=kw["batch_size"], drop_last=kw["drop_last"])

    with tempfile.TemporaryDirectory() as tmp:
        training_args = SentenceTransformerTrainingArguments(
            output_dir=tmp, per_device_train_batch_size=args.batch, max_steps=args.steps + args.warmup,
            learning_rate=5e-5, warmup_ratio=0.1, weight_decay=0.01, max_grad_norm=1.0, lr_scheduler_type="linear",
            logging_steps=10_000, save_strategy="no", report_to="none", use_cpu=True, seed=42,
            dataloader_drop_last=True, batch_sampler=sequential, disable_tqdm=True, bf16=bf16)
        trainer = SentenceTransformerTrainer(model=model, args=training_args, train_dataset=Dataset.from_dict(columns),
                                             loss=losses.MultipleNegativesRankingLoss(model, scale=20.0),
                                             callbacks=[StepClock()])
        torch.set_num_threads(args.threads)
        trainer.train()
    return times


def run_hopscotch(args, chunk: int | None, mixed_precision: str = "no") -> list[float]:
    from hopscotch.retriever.training.trainer import train

    times: list[float] = []
    recipe = {"model": {"name": "minilm", "pooling": "mean", "query_max_len": args.max_len,
                        "passage_max_len": args.max_len},
              "loss": {"temperature": 0.05},
              "data": {"train": args.tuples, "group_size": args.group, "pad_to_multiple_of": None},
              "train": {"batch_size": args.batch, "max_steps": args.steps + args.warmup, "lr": 5e-5,
                        "warmup_ratio": 0.1, "weight_decay": 0.01, "encode_chunk_size": chunk,
                        "mixed_precision": mixed_precision, "save_every": 0, "threads": args.threads, "seed": 42}}
    with tempfile.TemporaryDirectory() as tmp:
        train(recipe, tmp, on_step_end=lambda state, loss: times.append((time.perf_counter(), time.process_time())),
              show_progress=False)
    return times


def worker(args) -> None:
    import torch

    torch.set_num_threads(args.threads)
    precision = "fp32"
    if args.worker.startswith("sentence-transformers"):  # '-bf16': the Trainer's own bf16 (CPU autocast)
        precision = "bf16" if args.worker.endswith("-bf16") else "fp32"
        times = run_sentence_transformers(args, bf16=precision == "bf16")
    else:  # 'hopscotch-unchunked': one forward per side (ablation); 'hopscotch-bf16': CPU bf16 autocast
        from hopscotch.retriever.model.cpu_precision import runnable_precision

        mixed = "bf16" if args.worker == "hopscotch-bf16" else "no"
        precision = runnable_precision(mixed, "cpu", "train.mixed_precision")
        times = run_hopscotch(args, None if args.worker == "hopscotch-unchunked" else args.chunk or None, mixed)
    skip = args.warmup - 1 if args.warmup else 0
    wall = [b[0] - a[0] for a, b in zip(times, times[1:])][skip:]
    cpu = [b[1] - a[1] for a, b in zip(times, times[1:])][skip:]
    print("BENCH " + json.dumps({"system": args.worker, "step_seconds": wall, "step_cpu_seconds": cpu,
                                 "precision": precision}))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tuples", help="training tuples (default: DR-Synth HotpotQA 1-380, built on demand)")
    parser.add_argument("--work", default="/tmp/hopscotch-quality", help="where scripts/train_quality.py keeps tuples")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--group", type=int, default=4)
    parser.add_argument("--max-len", type=int, default=160)
    parser.add_argument("--chunk", type=int, default=16, help="Hopscotch encode_chunk_size (0: off)")
    parser.add_argument("--steps", type=int, default=5, help="measured steps per process")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated subset of " + ", ".join(SYSTEMS))
    parser.add_argument("--worker", choices=SYSTEMS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    os.environ.update({"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "WANDB_MODE": "disabled",
                       "OMP_NUM_THREADS": str(args.threads)})
    if args.worker:
        worker(args)
        return 0
    if not args.tuples:
        from hopscotch_experiments.ablations.train_quality import build_tuples, split_questions

        args.tuples = str(build_tuples(Path(args.work), split_questions()[0]))
    systems = [s for s in args.systems.split(",") if s]
    results = {s: {"steps": [], "cpu": [], "process_seconds": [], "precision": None} for s in systems}
    for r in range(args.rounds):
        for system in systems[r % len(systems):] + systems[:r % len(systems)]:
            cmd = [sys.executable, __file__, "--worker", system, "--tuples", args.tuples] + [
                f"--{k}={v}" for k, v in (("batch", args.batch), ("group", args.group), ("max-len", args.max_len),
                                          ("chunk", args.chunk), ("steps", args.steps), ("warmup", args.warmup),
                                          ("threads", args.threads))]
            measured, wall = run_json(cmd, prefix="BENCH ", what=system)
            steps = measured["step_seconds"]
            results[system]["steps"].extend(steps)
            results[system]["cpu"].extend(measured["step_cpu_seconds"])
            results[system]["process_seconds"].append(wall)
            results[system]["precision"] = measured.get("precision")
            print(f"round {r + 1} {system}: median step {statistics.median(steps):.2f}s wall, "
                  f"{statistics.median(measured['step_cpu_seconds']):.2f}s CPU; process {wall:.0f}s; "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
    report = {"config": {k: getattr(args, k) for k in ("tuples", "batch", "group", "max_len", "chunk", "steps",
                                                       "warmup", "rounds", "threads")}}
    for system, r in results.items():
        med = statistics.median(r["steps"])
        cpu = statistics.median(r["cpu"])
        report[system] = {"median_step_s": med, "samples_per_s": args.batch / med, "median_step_cpu_s": cpu,
                          "steps_measured": len(r["steps"]), "step_s": r["steps"], "step_cpu_s": r["cpu"],
                          "process_s": r["process_seconds"], "precision": r["precision"]}
    peer = report.get("sentence-transformers", {}).get("median_step_s")
    if peer:
        peer_cpu = report["sentence-transformers"]["median_step_cpu_s"]
        report["speedup_vs_sentence_transformers"] = {s: peer / report[s]["median_step_s"] for s in systems}
        report["cpu_speedup_vs_sentence_transformers"] = {s: peer_cpu / report[s]["median_step_cpu_s"] for s in systems}
    print(json.dumps({k: v for k, v in report.items()}, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
