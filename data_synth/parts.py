"""Per-question work files that make a synth run resumable.

``<out>.parts/`` holds ``manifest.json`` (the configuration and inputs the run was started with) and
one ``NNNNNNN.json`` per finished question (its lines and stats), each written atomically. A killed
run leaves only whole files behind (and perhaps a stray temp file, ignored and cleaned up), so the
next run does the questions that have no file yet; ``assemble`` then writes the output in question
order, exactly as an uninterrupted run would.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.io.common import atomic_write

MANIFEST = "manifest.json"


class PartStore:
    """The ``<out>.parts`` folder of one output file."""

    def __init__(self, out: str | os.PathLike):
        self.out = Path(out)
        self.folder = self.out.with_name(self.out.name + ".parts")

    def path(self, index: int) -> Path:
        return self.folder / f"{index:07d}.json"

    def open(self, manifest: dict, fresh: bool = False) -> None:
        """Start or resume: the folder's manifest must equal ``manifest`` (unless ``fresh`` clears it)."""
        file = self.folder / MANIFEST
        if self.folder.exists() and fresh:
            shutil.rmtree(self.folder)
        if file.is_file():
            try:
                previous = json.loads(file.read_text(encoding="utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise UsageError(f"{file}: cannot read the work manifest ({exc}), so nothing says which run wrote "
                                 "the work files; pass --fresh to start over") from None
            if previous != json.loads(json.dumps(manifest)):  # the pipeline names each difference before this
                raise UsageError(f"{file}: the work files were written by a run with other settings or inputs; "
                                 "rerun with the same ones to resume, or pass --fresh to start over")
        else:
            self.folder.mkdir(parents=True, exist_ok=True)
            with atomic_write(file) as fh:
                json.dump(manifest, fh, indent=2, sort_keys=True)
        for stray in self.folder.glob(".*.tmp"):
            stray.unlink(missing_ok=True)

    def done(self, index: int, question_id: str) -> bool:
        """Whether question ``index`` has a complete work file: its question, a list of lines and counts as stats
        (a damaged one is removed and redone)."""
        path = self.path(index)
        if not path.is_file():
            return False
        try:
            part = json.loads(path.read_text(encoding="utf-8"))
            stats = part["stats"]  # counts, summed into the output's stats: whole numbers >= 0 or redone
            if (part["question_id"] == question_id and isinstance(part["lines"], list) and isinstance(stats, dict)
                    and all(type(v) is int and v >= 0 for v in stats.values())):
                return True
        except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError):
            pass
        path.unlink(missing_ok=True)
        return False

    def write(self, index: int, question_id: str, lines: list[str], stats: dict) -> None:
        """Temp file then rename, without fsync: a killed process loses nothing written, and a file an
        OS crash left damaged fails :meth:`done`'s check and is redone."""
        path = self.path(index)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"question_id": question_id, "lines": lines, "stats": stats}, fh, ensure_ascii=False)
        os.replace(tmp, path)

    def read(self, index: int) -> dict:
        return json.loads(self.path(index).read_text(encoding="utf-8"))

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
