"""The one output boundary: where every command's outputs may be written, checked before any work starts.

A command declares what it writes and what it reads, first thing in its ``run``::

    guard = check_outputs(vars(args), outputs=[args.out], inputs=[args.queries, args.bm25])
    ...                                   # the work; writers go through atomic_write / RunWriter
    guard.finish()                        # records what made the outputs

:func:`check_outputs` raises a one-line :class:`UsageError` naming the path and the reason when an output

* is one of the command's inputs (the same real path, so also through a symlink, or the same inode, so
  also a hard link), lies inside an input folder, or is a folder that holds an input;
* is a device node, FIFO or socket (``/dev/full``: nothing replaces it with a regular file), lies in ``/dev``,
  ``/proc`` or ``/sys`` (so does a prefix, :func:`prefixed_outputs`), a folder where a file is expected or a
  file where a folder is expected; names the same path as another output;
* has a parent that is a file, or a folder this process cannot write (nothing would be created there);
* already exists and was not made by this same command with the same inputs and flags, unless the
  command was given ``--overwrite``. The rule, the same for every command: a finished output is recorded
  in a sidecar ``.NAME.hopscotch`` beside it (a folder output: beside the folder), holding the command,
  a fingerprint (sha256 of the flags, outputs left out, and of every input's real path and content: a
  file's bytes up to :data:`HASH_BYTES`, a bigger one's size and modification time, a folder's visible
  entries) and the output's own size and modification time. An existing output is replaced
  without ``--overwrite`` only when its sidecar names this command with this fingerprint and the output
  is unchanged since; an existing folder written file by file (``world``, ``replay``) gets its sidecar
  before the work starts, so that the same run, killed halfway through replacing it, may be rerun. So an identical rerun is allowed
  (idempotent), while another run's output, a file changed since, or a file no Hopscotch command
  recorded is refused; so is a folder holding another command's marker (:data:`FOLDER_MARKERS`), not its own. A
  ``resumable`` folder (``index``, ``demo``) keeps its own resume rule (a manifest in it): only that is checked.

It then removes stale temporary files of earlier killed runs beside each output (``.NAME.*.tmp``, files
or folders, except those of a process still alive). The writers (:func:`~.common.atomic_write`,
:class:`~.runs.RunWriter`, :func:`~.atomic.atomic_folder`) check every target with
:func:`~.atomic.check_target` and write a temporary ``.NAME.<pid>-<random>.tmp`` beside the real target
(symlinks followed), renamed into place at the end: with the permissions of the file it replaces, else
the umask's (not ``mkstemp``'s 0600).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from dataclasses import dataclass
from pathlib import Path

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.io.atomic import (
    check_target,
    clean_stale_temp_files,
    create_temp_file,
    remove_path,
    special_folder,
)
from hopscotch.retriever.io.fingerprint import file_fingerprint

STAMP_SUFFIX = ".hopscotch"
HASH_BYTES = 16 << 20  # input files up to this size are fingerprinted by content, bigger ones by size and mtime
_NOT_FLAGS = {"func", "overwrite", "command"}
#: the entries that mark a folder (at its top level) as a command's output; the owners' names, checked against
#: them by tests/retriever/commands/test_bad_input_round2.py
FOLDER_MARKERS = {
    "index": ("index.json", "encode_config.json", "shards"),
    "bm25-index": ("hopscotch_bm25.json",),
    "world": ("world.json",),
    "replay": ("replay.json",),
    "demo": ("demo_manifest.json",),
    "train": ("train_manifest.json", "hopscotch_config.json"),
}

PathLike = str | os.PathLike


@dataclass(frozen=True)
class Output:
    """A declared output: a file, or a folder (``folder=True``) that is replaced whole or, when ``files``
    names them, into which those files are written (other files in it are left alone); a ``resumable`` folder
    is written part by part under the command's own resume rule (no sidecar; only another command's folder
    is refused)."""

    path: Path
    folder: bool = False
    files: tuple[str, ...] | None = None
    resumable: bool = False

    def targets(self) -> list[Path]:
        """The paths actually written: the file, the folder's named files, or the whole folder."""
        return [self.path / name for name in self.files] if self.files else [self.path]


