"""Training a dual encoder from a recipe: ``train(recipe, output_dir, overrides)`` -> ``OUTPUT/final``.

Launch with ``python train.py``, ``accelerate launch train.py`` (DDP, DeepSpeed) or ``hopscotch train``::

    accelerate launch --config_file configs/accelerate/cpu.yaml train.py \\
        --recipe recipes/minilm_hotpot.yaml --output runs/minilm train.lr=3e-5 data.train=tuples.jsonl

Each optimizer step takes ``grad_accum_steps`` global batches; each is split across processes, encoded
(plainly or GradCache-style) and scored against every process's passages. Checkpoints every
``train.save_every`` steps hold everything ``--resume`` needs to continue exactly; a dev set
(``eval.*``) is scored every ``eval.every`` steps and the best model kept in ``OUTPUT/best``.

Before any model loads, the recipe is range-checked and :func:`~.preflight.preflight` fingerprints the
run into ``OUTPUT/train_manifest.json``: a fresh start refuses a folder holding another run (unless
``--overwrite``), ``--resume`` refuses a run of another recipe, data, base model, code or launch, and a
checkpoint is only loaded after every pickle in it has loaded weights-only.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hopscotch.retriever.errors import HopscotchError, UsageError
from hopscotch.retriever.io.common import write_json
from hopscotch.retriever.io.progress import progress
from hopscotch.retriever.io.tuples import read_training_tuples
from hopscotch.retriever.training import checkpoint as ckpt

if TYPE_CHECKING:  # the CLI imports this module for its flags: no torch until a run starts
    from hopscotch.retriever.training.checkpoint import TrainerState
    from hopscotch.retriever.training.recipe.sections import Recipe


def train(recipe: str | os.PathLike | dict | Recipe | None, output_dir: str | os.PathLike,
          overrides: Sequence[str] = (), resume: bool = False, on_step_end: Callable | None = None,
          show_progress: bool = True, overwrite: bool = False) -> str:
    """Train from ``recipe`` (a YAML path, a dict or a :class:`Recipe`) plus ``key=value`` overrides;
    returns ``OUTPUT/final``.

    ``resume=True`` continues from the newest ``OUTPUT/checkpoint-*`` of the same run (same manifest); a new
    or empty folder, or one a run left before its first checkpoint, starts; a folder with outputs but no
    checkpoint is refused (see :mod:`.preflight`). ``overwrite=True`` deletes another run's outputs in
    ``output_dir`` first; without either, such a folder is refused. ``on_step_end(state, loss)`` is called
    after every optimizer step.
    """
    from hopscotch.retriever.training.recipe import load_recipe

    run = _start(load_recipe(recipe, list(overrides)), Path(output_dir), resume, overwrite)
    started = _loop(run, on_step_end, show_progress)
    return _finish(run, started)


@dataclass
class _Run:
    """A run once set up: the recipe, the prepared objects and the trainer state."""

    recipe: Recipe
    output_dir: Path
    accelerator: Any
    model: Any                  # as prepared: DDP / DeepSpeed wrapper, or the model itself
    unwrapped: Any              # the DualEncoder
    optimizer: Any
    scheduler: Any
    loss_fn: Any
    collate: Callable
    plan: Callable[[int], list]  # epoch -> its global batches
    total_steps: int
    global_batch: int           # queries per global batch (all processes)
    loss_scale: float
    deepspeed: bool
    dev: Any                    # DevEvaluator or None
    state: TrainerState


def _start(recipe: Recipe, output_dir: Path, resume: bool, overwrite: bool = False) -> _Run:
    """Accelerator, run folder checks, data plan, model, optimizer, schedule, loss, checkpoint state and
    dev set, in the order that fixes the RNG draws (a resumed run must replay them)."""
    from accelerate.utils import set_seed

    from hopscotch.retriever.training import setup
    from hopscotch.retriever.training.batches import Collator, plan_epoch
    from hopscotch.retriever.training.preflight import preflight

    tr, data = recipe.train, recipe.data
    accelerator, deepspeed = _accelerator(recipe, output_dir)
    latest = preflight(recipe, output_dir, resume, overwrite, accelerator, deepspeed)
    setup.set_threads(tr)
    distill = recipe.loss.distill
    scores_for = None if distill == "none" else f"loss.distill: {distill}"  # a tuple without scores: FILE:LINE error
    # no RNG draws: before the seed, the model
    tuples = read_training_tuples(data.train, corpus=data.corpus, scores_for=scores_for)[:data.max_tuples]
    global_batch, accum = tr.batch_size * accelerator.num_processes, tr.grad_accum_steps

    def plan(epoch: int) -> list:  # a pure function of (seed, epoch): a resumed run replays it
        return plan_epoch(tuples, epoch, tr.seed, data.group_size, global_batch, data.length_grouping,
                          data.query_inputs, data.query_input_weights)

    steps_per_epoch = len(plan(0)) // accum
    if steps_per_epoch == 0:
        raise UsageError(f"data.train: {len(tuples)} tuples make no full step of {global_batch * accum} queries "
                         "(train.batch_size x processes x train.grad_accum_steps)")
    total_steps = tr.max_steps or tr.epochs * steps_per_epoch
    if tr.warmup_steps is not None and tr.warmup_steps > total_steps:
        raise UsageError(f"recipe key train.warmup_steps must be <= the run's {total_steps} steps "
                         f"(train.epochs {tr.epochs} x {steps_per_epoch} steps an epoch), got {tr.warmup_steps}")
    set_seed(tr.seed)
    model = unwrapped = setup.build_model(recipe)
    optimizer = setup.build_optimizer(model, tr)
    scheduler = setup.build_scheduler(optimizer, tr, total_steps)
    model, optimizer = accelerator.prepare(model, optimizer)  # the scheduler is checkpointed by checkpoint.py
    loss_scale = 1.0 if deepspeed else 1.0 / accum  # accelerate divides the loss itself under DeepSpeed
    run = _Run(recipe=recipe, output_dir=output_dir, accelerator=accelerator, model=model, unwrapped=unwrapped,
               optimizer=optimizer, scheduler=scheduler, loss_fn=setup.build_loss(recipe, unwrapped.dim),
               collate=Collator(unwrapped, data.pad_to_multiple_of), plan=plan, total_steps=total_steps,
               global_batch=global_batch, loss_scale=loss_scale, deepspeed=deepspeed, dev=None,
               state=ckpt.TrainerState())
    if latest is not None:
        run.state = ckpt.load_checkpoint(accelerator, latest, scheduler, deepspeed)
        accelerator.print(f"resuming from {latest} (step {run.state.step})")
    run.dev = _dev_evaluator(recipe)
    if tr.report_to == "wandb":
        accelerator.init_trackers("hopscotch", config=asdict(recipe),
                                  init_kwargs={"wandb": {"name": tr.run_name, "dir": str(output_dir)}})
    return run


def _accelerator(recipe: Recipe, output_dir: Path):
    """The ``Accelerator`` and whether it runs DeepSpeed (told the micro-batch size; no GradCache)."""
    from hopscotch.retriever.training import setup

    accelerator = setup.build_accelerator(recipe, output_dir)
    deepspeed = setup.uses_deepspeed()
    if deepspeed and recipe.train.gradcache_chunk_size:
        raise UsageError("train.gradcache_chunk_size: GradCache needs DDP or one process, not DeepSpeed")
    if deepspeed:  # no prepared DataLoader to infer it from
        plugin = accelerator.state.deepspeed_plugin
        plugin.deepspeed_config["train_micro_batch_size_per_gpu"] = recipe.train.batch_size
    return accelerator, deepspeed


def _dev_evaluator(recipe: Recipe):
    """The dev-set scorer when ``eval.queries`` is set, else None."""
    if not recipe.eval.queries:
        return None
    from hopscotch.retriever.training.evaluation import DevEvaluator

    ev = recipe.eval
    return DevEvaluator(ev.queries, ev.corpus, ev.qrels, ev.metric, ev.batch_size, ev.max_queries)


def _loop(run: _Run, on_step_end: Callable | None, show_progress: bool) -> float:
    """Optimizer steps until ``total_steps``, epoch after epoch, from the state's data position;
    returns when the steps started (``time.perf_counter()``)."""
    state, accum = run.state, run.recipe.train.grad_accum_steps
    run.model.train()
    bar = progress(total=run.total_steps, initial=state.step, desc="train", unit="step",
                   show=show_progress and run.accelerator.is_main_process)
    started, start_samples = time.perf_counter(), state.samples
    while state.step < run.total_steps:
        batches = run.plan(state.epoch)
        while state.batch_in_epoch + accum <= len(batches) and state.step < run.total_steps:
            loss = _optimizer_step(run, batches[state.batch_in_epoch:state.batch_in_epoch + accum])
            rate = (state.samples - start_samples) / max(time.perf_counter() - started, 1e-9)
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.4f}", samples_s=f"{rate:.1f}")
            _after_step(run, loss, rate)
            if on_step_end is not None:
                on_step_end(state, loss)
        if state.step < run.total_steps:
            state.epoch, state.batch_in_epoch = state.epoch + 1, 0
    bar.close()
    return started


def _optimizer_step(run: _Run, micro: list) -> float:
    """One optimizer step over ``grad_accum_steps`` global batches; returns their mean loss."""
    accum, state, tr = len(micro), run.state, run.recipe.train
    loss = sum(_micro_step(run, groups, sync=i == accum - 1) for i, groups in enumerate(micro)) / accum
    if tr.max_grad_norm:
        run.accelerator.clip_grad_norm_(run.model.parameters(), tr.max_grad_norm)
    run.optimizer.step()
    run.scheduler.step()
    run.optimizer.zero_grad(set_to_none=True)
    state.step += 1
    state.batch_in_epoch += accum
    state.samples += run.global_batch * accum
    return loss


def _micro_step(run: _Run, groups: list, sync: bool) -> float:
    """Forward and backward of this process's share of one global batch."""
    from hopscotch.retriever.training.batches import local_share
    from hopscotch.retriever.training.step import GradCache, cached_step, full_step

    accelerator, model, tr = run.accelerator, run.model, run.recipe.train
    share = local_share(groups, accelerator.process_index, accelerator.num_processes)
    batch = run.collate(share).to(accelerator.device)
    if tr.gradcache_chunk_size:
        config = run.unwrapped.config
        cache = GradCache(tr.gradcache_chunk_size, config.padding_side, config.learn_temperature,
                          lambda: accelerator.no_sync(model), run.loss_scale)
        return cached_step(model, batch, run.loss_fn, accelerator.backward, run.unwrapped.temperature, cache,
                           sync=sync)
    with accelerator.no_sync(model) if not sync and not run.deepspeed else contextlib.nullcontext():
        return full_step(model, batch, run.loss_fn, accelerator.backward, run.loss_scale, tr.encode_chunk_size)


