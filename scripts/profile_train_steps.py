"""Where a recipe's training time goes: a few optimizer steps split into collate (query formatting, the reasoning's
cut, tokenization), forward, backward and optimizer, the padding share of each side, and the forward + backward
compute of the same batches at several ``train.encode_chunk_size`` values.

    .venv/bin/python scripts/profile_train_steps.py --data runs/agent/data [--recipe recipes/minilm_agent.yaml]
        [--per-file 200,20,60,60] [--steps 5] [--chunks 32,8] [--threads 2] [--work /tmp/profile_train]

The tuples are a seeded sample of the recipe's own clean files (``--per-file``: how many of each of the four, in
scripts/train_agent_retriever.sh's order). Compute is process CPU time with ``OMP_WAIT_POLICY=PASSIVE`` (set
before torch loads: waiting threads sleep instead of spinning), so it measures work rather than what other jobs on
a shared machine leave over; wall times are printed beside it. Prints markdown tables (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import os
import random
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from hopscotch_experiments.ablations.st_peer import default_tuples  # noqa: E402
from hopscotch_experiments.benchmarks.common import md_table  # noqa: E402


def sample(files: list[str], counts: list[int], out: Path, seed: int = 0) -> Path:
    """The first ``counts[i]`` lines of each file after a seeded shuffle, as one tuple file."""
    lines = []
    for file, n in zip(files, counts):
        rows = Path(file).read_text(encoding="utf-8").splitlines()
        random.Random(seed).shuffle(rows)
        lines += rows[:n]
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default="runs/agent/data", help="OUT/data of scripts/train_agent_retriever.sh")
    parser.add_argument("--recipe", default="recipes/minilm_agent.yaml")
    parser.add_argument("--per-file", default="200,20,60,60")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--chunks", default="32,8", help="encode_chunk_size values to compare (3 batches each)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--work", default="/tmp/profile_train")
    args = parser.parse_args(argv)
    import torch

    from hopscotch.retriever.training import trainer
    from hopscotch.retriever.training.batches import local_share
    from hopscotch.retriever.training.recipe import load_recipe

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    tuples = sample(default_tuples(args.data), [int(x) for x in args.per_file.split(",")], work / "sample.jsonl")
    recipe = load_recipe(args.recipe, [f"data.train={tuples}", "train.save_every=0", f"train.threads={args.threads}"])
    run = trainer._start(recipe, work / "run", resume=False, overwrite=True)
    torch.set_num_threads(args.threads)
    batches, chunk = run.plan(0), recipe.train.encode_chunk_size
    phases = dict.fromkeys(("collate", "forward", "backward", "optimizer"), 0.0)
    tokens = {"queries": [0, 0], "passages": [0, 0]}
    run.model.train()
    for groups in batches[:args.steps]:
        marks = [time.process_time()]
        batch = run.collate(local_share(groups, 0, 1))
        marks.append(time.process_time())
        q, p, temp = run.model(queries=batch.queries, passages=batch.passages, chunk_size=chunk)
        out = run.loss_fn(q, p, batch.labels, temp, batch.q_pos_ids, batch.p_ids)
        marks.append(time.process_time())
        out.loss.backward()
        marks.append(time.process_time())
        run.optimizer.step()
        run.scheduler.step()
        run.optimizer.zero_grad(set_to_none=True)
        marks.append(time.process_time())
        for name, a, b in zip(phases, marks, marks[1:]):
            phases[name] += b - a
        for side in tokens:
            mask = getattr(batch, side).get("attention_mask") if getattr(batch, side) else None
            if mask is not None:
                tokens[side][0] += int(mask.sum())
                tokens[side][1] += mask.numel()
    total = sum(phases.values())
    print(md_table(["phase", "CPU s", "share"], [[k, round(v, 1), f"{v / total:.1%}"] for k, v in phases.items()]))
    print()
    print(md_table(["side", "real tokens", "padded batch tokens", "padding"],
                   [[s, r, n, f"{1 - r / n:.1%}"] for s, (r, n) in tokens.items() if n]))
    print()
    from hopscotch.retriever.model.dual_encoder import length_chunks

    fixed = [run.collate(local_share(g, 0, 1)) for g in batches[:3]]
    rows = []
    for size in (int(x) for x in args.chunks.split(",")):
        fed = sum(int(f["attention_mask"].sum(1)[r].max()) * len(r) for b in fixed for f in (b.queries, b.passages)
                  if f for r in length_chunks(f["attention_mask"].sum(1), size))
        wall, cpu = time.perf_counter(), time.process_time()
        for b in fixed:
            q, p, temp = run.model(queries=b.queries, passages=b.passages, chunk_size=size)
            run.loss_fn(q, p, b.labels, temp, b.q_pos_ids, b.p_ids).loss.backward()
            run.model.zero_grad(set_to_none=True)
        rows.append([size, fed, round(time.process_time() - cpu, 1), round(time.perf_counter() - wall, 1)])
    print(md_table(["encode_chunk_size", "tokens fed (3 batches)", "forward+backward CPU s", "wall s"], rows))
    print(f"\n{args.threads} threads, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; {tuples}")


if __name__ == "__main__":
    main()
