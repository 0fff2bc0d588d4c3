"""hopscotch_experiments.benchmarks.common and .vectors: what the benchmark scripts share."""

from __future__ import annotations

import argparse
import sys

import numpy as np
import pytest

from hopscotch_experiments.benchmarks.common import (add_run_options, folder_bytes, md_row, md_table, peak_rss_mib,
                                                   run_json, shared_data_dir, timed)
from hopscotch_experiments.benchmarks.vectors import clustered_vectors


def test_run_options():
    parser = argparse.ArgumentParser()
    add_run_options(parser, "/tmp/w", threads=3)
    args = parser.parse_args(["--repeats", "5"])
    assert (args.work, args.repeats, args.threads, args.json) == ("/tmp/w", 5, 3, None)


def test_run_json_reads_the_last_line_with_the_prefix_and_stops_on_failure():
    code = "print('noise'); print('BENCH {\"a\": 1}'); print('BENCH {\"a\": 2}'); print('tail')"
    result, seconds = run_json([sys.executable, "-c", code], prefix="BENCH ")
    assert result == {"a": 2} and seconds > 0
    assert run_json([sys.executable, "-c", "print('{\"b\": 3}')"])[0] == {"b": 3}
    with pytest.raises(SystemExit, match="child failed .exit 3.:\nboom"):
        run_json([sys.executable, "-c", "import sys; sys.stderr.write('boom'); sys.exit(3)"], what="child")
    with pytest.raises(SystemExit, match="exit 0"):
        run_json([sys.executable, "-c", "print('no json here')"], prefix="BENCH ")
    assert timed([sys.executable, "-c", "pass"]) > 0


def test_sizes_tables_and_data_dir(tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.npy").write_bytes(b"12345")
    (tmp_path / "y.txt").write_bytes(b"123")
    assert folder_bytes(tmp_path) == 8 and folder_bytes(tmp_path, "**/*.npy") == 5
    assert peak_rss_mib() > 1
    assert md_row(["a", 1]) == "| a | 1 |"
    assert md_table(["h1", "h2"], [["a", "b"]]) == "| h1 | h2 |\n|---|---|\n| a | b |"
    monkeypatch.setenv("HOPSCOTCH_DATA", str(tmp_path))
    assert shared_data_dir("/repo") == tmp_path
    monkeypatch.delenv("HOPSCOTCH_DATA")
    assert str(shared_data_dir("/x/repo")) == "/x/shared/data"


def test_clustered_vectors_are_unit_chunks_and_seeded():
    chunks = list(clustered_vectors(250, 16, 8, seed=0, chunk=100))
    assert [len(c) for c in chunks] == [100, 100, 50] and all(c.dtype == np.float32 for c in chunks)
    x = np.concatenate(chunks)
    assert np.allclose(np.linalg.norm(x, axis=1), 1, atol=1e-5)
    assert np.array_equal(x, np.concatenate(list(clustered_vectors(250, 16, 8, seed=0, chunk=100))))
    assert not np.array_equal(x[:50], next(clustered_vectors(50, 16, 8, seed=1)))