def _after_step(run: _Run, loss: float, rate: float) -> None:
    """Log, evaluate on the dev set and save a checkpoint when their step comes."""
    state, tr, every = run.state, run.recipe.train, run.recipe.eval.every
    if tr.log_every and state.step % tr.log_every == 0:
        run.accelerator.log({"train/loss": loss, "train/lr": run.scheduler.get_last_lr()[0],
                             "train/samples_per_s": rate, "train/temperature": float(run.unwrapped.temperature)},
                            step=state.step)
    if every and state.step % every == 0:
        _evaluate_and_keep_best(run)
    if tr.save_every and state.step % tr.save_every == 0 and state.step < run.total_steps:
        ckpt.save_checkpoint(run.accelerator, run.output_dir, state, run.scheduler, tr.save_total_limit)


def _evaluate_and_keep_best(run: _Run) -> None:
    """Score the dev set on the main process; save ``OUTPUT/best`` when the metric improves."""
    from hopscotch.retriever.training.setup import full_parameters

    dev, state, accelerator = run.dev, run.state, run.accelerator
    if dev is None:
        return
    with full_parameters(run.unwrapped):
        if accelerator.is_main_process:
            result = dev(run.unwrapped)
            value = result.mean[dev.metric]
            accelerator.log({f"dev/{m}": v for m, v in result.mean.items()}, step=state.step)
            accelerator.print(f"step {state.step}: dev {dev.metric} = {value:.4f}")
            if state.best_metric is None or value > state.best_metric:
                state.best_metric, state.best_step = value, state.step
                run.unwrapped.save(run.output_dir / "best")
        accelerator.wait_for_everyone()
    if accelerator.num_processes > 1:  # every process keeps the same best metric in its trainer state
        from accelerate.utils import broadcast_object_list

        best = broadcast_object_list([(state.best_metric, state.best_step)])[0]
        state.best_metric, state.best_step = best