def named_inputs(path: PathLike | None, names: Iterable[str]) -> list:
    """What a reader of the folder ``path`` reads when it takes only the files ``names`` found in it (a BEIR
    folder's ``corpus.jsonl``, ...): those files; else ``[path]`` (a file, or a folder read whole)."""
    if path is None or not Path(path).is_dir():
        return [path]
    found = [Path(path) / name for name in names if (Path(path) / name).is_file()]
    return found or [path]


def output_folder(path: PathLike, files: Iterable[str] | None = None, resumable: bool = False) -> Output:
    """A folder output (see :class:`Output`)."""
    return Output(Path(path), folder=True, files=None if files is None else tuple(files), resumable=resumable)


def prefixed_outputs(flag: str, prefix: PathLike, names: Iterable[PathLike]) -> list[Output]:
    """The files ``names`` that ``flag PREFIX`` derives from a path prefix (``--export-tevatron P`` writes
    ``P.0.pkl``, ...), as file outputs; a prefix in ``/dev``, ``/proc`` or ``/sys`` is refused itself."""
    special = special_folder(prefix)
    if special is not None:
        raise UsageError(f"{prefix}: {flag} writes files named after this prefix, in {special} (the system's "
                         "device and kernel files); give a prefix in an ordinary folder")
    return [Output(Path(name)) for name in names]


def _foreign(target: Path, command: str) -> str | None:
    """``hopscotch C (MARKER)`` when the folder ``target`` holds another command's marker and none of its own."""
    found = [(c, n) for c, names in FOLDER_MARKERS.items() for n in names if (target / n).exists()]
    if not found or any(c == command for c, _ in found) or not target.is_dir():
        return None
    return f"hopscotch {found[0][0]} ({found[0][1]})"


# -- fingerprints and sidecars ---------------------------------------------------------------------------

def stamp_path(target: Path) -> Path:
    """The sidecar recording what made ``target``: ``.NAME.hopscotch`` beside it."""
    return target.parent / f".{target.name}{STAMP_SUFFIX}"


def _signature(path: Path):
    """An output's current state, cheaply: size and mtime (a folder: its entries')."""
    try:
        st = path.stat()
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode):
        return [st.st_size, st.st_mtime_ns]
    rows = []
    with contextlib.suppress(OSError):
        for entry in sorted(os.scandir(path), key=lambda e: e.name):
            with contextlib.suppress(OSError):
                s = entry.stat()
                rows.append([entry.name, s.st_size if entry.is_file() else None, s.st_mtime_ns])
    return rows


def _content(path: Path, st: os.stat_result, hash_bytes: int = HASH_BYTES):
    """A file's content: sha256 up to ``hash_bytes`` (a rewrite with the same bytes is the same input),
    else size and mtime."""
    if st.st_size > hash_bytes:
        return [st.st_size, st.st_mtime_ns]
    try:
        fp = file_fingerprint(path, full_hash_bytes=hash_bytes)
    except OSError:
        return [st.st_size, st.st_mtime_ns]
    return [st.st_size, fp.get("sha256", fp.get("sha256_sampled"))]  # sampled: it grew since the stat


def _input_signature(path: Path):
    """An input's content: a file's (:func:`_content`); a folder's visible entries', files hashed while
    :data:`HASH_BYTES` of them last (in name order, so the same files are always hashed), subfolders by mtime."""
    try:
        st = path.stat()
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode):
        return _content(path, st) if stat.S_ISREG(st.st_mode) else None
    rows, budget = [], HASH_BYTES
    with contextlib.suppress(OSError):
        for entry in sorted(os.scandir(path), key=lambda e: e.name):
            if entry.name.startswith("."):
                continue
            with contextlib.suppress(OSError):
                s = entry.stat()
                if not entry.is_file():
                    rows.append([entry.name, s.st_mtime_ns])
                    continue
                rows.append([entry.name, _content(Path(entry.path), s, budget)])
                budget -= s.st_size if s.st_size <= budget else 0
    return rows


