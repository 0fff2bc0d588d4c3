"""The output boundary (:mod:`hopscotch.retriever.io.outputs`, :mod:`hopscotch.retriever.io.atomic`): special
files, outputs that are inputs, unusable parents, the overwrite rule, stale temporaries, permissions."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import tempfile
from pathlib import Path

import pytest

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.io.atomic import atomic_folder, check_target, stale_temp_files
from hopscotch.retriever.io.common import atomic_write, write_json
from hopscotch.retriever.io.outputs import Output, check_outputs, output_folder, stamp_path
from hopscotch.retriever.io.runs import RunWriter

DEAD_PID = 2**22 + 12345  # above Linux's largest pid_max: no live process has it


def args(**flags) -> dict:
    return {"command": "test", "overwrite": False, **flags}


def refused(match: str, fn, *a, **kw) -> str:
    with pytest.raises(UsageError, match=match) as info:
        fn(*a, **kw)
    message = str(info.value)
    assert "\n" not in message
    return message


# -- special files, folders, parents -------------------------------------------------------------------
def test_device_fifo_and_socket_are_refused_and_left_alone(tmp_path):
    message = refused("is a character device", check_target, "/dev/full")
    assert message.startswith("/dev/full:")
    with pytest.raises(UsageError, match="character device"), atomic_write("/dev/full") as fh:
        fh.write("x")
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    refused("is a FIFO", check_outputs, args(), outputs=[fifo])
    refused("is a FIFO", RunWriter, fifo)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert not [p for p in tmp_path.iterdir() if p.name != "pipe"]  # no temp file, no sidecar
    sock_path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(sock_path))
        refused("is a socket", check_target, sock_path)


def test_folder_where_a_file_is_expected_and_the_reverse(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "f.txt").write_text("keep")
    assert "d: is a folder" in refused("is a folder, expected a file", check_target, tmp_path / "d")
    refused("is a file, expected a folder", check_outputs, args(), outputs=[output_folder(tmp_path / "f.txt")])
    with pytest.raises(UsageError, match="is a folder"):
        write_json(tmp_path / "d", {"a": 1})
    assert (tmp_path / "f.txt").read_text() == "keep" and (tmp_path / "d").is_dir()


def test_parent_that_is_a_file(tmp_path):
    (tmp_path / "f.txt").write_text("keep")
    for out in (tmp_path / "f.txt" / "run.trec", tmp_path / "f.txt" / "a" / "b" / "run.trec"):
        message = refused("is a file, not a folder", check_outputs, args(), outputs=[out])
        assert str(tmp_path / "f.txt") in message
        with pytest.raises(UsageError, match="is a file, not a folder"):
            write_json(out, {})
    assert (tmp_path / "f.txt").read_text() == "keep"


def _refused_as(uid: int, fn) -> str | None:
    """Run ``fn`` in a forked child as ``uid``; the UsageError message it raised, or None."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 0
        try:
            os.close(read)
            os.setgid(uid)
            os.setuid(uid)
            fn()
        except UsageError as exc:
            os.write(write, str(exc).encode())
        except BaseException:  # noqa: BLE001 - anything else is a failure of the test
            code = 1
        os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as fh:
        message = fh.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return message or None


def test_read_only_folder_is_refused_before_any_work(tmp_path):
    base = Path(tempfile.mkdtemp(prefix="hopscotch-ro-"))  # /tmp: reachable by another user, unlike tmp_path
    try:
        base.chmod(0o755)
        ro, rw = base / "ro", base / "rw"
        ro.mkdir(mode=0o555)
        rw.mkdir()
        rw.chmod(0o777)
        if os.geteuid() == 0:  # root writes anywhere: check as an unprivileged user
            message = _refused_as(65534, lambda: check_outputs(args(), outputs=[ro / "run.trec"]))
            assert message is not None and "not writable" in message and str(ro) in message
            assert _refused_as(65534, lambda: check_outputs(args(), outputs=[rw / "sub" / "run.trec"])) is None
        else:
            refused(f"the folder {ro} is not writable", check_outputs, args(), outputs=[ro / "run.trec"])
            refused("not writable", check_outputs, args(), outputs=[ro / "new" / "run.trec"])
        assert list(ro.iterdir()) == []
    finally:
        (base / "ro").chmod(0o755)
        shutil.rmtree(base)


# -- outputs that are inputs ---------------------------------------------------------------------------
def test_output_that_is_an_input_same_path_symlink_hardlink(tmp_path):
    data = tmp_path / "queries.jsonl"
    data.write_text('{"_id": "q", "text": "t"}\n')
    link, hard = tmp_path / "link.jsonl", tmp_path / "hard.jsonl"
    link.symlink_to(data)
    os.link(data, hard)
    for out, inp in [(data, data), (link, data), (data, link), (hard, data), (data, hard),
                     (tmp_path / "." / "queries.jsonl", data)]:
        message = refused("refusing to write an output that is the input", check_outputs, args(), outputs=[out],
                          inputs=[None, [inp]])
        assert message.startswith(f"{out}:") and str(inp) in message
    assert data.read_text() == '{"_id": "q", "text": "t"}\n' and not stamp_path(data).exists()


def test_output_inside_an_input_folder_or_holding_an_input(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "a.jsonl").write_text("{}\n")
    refused("lies inside the input folder", check_outputs, args(), outputs=[runs / "report.json"], inputs=[runs])
    refused("is a folder holding the input", check_outputs, args(), outputs=[Output(tmp_path, folder=True)],
            inputs=[runs / "a.jsonl"])
    refused("is the input", check_outputs, args(), outputs=[output_folder(runs, ["a.jsonl"])], inputs=[runs / "a.jsonl"])
    refused("given for two outputs", check_outputs, args(), outputs=[tmp_path / "x", tmp_path / "y" / ".." / "x"])
    check_outputs(args(), outputs=[tmp_path / "report.json"], inputs=[runs]).finish()  # beside it is fine