def _finish(run: _Run, started: float) -> str:
    """A last dev evaluation when due, ``OUTPUT/final`` and ``train_summary.json``; returns the final folder."""
    from hopscotch.retriever.training.recipe.sections import query_input_mixture
    from hopscotch.retriever.training.setup import full_parameters

    state, every, accelerator = run.state, run.recipe.eval.every, run.accelerator
    if run.dev is not None and (not every or state.step % every):
        _evaluate_and_keep_best(run)
    final = run.output_dir / "final"
    alpha = run.recipe.train.wise_ft_alpha
    with full_parameters(run.unwrapped):
        if accelerator.is_main_process:
            if alpha < 1:  # WiSE-FT: mix the trained weights with the starting model's, freshly loaded
                from hopscotch.retriever.model.weight_merge import mix_with_start
                from hopscotch.retriever.training.setup import build_model

                mix_with_start(run.unwrapped, build_model(run.recipe), alpha)
            run.unwrapped.save(final)
            write_json(run.output_dir / "train_summary.json", {
                "steps": state.step, "samples": state.samples, "epochs_started": state.epoch + 1,
                "best_metric": state.best_metric, "best_step": state.best_step,
                "seconds": time.perf_counter() - started, "mixed_precision": accelerator.mixed_precision,
                "query_input": str(run.unwrapped.config.query_input),
                "query_input_mixture": query_input_mixture(run.recipe.data), "wise_ft_alpha": alpha,
                "recipe": asdict(run.recipe)})
        accelerator.wait_for_everyone()
    accelerator.end_training()
    return str(final)


