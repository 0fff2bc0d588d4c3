"""Helpers shared by the index tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hopscotch.retriever.index.layout import done_shards

REPO = Path(__file__).resolve().parents[3]
HANG_S = 1800   # a subprocess still short of its event after this long is hung (not slow): the test fails


def _kill_encode_after(corpus: Path, model: Path, out: Path, shard_size: int, shards: int = 1) -> list[int]:
    """Run ``encode_corpus`` (batch 16, max length 64) in a subprocess and SIGKILL it once ``shards`` shards are
    done (or it ends by itself); returns the done shards. It waits on those events, not on the clock: on a loaded
    machine the kill comes later, never at an arbitrary point (a run still going after :data:`HANG_S` is a hang,
    and fails the test)."""
    code = ("import sys; from hopscotch.retriever.index.encode import EncodeOptions, encode_corpus; "
            f"encode_corpus(sys.argv[1], sys.argv[2], sys.argv[3], EncodeOptions(shard_size={shard_size}, "
            "batch_size=16, max_length=64, show_progress=False))")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-c", code, str(corpus), str(model), str(out)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + HANG_S
        while len(done_shards(out)) < shards and proc.poll() is None:
            if time.monotonic() > deadline:
                proc.send_signal(signal.SIGKILL)
                pytest.fail(f"encode_corpus wrote {len(done_shards(out))} of {shards} shards in {HANG_S} s: a hang")
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    return done_shards(out)


@pytest.fixture(scope="session")
def kill_encode_after():
    """:func:`_kill_encode_after`, for the tests of killed-and-resumed encoding."""
    return _kill_encode_after
