"""hopscotch_experiments.benchmarks.gpu_check: rows, deadlines and the section entry point of
scripts/gpu_check_*.py (which tests/scripts/test_gpu_check.py runs end to end)."""

from __future__ import annotations

import json
import time

import pytest

from hopscotch_experiments.benchmarks.gpu_check import (Deadline, Recorder, fmt_gib, one_line, peak_gib, read_records,
                                                      run_section, section_main)


def test_one_line_and_deadline():
    assert one_line("a |  b\nc") == "a / b c"
    assert one_line("x" * 200, 10) == "xxxxxxx..."
    assert Deadline().left() == float("inf") and Deadline().timeout() is None and not Deadline().passed()
    soon = Deadline.after(0.05)
    assert 0 < soon.left() <= 0.05 and soon.timeout(floor=2.0) == 2.0
    time.sleep(0.06)
    assert soon.passed()


def test_recorder_writes_json_lines_that_survive_and_refuses_bad_statuses(tmp_path, capsys):
    rows = tmp_path / "rows.jsonl"
    rec = Recorder("kernel", rows)
    rec.row("item | one", "value", "PASS")
    rec.detail("### a table")
    with pytest.raises(ValueError, match="status"):
        rec.row("x", "y", "OK")
    assert "| kernel | item / one | value | PASS |" in capsys.readouterr().out
    with open(rows, "a") as fh:
        fh.write('{"torn')  # a hard kill mid-line
    records, details = read_records(rows)
    assert records == [{"section": "kernel", "item": "item / one", "value": "value", "status": "PASS"}]
    assert details == ["### a table"] and not rec.failed
    assert read_records(tmp_path / "missing.jsonl") == ([], [])


def test_run_section_turns_errors_and_silence_into_fail_rows(tmp_path, capsys):
    def ok(rec, device, deadline, size):
        assert deadline.left() <= 50 and device == "cpu"
        rec.row("size", size, "PASS")

    def boom(rec, device, deadline):
        raise RuntimeError("broken")

    def slow(rec, device, deadline):
        raise TimeoutError()

    assert run_section("s", ok, {"size": 3}, "cpu", tmp_path / "ok.jsonl", budget_s=60) == 0
    assert read_records(tmp_path / "ok.jsonl")[0][0]["value"] == "3"
    assert run_section("s", boom, {}, "cpu", tmp_path / "boom.jsonl") == 1
    assert read_records(tmp_path / "boom.jsonl")[0][0]["value"] == "RuntimeError: broken"
    assert run_section("s", slow, {}, "cpu", tmp_path / "slow.jsonl") == 1
    assert "time budget" in read_records(tmp_path / "slow.jsonl")[0][0]["value"]
    assert run_section("s", lambda rec, device, deadline: None, {}, "cpu", tmp_path / "quiet.jsonl") == 1
    assert read_records(tmp_path / "quiet.jsonl")[0][0]["value"] == "the section reported nothing"
    capsys.readouterr()


def test_section_main_picks_the_sizes(tmp_path):
    seen = {}

    def run(rec, device, deadline, n):
        seen.update(device=device, n=n)
        rec.row("n", n)

    sizes = {"full": {"n": 100}, "tiny": {"n": 1}}
    rows = tmp_path / "rows.jsonl"
    assert section_main("x", run, sizes, ["--device", "cpu", "--size", "tiny", "--rows", str(rows)]) == 0
    assert seen == {"device": "cpu", "n": 1}
    assert json.loads(rows.read_text().splitlines()[0])["status"] == "INFO"
    with pytest.raises(SystemExit):
        section_main("x", run, sizes, ["--size", "huge"])


def test_cpu_has_no_peak_memory():
    assert peak_gib("cpu") is None and fmt_gib(None) == "n/a (CPU)" and fmt_gib(1.5) == "1.50 GiB"