def _given_text(value: str) -> str:
    """``type=`` of a path flag: an empty (or blank) value is refused, never read as the current folder."""
    if not value.strip():
        raise argparse.ArgumentTypeError("expected a value, got an empty string")
    return value


def build_arg_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    # train.py's own parser refuses an empty path here; 'hopscotch train' (a parser given) refuses every empty value
    given = _given_text if parser is None else None
    parser = parser or argparse.ArgumentParser(prog="train.py", description=__doc__.split("\n")[0])
    parser.add_argument("--recipe", required=True, type=given, help="recipe YAML (recipes/*.yaml)")
    parser.add_argument("--output", required=True, type=given, help="run folder; the model lands in OUTPUT/final")
    parser.add_argument("--resume", action="store_true",
                        help="continue from the newest OUTPUT/checkpoint-* (refused when the recipe, data, base "
                             "model, code or launch differ from OUTPUT/train_manifest.json)")
    parser.add_argument("--overwrite", action="store_true",
                        help="delete another run's checkpoints, best, final and summary in OUTPUT first (without "
                             "it, or --resume, a folder holding a run is refused)")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="recipe overrides, e.g. train.lr=3e-5")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``train.py`` entry point; user errors print one line and exit 2."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = build_arg_parser().parse_intermixed_args(argv)  # overrides before, between or after the flags
    try:
        final = train(args.recipe, args.output, args.overrides, resume=args.resume, overwrite=args.overwrite)
        if int(os.environ.get("RANK", "0")) == 0:
            print(final)
    except HopscotchError as exc:
        print(f"train.py: error: {exc}", file=sys.stderr)
        return 2
    return 0