def _output_signature(output: Output, target: Path):
    if output.files:
        return {name: _signature(target / name) for name in output.files}
    return _signature(target)


def _exists(output: Output, target: Path) -> bool:
    if output.files:
        return any((target / name).exists() for name in output.files)
    if output.folder:
        return target.is_dir() and any(target.iterdir())
    return target.exists()


def _flag_value(value, skip: set[str]):
    if isinstance(value, (list, tuple)):
        return [_flag_value(v, skip) for v in value]
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if isinstance(value, str):
        if value in skip:
            return None
        if value and os.path.exists(value):
            return os.path.realpath(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    text = repr(value)
    return type(value).__name__ if " at 0x" in text else text  # no memory address: reruns must agree


def fingerprint(command: str, flags: dict, inputs: Sequence[Path], outputs: Sequence[Output],
                ignore: Iterable[str] = ()) -> str:
    """sha256 of the command, its flags (outputs and ``ignore`` left out, paths made real) and its inputs."""
    skip = {str(o.path) for o in outputs} | {os.fspath(o.path) for o in outputs}
    keys = sorted(k for k in flags if k not in _NOT_FLAGS and k not in set(ignore) and not k.startswith("_"))
    body = {"command": command, "flags": {k: _flag_value(flags[k], skip) for k in keys},
            "inputs": [[os.path.realpath(p), _input_signature(p)] for p in inputs]}
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=repr).encode()).hexdigest()


def _write_stamp(target: Path, record: dict) -> None:
    path = stamp_path(target)
    fd, tmp = create_temp_file(path)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(record, fh, indent=1)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        remove_path(tmp)
        raise


