"""Checkpoints that resume exactly: model, optimizer, scheduler, RNG states and the data position.

``OUTPUT/checkpoint-<step>/`` holds accelerate's ``save_state`` (weights, optimizer, registered
scheduler, every process's RNG states) and ``trainer_state.json`` (step, epoch, batch within the
epoch, samples seen, best dev metric). It is written to ``.checkpoint-<step>.tmp`` and renamed when
complete, so a job killed while saving leaves the previous checkpoint as the latest.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.io.common import write_json

STATE_FILE = "trainer_state.json"
_CKPT = re.compile(r"^checkpoint-(\d+)$")


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
        path = folder / STATE_FILE
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise UsageError(f"{path}: expected a trainer state JSON object ({exc})") from None
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


def checkpoints(output_dir: str | Path) -> list[Path]:
    """Complete checkpoints of a run, oldest first."""
    out = Path(output_dir)
    if not out.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in out.iterdir()
             if (m := _CKPT.match(p.name)) and (p / STATE_FILE).is_file()]
    return [p for _, p in sorted(found)]


def latest_checkpoint(output_dir: str | Path) -> Path | None:
    found = checkpoints(output_dir)
    return found[-1] if found else None


def save_checkpoint(accelerator, output_dir: str | Path, state: TrainerState, keep: int | None = 2) -> Path:
    """Save everything needed to resume after ``state.step``; prune to the newest ``keep``."""
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
        write_json(tmp / STATE_FILE, asdict(state))
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        if keep:
            for old in checkpoints(output_dir)[:-keep]:
                shutil.rmtree(old, ignore_errors=True)
    accelerator.wait_for_everyone()
    return final


def load_checkpoint(accelerator, folder: str | Path) -> TrainerState:
    """Restore model, optimizer, scheduler and RNG states; return the data position."""
    folder = Path(folder)
    state = TrainerState.read(folder)
    accelerator.load_state(str(folder))
    return state
