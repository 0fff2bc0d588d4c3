"""Checkpoints that resume exactly: model, optimizer, scheduler, RNG states and the data position.

``OUTPUT/checkpoint-<step>/`` holds accelerate's ``save_state`` (weights as safetensors, optimizer,
every process's RNG states), ``scheduler.pt`` (the learning-rate schedule's state) and
``trainer_state.json`` (step, epoch, batch within the epoch, samples seen, best dev metric). It is
written to ``.checkpoint-<step>.tmp`` and renamed when complete, so a job killed while saving leaves the
previous checkpoint as the latest.

Loading trusts no pickle: :func:`verify_checkpoint` opens every pickle file of the checkpoint
(``*.bin``, ``*.pkl``, ``*.pt``, ``*.pth``, accelerate's ``custom_checkpoint_*.pkl`` included) with
``torch.load(weights_only=True)`` (tensors, numbers, strings and containers, plus the numpy types of the
RNG states: :func:`safe_globals`) before anything is restored, so a crafted file stops the resume with a
one-line :class:`UsageError` instead of running its code; a ``custom_checkpoint_*.pkl`` that passes is
refused all the same (Hopscotch registers no accelerate custom objects). DeepSpeed's own engine files (``pytorch_model/``)
are read by DeepSpeed; they are trusted only as the run's own output (see ``docs/training.md``).
"""

from __future__ import annotations

import codecs
import contextlib
import inspect
import pickle
import re
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.io.common import read_json, write_json
from hopscotch.retriever.io.validate import count, finite_number

try:
    from numpy._core.multiarray import _reconstruct
except ImportError:  # numpy < 2
    from numpy.core.multiarray import _reconstruct

STATE_FILE = "trainer_state.json"
SCHEDULER_FILE = "scheduler.pt"
PICKLE_SUFFIXES = (".bin", ".pkl", ".pt", ".pth")
CHECKPOINT_NAME = re.compile(r"^checkpoint-(\d+)$")


@dataclass
class TrainerState:
    step: int = 0              # optimizer steps done
    epoch: int = 0
    batch_in_epoch: int = 0    # global batches of the epoch's plan already consumed
    samples: int = 0
    best_metric: float | None = None
    best_step: int | None = None

    @classmethod
    def read(cls, folder: Path) -> TrainerState:
        """The state a checkpoint recorded, every number checked as read back (counts whole and >= 0, the
        best metric finite): a damaged file is a one-line error naming it and the key."""
        path = folder / STATE_FILE
        if not path.is_file():
            raise UsageError(f"{path}: no trainer state (an incomplete checkpoint)")
        data = read_json(path, "a trainer state JSON object")
        if not isinstance(data, dict):
            raise UsageError(f"{path}: expected a trainer state JSON object, got {type(data).__name__}")
        values = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        for key in ("step", "epoch", "batch_in_epoch", "samples", "best_step"):
            if values.get(key) is not None:
                values[key] = count(values[key], path, None, f"'{key}'")
        if values.get("best_metric") is not None:
            values["best_metric"] = finite_number(values["best_metric"], path, None, "'best_metric' as a number")
        return cls(**values)


def checkpoints(output_dir: str | Path) -> list[Path]:
    """Complete checkpoints of a run, oldest first."""
    out = Path(output_dir)
    if not out.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in out.iterdir()
             if (m := CHECKPOINT_NAME.match(p.name)) and (p / STATE_FILE).is_file()]
    return [p for _, p in sorted(found)]


def latest_checkpoint(output_dir: str | Path) -> Path | None:
    found = checkpoints(output_dir)
    return found[-1] if found else None


def save_checkpoint(accelerator, output_dir: str | Path, state: TrainerState, scheduler,
                    keep: int | None = 2) -> Path:
    """Save everything needed to resume after ``state.step`` (``scheduler``: the learning-rate schedule,
    saved here rather than as an accelerate custom object, which accelerate would unpickle unchecked);
    prune to the newest ``keep``."""
    output_dir = Path(output_dir)
    final = output_dir / f"checkpoint-{state.step}"
    tmp = output_dir / f".checkpoint-{state.step}.tmp"
    if accelerator.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(tmp), safe_serialization=True)
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        import torch

        torch.save(scheduler.state_dict(), tmp / SCHEDULER_FILE)
        write_json(tmp / STATE_FILE, asdict(state))
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        if keep:
            for old in checkpoints(output_dir)[:-keep]:
                shutil.rmtree(old, ignore_errors=True)
    accelerator.wait_for_everyone()
    return final