def _read_stamp(target: Path) -> dict | None:
    try:
        record = json.loads(stamp_path(target).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


# -- the check -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Input:
    given: str
    real: Path
    ident: tuple[int, int] | None
    folder: bool


def _input(path: PathLike) -> _Input:
    real = Path(os.path.realpath(path))
    try:
        st = real.stat()
    except OSError:
        return _Input(os.fspath(path), real, None, False)
    return _Input(os.fspath(path), real, (st.st_dev, st.st_ino), stat.S_ISDIR(st.st_mode))


def _same(target: Path, inp: _Input) -> bool:
    if Path(os.path.realpath(target)) == inp.real:
        return True
    try:
        st = target.stat()
    except OSError:
        return False
    return inp.ident == (st.st_dev, st.st_ino)


def _input_conflict(target: Path, whole_folder: bool, inp: _Input) -> str | None:
    """Why writing ``target`` would destroy (or be read as) the input, or None."""
    real = Path(os.path.realpath(target))
    if _same(target, inp):
        return f"is the input {inp.given}"
    if inp.folder and real.is_relative_to(inp.real):
        return f"lies inside the input folder {inp.given}"
    if whole_folder and inp.real.is_relative_to(real):
        return f"is a folder holding the input {inp.given}"
    return None


def _flatten(paths) -> list:
    out = []
    for p in paths:
        if isinstance(p, (list, tuple)):
            out.extend(_flatten(p))
        elif isinstance(p, Output) or (p is not None and os.fspath(p) != ""):
            out.append(p)
    return out


class OutputGuard:
    """What :func:`check_outputs` approved; :meth:`finish` records the outputs as made by this run."""

    def __init__(self, command: str, digest: str, outputs: list[tuple[Output, Path]], inputs: list[Path]):
        self.command, self.fingerprint, self.outputs, self.inputs = command, digest, outputs, inputs

    def _record(self, output: Output, target: Path, done: bool) -> dict:
        return {"command": self.command, "fingerprint": self.fingerprint, "finished": done,
                "output": _output_signature(output, target) if done else None,
                "inputs": [str(p) for p in self.inputs]}

    def start(self) -> None:
        """Mark the existing folder outputs written file by file (a crash leaves some files replaced) as being
        made by this run; nothing is written for a new output, so a refused or failed run leaves no file."""
        for output, target in self.outputs:
            if output.files and not output.resumable and _exists(output, target):
                _write_stamp(target, self._record(output, target, False))

    def finish(self) -> None:
        """Record every output that now exists as made by this run (its sidecar); drop the others' sidecars."""
        for output, target in self.outputs:
            if output.resumable:
                continue  # its manifest inside records what made it
            if _exists(output, target) or (output.folder and target.is_dir()):
                _write_stamp(target, self._record(output, target, True))
            else:
                with contextlib.suppress(FileNotFoundError):
                    stamp_path(target).unlink()


def _made_here(output: Output, target: Path, command: str, digest: str) -> str | None:
    """None when the existing output was made (or was being made) by this command and fingerprint; else why not."""
    record = _read_stamp(target)
    if record is None:
        return "nothing records which run made it"
    if record.get("command") != command or record.get("fingerprint") != digest:
        return f"another run made it (hopscotch {record.get('command')} with other inputs or flags)"
    if record.get("finished") and record.get("output") != json.loads(json.dumps(_output_signature(output, target))):
        return "it changed after this run wrote it"
    return None


def check_outputs(flags: Mapping[str, Any] | None, outputs: Sequence, inputs: Sequence = (), *,
                  command: str | None = None, ignore: Iterable[str] = ()) -> OutputGuard:
    """Check a command's outputs against its inputs and what is on disk, before any work (module doc).

    ``flags``: the parsed flags as ``{destination: value}`` (``vars(args)``: ``overwrite``, ``command``; every flag
    is fingerprinted except the outputs and ``ignore``). ``outputs``: file paths or :class:`Output` (None entries are skipped).
    ``inputs``: files or folders read (None skipped, lists flattened; a folder counts whole: an output
    may not lie inside it). Removes stale temporary files and marks the outputs as being written by this
    run; returns the guard whose :meth:`~OutputGuard.finish` the command calls when done.
    """
    flags = dict(flags or {})
    command = command or flags.get("command") or "hopscotch"
    overwrite = bool(flags.get("overwrite", False))
    declared = [o if isinstance(o, Output) else Output(Path(o)) for o in _flatten(outputs)]
    read = [_input(p) for p in _flatten(inputs)]
    checked: list[tuple[Output, Path]] = []
    seen: dict[Path, Path] = {}
    for output in declared:
        target = check_target(output.path, folder=output.folder)
        for file in output.targets() if output.files else []:
            check_target(file)
        for given in output.targets():
            real = Path(os.path.realpath(given))
            if real in seen:
                raise UsageError(f"{given}: the same path is given for two outputs ({seen[real]} and {given})")
            seen[real] = given
            whole = output.folder and not output.files and not output.resumable
            for inp in read:
                why = _input_conflict(given, whole, inp)
                if why:
                    raise UsageError(f"{given}: refusing to write an output that {why}")
        checked.append((output, target))
    digest = fingerprint(command, flags, [i.real for i in read], declared, ignore)
    for output, target in checked:
        other = None if overwrite or not output.folder else _foreign(target, command)
        if other:
            raise UsageError(f"{output.path}: holds the output of {other}; refusing to write hopscotch {command}'s "
                             "output into it: choose another path, or pass --overwrite")
        if not overwrite and not output.resumable and _exists(output, target):
            why = _made_here(output, target, command, digest)
            if why:
                raise UsageError(f"{output.path}: exists and {why}; pass --overwrite to replace it, "
                                 "or choose another path")
    for output, target in checked:
        for file in [target / name for name in output.files] if output.files else [target]:
            clean_stale_temp_files(file)
        clean_stale_temp_files(stamp_path(target))
    guard = OutputGuard(command, digest, checked, [i.real for i in read])
    guard.start()
    return guard