# -- the overwrite rule --------------------------------------------------------------------------------
def test_rerun_is_allowed_another_run_is_refused_unless_overwrite(tmp_path):
    src, out = tmp_path / "in.txt", tmp_path / "out.json"
    src.write_text("one")

    def run(**flags):
        guard = check_outputs(args(k=10, src=str(src), out=str(out), **flags), outputs=[out], inputs=[src])
        write_json(out, {"k": flags})
        guard.finish()

    run()
    assert stamp_path(out).is_file()
    run()                                                   # the same command, flags and inputs again
    refused("another run made it", run, k_extra=1)
    run(k_extra=1, overwrite=True)
    run(k_extra=1)                                          # now it is that run's output
    src.write_text("one")                                   # rewritten with the same bytes: the same input
    run(k_extra=1)
    src.write_text("two")                                   # another input
    assert "pass --overwrite" in refused("another run made it", run, k_extra=1)
    run(k_extra=1, overwrite=True)
    out.write_text("edited by hand\n")                      # changed since it was written
    refused("changed after this run wrote it", run, k_extra=1)
    run(k_extra=1, overwrite=True)
    stamp_path(out).unlink()                                # nothing records who made it
    refused("nothing records which run made it", run, k_extra=1)


def test_folder_of_named_files_and_a_folder_replaced_whole(tmp_path):
    out = tmp_path / "world"
    world = output_folder(out, ["a.txt", "b.txt"])
    guard = check_outputs(args(seed=1), outputs=[world])
    assert not out.exists() and list(tmp_path.iterdir()) == []  # nothing written for a new output
    out.mkdir()
    for name in ("notes.txt", "a.txt", "b.txt"):
        (out / name).write_text(name)
    guard.finish()
    check_outputs(args(seed=1), outputs=[world])              # replacing it again, killed after a.txt:
    (out / "a.txt").write_text("a, rewritten")
    check_outputs(args(seed=1), outputs=[world])              # the same run may go on
    refused("another run made it", check_outputs, args(seed=2), outputs=[world])
    (out / "notes.txt").write_text("still mine")              # other files in the folder do not count
    check_outputs(args(seed=1), outputs=[world]).finish()
    check_outputs(args(seed=1), outputs=[world])
    fresh = tmp_path / "fresh"                                # a new output killed halfway: nothing says whose
    fresh.mkdir()
    (fresh / "a.txt").write_text("a")
    refused("nothing records", check_outputs, args(seed=1), outputs=[output_folder(fresh, ["a.txt", "b.txt"])])
    index = tmp_path / "idx"
    (index / "old").mkdir(parents=True)
    refused("nothing records", check_outputs, args(), outputs=[Output(index, folder=True)])
    check_outputs(args(), outputs=[Output(tmp_path / "empty", folder=True)])


# -- temporaries and permissions -----------------------------------------------------------------------
def test_stale_temp_files_are_removed_on_start_and_none_left_on_failure(tmp_path):
    out = tmp_path / "run.trec"
    dead = tmp_path / f".run.trec.{DEAD_PID}-0a1b2c3d.tmp"
    legacy = tmp_path / ".run.trec.k3j2h1ab.tmp"               # mkstemp's name, no pid
    dead_dir = tmp_path / f".run.trec.{DEAD_PID}-ffff0000.tmp"
    live = tmp_path / f".run.trec.{os.getpid()}-00000000.tmp"  # a writer still running
    other = tmp_path / f".other.trec.{DEAD_PID}-0a1b2c3d.tmp"  # another target's
    for p in (dead, legacy, live, other):
        p.write_text("partial")
    dead_dir.mkdir()
    (dead_dir / "x").write_text("partial")
    assert stale_temp_files(out) == sorted([dead, dead_dir, legacy])
    check_outputs(args(), outputs=[out])
    assert not dead.exists() and not legacy.exists() and not dead_dir.exists()
    assert live.exists() and other.exists()
    out.write_text("previous\n")
    with pytest.raises(RuntimeError), atomic_write(out) as fh:
        fh.write("half")
        raise RuntimeError("killed")
    assert out.read_text() == "previous\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".run.trec.") and p.suffix == ".tmp") \
        == [live.name]


def test_permissions_follow_the_umask_or_the_replaced_file(tmp_path):
    old = os.umask(0o027)
    try:
        with atomic_write(tmp_path / "new.txt") as fh:
            fh.write("x")
        assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == 0o640
        kept = tmp_path / "kept.txt"
        kept.write_text("old")
        kept.chmod(0o604)
        write_json(kept, [1])
        assert stat.S_IMODE(kept.stat().st_mode) == 0o604 and kept.read_text() == "[\n  1\n]\n"
        with atomic_folder(tmp_path / "idx") as build:
            build.mkdir(mode=0o700)
            (build / "f").write_text("y")
        assert stat.S_IMODE((tmp_path / "idx").stat().st_mode) == 0o750
        with atomic_folder(tmp_path / "idx") as build:          # replaces the folder whole
            build.mkdir()
            (build / "g").write_text("z")
        assert [p.name for p in (tmp_path / "idx").iterdir()] == ["g"]
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    finally:
        os.umask(old)


def test_a_symlinked_output_stays_a_symlink_to_the_new_content(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("{}")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    write_json(link, {"a": 1})
    assert link.is_symlink() and real.read_text() == '{\n  "a": 1\n}\n'