def safe_globals() -> list:
    """What a weights-only load may rebuild besides tensors and plain containers: numpy arrays and dtypes
    (the numpy RNG state accelerate saves) and ``codecs.encode`` (how numpy pickles an array's bytes)."""
    extra = [np.dtypes.UInt32DType] if hasattr(np, "dtypes") else []
    return [_reconstruct, np.ndarray, np.dtype, codecs.encode, *extra]


def safe_load(path: str | Path, mmap: bool = False):
    """``torch.load(path, weights_only=True)`` with :func:`safe_globals` allowed; a file that needs anything
    else (a crafted ``__reduce__``, an arbitrary class) raises :class:`UsageError` before it can run."""
    import torch

    allowed = safe_globals()
    scope = getattr(torch.serialization, "safe_globals", None)
    if scope is None and hasattr(torch.serialization, "add_safe_globals"):  # torch 2.4
        torch.serialization.add_safe_globals(allowed)
    try:
        with scope(allowed) if scope else contextlib.nullcontext():
            return torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError) as exc:  # RuntimeError: not torch.save's zip
        raise UsageError(f"{path}: refusing to load: not plain tensor data ({_reason(exc)}); a checkpoint is only "
                         "ever loaded with torch.load(weights_only=True)") from None


def _reason(exc: Exception) -> str:
    """The one line of a ``torch.load`` error that says what was refused."""
    if "mmap can only be used" in str(exc):
        return "not a torch.save zip archive"
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    named = [line for line in lines if "GLOBAL" in line or "zip" in line.lower()]
    return (named or lines or [type(exc).__name__])[0].split(". ")[0][:160].rstrip(".")  # its first sentence


def verify_checkpoint(folder: str | Path, process_index: int = 0, deepspeed: bool = False) -> None:
    """Check that ``folder`` is a complete checkpoint of this layout and that every pickle file in it loads
    weights-only (memory-mapped, so cheap); :class:`UsageError` naming the file otherwise."""
    folder = Path(folder)
    if folder.is_symlink() or not folder.is_dir():
        raise UsageError(f"{folder}: expected a checkpoint folder of the run itself, not a link or a file")
    needed = [STATE_FILE, SCHEDULER_FILE, f"random_states_{process_index}.pkl"]
    needed += [] if deepspeed else ["model.safetensors", "optimizer.bin"]
    missing = [name for name in needed if not (folder / name).is_file()]
    if missing:
        raise UsageError(f"{folder}: incomplete checkpoint, missing {', '.join(missing)} (written by another "
                         "Hopscotch version or damaged); start over with --overwrite")
    for path in sorted(folder.iterdir()):
        if path.suffix in PICKLE_SUFFIXES and path.is_file():
            safe_load(path, mmap=True)
    strays = sorted(p.name for p in folder.glob("custom_checkpoint_*.pkl"))
    if strays:  # accelerate would refuse them (no registered objects) with a multi-line RuntimeError
        raise UsageError(f"{folder / strays[0]}: not part of a Hopscotch checkpoint (it registers no accelerate custom "
                         "objects); remove it or start over with --overwrite")


def load_checkpoint(accelerator, folder: str | Path, scheduler, deepspeed: bool = False) -> TrainerState:
    """Restore model, optimizer, scheduler and RNG states after :func:`verify_checkpoint`; return the data
    position."""
    folder = Path(folder)
    verify_checkpoint(folder, accelerator.process_index, deepspeed)
    state = TrainerState.read(folder)
    # accelerate >= 1.x loads its pickles weights-only by default; say so where the keyword exists
    kwargs = {"load_kwargs": {"weights_only": True}} if "load_kwargs" in inspect.signature(
        accelerator.load_state).parameters else {}
    accelerator.load_state(str(folder), **kwargs)
    scheduler.load_state_dict(safe_load(folder / SCHEDULER_FILE))
    return state
