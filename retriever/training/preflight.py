"""What ``train`` checks, clears and records before any model loads: the lengths the base model allows,
whose run the output folder holds, the checkpoint a resume would load, stale temporary files.

An output folder holds one run: ``train_manifest.json`` (:func:`~.fingerprint.run_manifest`: recipe,
input file hashes, base model, code versions, launch), ``checkpoint-<step>/``, ``best/``, ``final/`` and
``train_summary.json``. :func:`preflight` (every process calls it, together):

* a fresh start refuses a folder holding another run's outputs (checkpoints, ``best``, ``final``, the
  summary), so two runs never mix; ``overwrite=True`` deletes those outputs and the old manifest first
  (other files in the folder are left alone);
* ``resume=True`` continues a checkpoint of this run: refused when the folder holds outputs and its manifest
  differs from this run's, naming the fields, or is missing (nothing says the outputs are this run's),
  and when the folder holds outputs but no ``checkpoint-*`` (a finished run, or one saving none:
  ``train.save_every: 0``) or other files and no manifest (not a run folder): nothing to continue. The
  newest checkpoint is verified (:func:`~.checkpoint.verify_checkpoint`: complete, every pickle
  weights-only) and returned. A new or empty folder, or one holding a manifest alone (a run stopped
  before its first checkpoint: nothing to protect), starts the run;
* then the main process removes the ``.*.tmp`` files and folders that killed atomic writes left in the
  folder and its run subfolders, and writes the manifest.

Every refusal is a one-line :class:`UsageError`.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.io.common import write_json
from hopscotch.retriever.io.fingerprint import manifest_differences
from hopscotch.retriever.model.config import CROSS_ENCODER
from hopscotch.retriever.model.loading import resolve_model_path
from hopscotch.retriever.model.position_limit import model_position_limit
from hopscotch.retriever.training import checkpoint as ckpt
from hopscotch.retriever.training.fingerprint import run_manifest
from hopscotch.retriever.training.recipe.sections import Recipe

MANIFEST_FILE = "train_manifest.json"
_OUTPUTS = ("final", "best", "train_summary.json")


def check_model_lengths(recipe, model_path: str | Path) -> None:
    """``model.query_max_len`` and ``model.passage_max_len`` (a cross-encoder: their sum) fit the base model's positions
    (:func:`~hopscotch.retriever.model.position_limit.model_position_limit`) when its config says them."""
    limit = model_position_limit(model_path)
    if limit is None:
        return  # no HF config to go by: transformers reports it when the model loads
    for key in ("query_max_len", "passage_max_len"):
        value = getattr(recipe.model, key)
        if value > limit:
            raise UsageError(f"recipe key model.{key} must be <= {limit} (the position embeddings of "
                             f"{recipe.model.name}), got {value}")
    if getattr(recipe.model, "kind", None) == CROSS_ENCODER:  # one sequence holds both: query side and document
        pair = recipe.model.query_max_len + recipe.model.passage_max_len
        if pair > limit:
            raise UsageError(f"recipe keys model.query_max_len + model.passage_max_len (a {CROSS_ENCODER}'s pair) must "
                             f"be <= {limit} (the position embeddings of {recipe.model.name}), got {pair}")


def run_outputs(output_dir: Path) -> list[Path]:
    """The run outputs ``output_dir`` holds: checkpoint folders, ``best``, ``final``, the summary."""
    if not output_dir.is_dir():
        return []
    found = [p for p in output_dir.iterdir() if ckpt.CHECKPOINT_NAME.match(p.name) or p.name in _OUTPUTS]
    return sorted(found, key=lambda p: p.name)


def stale_temp_files(output_dir: Path) -> list[Path]:
    """``.*.tmp`` entries (killed atomic writes, half-saved checkpoints) of the folder and its run subfolders."""
    folders = [output_dir, *(p for p in run_outputs(output_dir) if p.is_dir())] if output_dir.is_dir() else []
    return [p for folder in folders for p in sorted(folder.iterdir())
            if p.name.startswith(".") and p.name.endswith(".tmp")]


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _read_manifest(path: Path) -> dict | None:
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path}: expected a training manifest JSON object ({exc}); --overwrite starts over") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: expected a training manifest JSON object; --overwrite starts over")
    return data


def _check_folder(output_dir: Path, manifest: dict, resume: bool, overwrite: bool) -> bool:
    """Refuse what the folder holds unless it is this run to resume; True when the old outputs must go."""
    if resume and overwrite:
        raise UsageError("--resume and --overwrite contradict each other: --overwrite deletes the run --resume "
                         "would continue")
    if output_dir.exists() and not output_dir.is_dir():
        raise UsageError(f"--output {output_dir}: expected a folder, got a file")
    outputs = run_outputs(output_dir)
    names = ", ".join(p.name for p in outputs[:4]) + (", ..." if len(outputs) > 4 else "")
    if overwrite:
        return True
    if not resume:
        if outputs:
            raise UsageError(f"--output {output_dir} holds another run ({names}): --resume continues it, "
                             "--overwrite deletes it first, or pick a new folder")
        return False
    old = _read_manifest(output_dir / MANIFEST_FILE)
    if old is None and outputs:
        raise UsageError(f"--resume: {output_dir} holds {names} but no {MANIFEST_FILE} (an older Hopscotch or "
                         "another tool wrote them), so nothing says they are this run's: --overwrite starts over")
    if old is None:  # a new or empty folder starts the run; one holding other files is no run to continue
        others = [p.name for p in (output_dir.iterdir() if output_dir.is_dir() else ()) if not p.name.endswith(".tmp")]
        if others:
            raise UsageError(f"--resume: {output_dir} holds no run to continue (no checkpoint-* and no "
                             f"{MANIFEST_FILE}; it holds {', '.join(sorted(others)[:4])}): drop --resume to start "
                             "a run there")
        return False
    if not outputs:  # this run stopped before its first checkpoint (or another's manifest, nothing to protect)
        return False
    diffs = manifest_differences(old, manifest, defaults={"recipe": dataclasses.asdict(Recipe())})
    if diffs:
        more = f"; and {len(diffs) - 3} more" if len(diffs) > 3 else ""
        raise UsageError(f"--resume: {output_dir} holds a run of another setup ({'; '.join(diffs[:3])}{more}): "
                         "train into a new --output, or pass --overwrite to start over")
    if ckpt.latest_checkpoint(output_dir) is None:
        raise UsageError(f"--resume: {output_dir} holds {names} but no complete checkpoint-* to continue from (the run "
                         "finished, or saved none: train.save_every 0): train into a new --output, or pass "
                         "--overwrite to start over")
    return False


def preflight(recipe, output_dir: Path, resume: bool, overwrite: bool, accelerator, deepspeed: bool) -> Path | None:
    """Check lengths and the run folder, fingerprint the run, clear and record; returns the checkpoint to
    resume from (verified) or None. Every process calls it; only the main process changes the folder."""
    model_path = resolve_model_path(recipe.model.name)
    check_model_lengths(recipe, model_path)
    launch = {"processes": accelerator.num_processes, "device": accelerator.device.type, "deepspeed": deepspeed}
    manifest = run_manifest(recipe, model_path, launch)
    clear = _check_folder(output_dir, manifest, resume, overwrite)
    latest = ckpt.latest_checkpoint(output_dir) if resume else None
    if latest is not None:
        ckpt.verify_checkpoint(latest, accelerator.process_index, deepspeed)
    accelerator.wait_for_everyone()  # every process has checked before the main one changes anything
    if accelerator.is_main_process:
        for path in (run_outputs(output_dir) + [output_dir / MANIFEST_FILE] if clear else []):
            _remove(path)
        for path in stale_temp_files(output_dir):
            _remove(path)
        output_dir.mkdir(parents=True, exist_ok=True)
        write_json(output_dir / MANIFEST_FILE, manifest)
    accelerator.wait_for_everyone()
    return latest
