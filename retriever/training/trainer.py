"""Training a dual encoder from a recipe: ``train(recipe, output_dir, overrides)`` -> ``OUTPUT/final``.

Launch with ``python train.py``, ``accelerate launch train.py`` (DDP, DeepSpeed) or ``hopscotch train``::

    accelerate launch --config_file configs/accelerate/cpu.yaml train.py \\
        --recipe recipes/minilm_hotpot.yaml --output runs/minilm train.lr=3e-5 data.train=tuples.jsonl

Each optimizer step takes ``grad_accum_steps`` global batches; each is split across processes, encoded
(plainly or GradCache-style) and scored against every process's passages. Checkpoints every
``train.save_every`` steps hold everything ``--resume`` needs to continue exactly; a dev set
(``eval.*``) is scored every ``eval.every`` steps and the best model kept in ``OUTPUT/best``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from pathlib import Path
from typing import Callable, Sequence

from hopscotch.retriever.errors import UsageError


def train(recipe: str | os.PathLike | dict | None, output_dir: str | os.PathLike, overrides: Sequence[str] = (),
          resume: bool = False, on_step_end: Callable | None = None, show_progress: bool = True) -> str:
    """Train from ``recipe`` (a YAML path or dict) plus ``key=value`` overrides; returns ``OUTPUT/final``.

    ``resume=True`` continues from the newest ``OUTPUT/checkpoint-*`` (a fresh start when there is
    none). ``on_step_end(state, loss)`` is called after every optimizer step.
    """
    from accelerate.utils import set_seed
    from tqdm.auto import tqdm

    from hopscotch.retriever.io.tuples import read_training_tuples
    from hopscotch.retriever.training import checkpoint as ckpt
    from hopscotch.retriever.training import setup
    from hopscotch.retriever.training.batches import Collator, local_share, plan_epoch
    from hopscotch.retriever.training.recipe import load_recipe
    from hopscotch.retriever.training.step import cached_step, full_step

    cfg = load_recipe(recipe, list(overrides))
    tr, data = cfg["train"], cfg["data"]
    output_dir = Path(output_dir)
    accelerator = setup.build_accelerator(cfg, output_dir)
    deepspeed = setup.uses_deepspeed()
    if deepspeed and tr["gradcache_chunk_size"]:
        raise UsageError("train.gradcache_chunk_size: GradCache needs DDP or one process, not DeepSpeed")
    loss_scale = 1.0 if deepspeed else 1.0 / tr["grad_accum_steps"]  # accelerate divides under DeepSpeed
    if deepspeed:  # no prepared DataLoader to infer it from
        accelerator.state.deepspeed_plugin.deepspeed_config["train_micro_batch_size_per_gpu"] = tr["batch_size"]
    setup.set_threads(cfg)
    set_seed(tr["seed"])
    model = setup.build_model(cfg)
    unwrapped = model
    tuples = read_training_tuples(data["train"])[:data["max_tuples"]]
    rank, world = accelerator.process_index, accelerator.num_processes
    global_batch, accum = tr["batch_size"] * world, tr["grad_accum_steps"]
    plan = lambda epoch: plan_epoch(tuples, epoch, tr["seed"], data["group_size"], global_batch,  # noqa: E731
                                    data["length_grouping"])
    steps_per_epoch = len(plan(0)) // accum
    if steps_per_epoch == 0:
        raise UsageError(f"data.train: {len(tuples)} tuples make no full step of {global_batch * accum} queries "
                         "(train.batch_size x processes x train.grad_accum_steps)")
    total_steps = tr["max_steps"] or tr["epochs"] * steps_per_epoch
    optimizer = setup.build_optimizer(model, cfg)
    scheduler = setup.build_scheduler(optimizer, cfg, total_steps)
    model, optimizer = accelerator.prepare(model, optimizer)
    accelerator.register_for_checkpointing(scheduler)
    loss_fn = setup.build_loss(cfg)
    collate = Collator(unwrapped, data["pad_to_multiple_of"])
    state = ckpt.TrainerState()
    latest = ckpt.latest_checkpoint(output_dir) if resume else None
    if latest is not None:
        state = ckpt.load_checkpoint(accelerator, latest)
        accelerator.print(f"resuming from {latest} (step {state.step})")
    dev = None
    if cfg["eval"]["queries"]:
        from hopscotch.retriever.training.evaluation import DevEvaluator

        ev = cfg["eval"]
        dev = DevEvaluator(ev["queries"], ev["corpus"], ev["qrels"], ev["metric"], ev["batch_size"], ev["max_queries"])
    if tr["report_to"] == "wandb":
        accelerator.init_trackers("hopscotch", config=cfg, init_kwargs={"wandb": {"name": tr["run_name"],
                                                                                 "dir": str(output_dir)}})

    def evaluate_and_keep_best():
        if dev is None:
            return
        with setup.full_parameters(unwrapped):
            if accelerator.is_main_process:
                result = dev(unwrapped)
                value = result.mean[dev.metric]
                accelerator.log({f"dev/{m}": v for m, v in result.mean.items()}, step=state.step)
                accelerator.print(f"step {state.step}: dev {dev.metric} = {value:.4f}")
                if state.best_metric is None or value > state.best_metric:
                    state.best_metric, state.best_step = value, state.step
                    unwrapped.save(output_dir / "best")
            accelerator.wait_for_everyone()
        if world > 1:  # every process keeps the same best metric in its trainer state
            from accelerate.utils import broadcast_object_list

            best = broadcast_object_list([(state.best_metric, state.best_step)])[0]
            state.best_metric, state.best_step = best

    def one_batch(groups, sync: bool) -> float:
        batch = collate(local_share(groups, rank, world)).to(accelerator.device)
        if tr["gradcache_chunk_size"]:
            return cached_step(model, batch, loss_fn, accelerator.backward, tr["gradcache_chunk_size"],
                               unwrapped.config.padding_side, unwrapped.config.learn_temperature,
                               unwrapped.temperature, sync=sync, no_sync=lambda: accelerator.no_sync(model),
                               loss_scale=loss_scale)
        with accelerator.no_sync(model) if not sync and not deepspeed else contextlib.nullcontext():
            return full_step(model, batch, loss_fn, accelerator.backward, loss_scale, tr["encode_chunk_size"])

    model.train()
    bar = tqdm(total=total_steps, initial=state.step, desc="train", unit="step",
               disable=not (show_progress and accelerator.is_main_process))
    started, start_samples = time.perf_counter(), state.samples
    while state.step < total_steps:
        batches = plan(state.epoch)
        while state.batch_in_epoch + accum <= len(batches) and state.step < total_steps:
            micro = batches[state.batch_in_epoch:state.batch_in_epoch + accum]
            loss = sum(one_batch(g, sync=i == accum - 1) for i, g in enumerate(micro)) / accum
            if tr["max_grad_norm"]:
                accelerator.clip_grad_norm_(model.parameters(), tr["max_grad_norm"])
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            state.step += 1
            state.batch_in_epoch += accum
            state.samples += global_batch * accum
            rate = (state.samples - start_samples) / max(time.perf_counter() - started, 1e-9)
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.4f}", samples_s=f"{rate:.1f}")
            if tr["log_every"] and state.step % tr["log_every"] == 0:
                accelerator.log({"train/loss": loss, "train/lr": scheduler.get_last_lr()[0],
                                 "train/samples_per_s": rate, "train/temperature": float(unwrapped.temperature)},
                                step=state.step)
            if cfg["eval"]["every"] and state.step % cfg["eval"]["every"] == 0:
                evaluate_and_keep_best()
            if tr["save_every"] and state.step % tr["save_every"] == 0 and state.step < total_steps:
                ckpt.save_checkpoint(accelerator, output_dir, state, tr["save_total_limit"])
            if on_step_end is not None:
                on_step_end(state, loss)
        if state.step < total_steps:
            state.epoch, state.batch_in_epoch = state.epoch + 1, 0
    bar.close()
    if dev is not None and (not cfg["eval"]["every"] or state.step % cfg["eval"]["every"]):
        evaluate_and_keep_best()
    final = output_dir / "final"
    with setup.full_parameters(unwrapped):
        if accelerator.is_main_process:
            unwrapped.save(final)
            from hopscotch.retriever.io.common import write_json

            write_json(output_dir / "train_summary.json", {
                "steps": state.step, "samples": state.samples, "epochs_started": state.epoch + 1,
                "best_metric": state.best_metric, "best_step": state.best_step,
                "seconds": time.perf_counter() - started, "recipe": cfg})
        accelerator.wait_for_everyone()
    accelerator.end_training()
    return str(final)


def build_arg_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    parser = parser or argparse.ArgumentParser(prog="train.py", description=__doc__.split("\n")[0])
    parser.add_argument("--recipe", required=True, help="recipe YAML (recipes/*.yaml)")
    parser.add_argument("--output", required=True, help="run folder; the model lands in OUTPUT/final")
    parser.add_argument("--resume", action="store_true", help="continue from the newest OUTPUT/checkpoint-*")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="recipe overrides, e.g. train.lr=3e-5")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``train.py`` entry point; user errors print one line and exit 2."""
    import sys

    from hopscotch.retriever.errors import HopscotchError

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = build_arg_parser().parse_args(argv)
    try:
        final = train(args.recipe, args.output, args.overrides, resume=args.resume)
        if int(os.environ.get("RANK", "0")) == 0:
            print(final)
    except HopscotchError as exc:
        print(f"train.py: error: {exc}", file=sys.stderr)
        return 2
    return 0
