"""Write primitives every writer shares: where a path may be written, temporary names, stale temporaries.

:func:`check_target` refuses (one-line :class:`UsageError` naming the path and why) a device node, FIFO or
socket, a path inside the system's device and kernel folders (:data:`SPECIAL_FOLDERS`: ``/dev``, ``/proc``,
``/sys``; not ``/dev/shm``, a plain memory file system), a folder where a file is expected (or the reverse),
and a target whose nearest existing parent is a file or not writable. Temporary files are
``.NAME.<pid>-<random>.tmp`` beside the real target, created with the mode of the file they replace, else
``0o666`` less the umask; :func:`stale_temp_files` finds the ones whose writer is gone.
:func:`~.common.atomic_write` (files) and :func:`atomic_folder` (folders replaced whole) are built on them;
:mod:`.outputs` checks a command's outputs with them before it starts.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

from hopscotch.retriever.errors import UsageError

_KINDS = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISSOCK, "a socket"))


#: folders of device and kernel files: nothing Hopscotch writes belongs there (``/dev/null.0.pkl`` is no output)
SPECIAL_FOLDERS = (Path("/dev"), Path("/proc"), Path("/sys"))
#: plain file systems mounted inside them, where writing is fine
ORDINARY_INSIDE = (Path("/dev/shm"),)


def _kind(st: os.stat_result) -> str | None:
    return next((name for test, name in _KINDS if test(st.st_mode)), None)


def special_folder(path: str | os.PathLike) -> Path | None:
    """The special folder (:data:`SPECIAL_FOLDERS`) that ``path`` is or lies in, symlinks resolved; else None."""
    real = Path(os.path.realpath(path))
    if any(real.is_relative_to(ok) for ok in ORDINARY_INSIDE):
        return None
    return next((folder for folder in SPECIAL_FOLDERS if real.is_relative_to(folder)), None)


def check_target(path: str | os.PathLike, folder: bool = False) -> Path:
    """The real path at which to write ``path`` (a symlink is followed, so it keeps pointing at the output).

    Raises :class:`UsageError` when it is a device node, FIFO or socket, lies in a :func:`special_folder`, is
    a folder where a file is expected (or a file where a folder is), or when its nearest existing parent is a
    file or a folder this process cannot write.
    """
    given = Path(path)
    target = Path(os.path.realpath(given)) if given.is_symlink() else given
    try:
        st = target.stat()
    except (FileNotFoundError, NotADirectoryError):  # the latter: a parent is a file (reported below)
        st = None
    except OSError as exc:
        raise UsageError(f"{given}: cannot write the output here ({exc.strerror or exc})") from None
    if st is not None:
        kind = _kind(st)
        if kind is not None:
            raise UsageError(f"{given}: is {kind}; refusing to write an output onto it (give a regular file path)")
        if stat.S_ISDIR(st.st_mode) and not folder:
            raise UsageError(f"{given}: is a folder, expected a file path for this output")
        if not stat.S_ISDIR(st.st_mode) and folder:
            raise UsageError(f"{given}: is a file, expected a folder for this output")
    special = special_folder(given)
    if special is not None:
        raise UsageError(f"{given}: lies in {special}, the system's device and kernel files; refusing to write an "
                         "output there (give a path in an ordinary folder)")
    parent = target.parent
    while not parent.exists() and not parent.is_symlink() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise UsageError(f"{given}: its parent {parent} is a file, not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{given}: the folder {parent} is not writable")
    return target


def ensure_parent(target: Path) -> None:
    """Create ``target``'s parent folders, or :class:`UsageError` naming why that failed."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{target}: cannot create its folder {target.parent} ({exc.strerror or exc})") from None


def temp_path(target: Path, tag: str = "") -> Path:
    """A new temporary name beside ``target``: ``.NAME.<pid>-<random>[tag].tmp``."""
    return target.parent / f".{target.name}.{os.getpid()}-{secrets.token_hex(4)}{tag}.tmp"


def create_temp_file(target: Path) -> tuple[int, Path]:
    """Create a temporary file beside ``target`` for writing; returns ``(fd, path)``.

    Its mode is that of the existing ``target``, else ``0o666`` less the umask.
    """
    tmp = temp_path(target)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
    except OSError as exc:
        raise UsageError(f"{target}: cannot create a file in {target.parent} ({exc.strerror or exc})") from None
    with contextlib.suppress(OSError):
        os.fchmod(fd, stat.S_IMODE(target.stat().st_mode))
    return fd, tmp


def remove_path(path: Path) -> None:
    """Delete a file, link or folder (a folder with its contents); a missing path is no error."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return pid > 0
    return True


def stale_temp_files(target: Path) -> list[Path]:
    """``.NAME.*.tmp`` entries beside ``target`` left by writers that are gone (any whose name holds no
    pid, as ``mkstemp`` made them, or the pid of no live process)."""
    prefix = f".{target.name}."
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return []
    stale = []
    for entry in entries:
        if not (entry.name.startswith(prefix) and entry.name.endswith(".tmp")):
            continue
        pid = entry.name[len(prefix):-len(".tmp")].split("-", 1)[0]
        if not (pid.isdigit() and _alive(int(pid))):
            stale.append(target.parent / entry.name)
    return sorted(stale)


def clean_stale_temp_files(target: Path) -> list[Path]:
    """Remove :func:`stale_temp_files` of ``target``; returns what was removed."""
    stale = stale_temp_files(target)
    for path in stale:
        remove_path(path)
    return stale


@contextlib.contextmanager
def atomic_folder(path: str | os.PathLike) -> Iterator[Path]:
    """Build a folder that replaces ``path`` whole, or nothing on failure.

    Yields a path (not yet existing, inside a temporary ``.NAME.<pid>-<random>.tmp`` folder beside the
    target) at which the caller creates the folder; when the block ends without an exception it is
    renamed onto ``path`` (the old folder moved aside first, then deleted) with the umask's permissions.
    """
    target = check_target(path, folder=True)
    ensure_parent(target)
    holder = temp_path(target)
    try:
        holder.mkdir(0o777)
    except OSError as exc:
        raise UsageError(f"{target}: cannot create a folder in {target.parent} ({exc.strerror or exc})") from None
    build, old = holder / target.name, None
    try:
        yield build
        if not build.is_dir():
            raise RuntimeError(f"atomic_folder: nothing was built at {build}")
        os.chmod(build, stat.S_IMODE(holder.stat().st_mode))
        if target.exists():
            old = temp_path(target, ".old")
            os.replace(target, old)
        os.replace(build, target)
    except BaseException:
        if old is not None and not target.exists():
            os.replace(old, target)
        raise
    finally:
        remove_path(holder)
        if old is not None:
            remove_path(old)
