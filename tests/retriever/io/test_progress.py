"""Progress that reads well in a log: a tqdm bar on a terminal only; elsewhere one summary line per stage,
none for a stage an error cut short, so a failed command leaves exactly its error line on stderr."""

from __future__ import annotations

import gc
import io
import json
import re
import subprocess
import sys

import pytest

from hopscotch.retriever.io.progress import live_bars, progress

SUMMARY = re.compile(r"^(?P<desc>.+): (?P<done>[\d,]+) (?P<unit>\w+) in \d+\.\d s( \(.*\))?$")


class _Terminal(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


class _Closed:
    def isatty(self) -> bool:
        raise ValueError("I/O operation on closed file")


def test_live_bars_only_on_a_terminal():
    assert live_bars(True, _Terminal()) and not live_bars(False, _Terminal())
    assert not live_bars(True, io.StringIO()) and not live_bars(True, _Closed()) and not live_bars(True, object())
    notebook_stream = type("OutStream", (io.StringIO,), {"__module__": "ipykernel.iostream"})()
    assert live_bars(True, notebook_stream)  # a Jupyter kernel's stderr is no TTY, but tqdm.auto draws a widget


def test_summary_line_instead_of_a_bar_in_a_log():
    log = io.StringIO()
    bar = progress(total=3_000, desc="encode docs", unit="text", stream=log)
    assert not bar.live
    bar.update(1_000)
    bar.update(2_000)
    bar.set_postfix(shard=2, docs_per_s="714")
    assert log.getvalue() == ""  # nothing while the stage runs
    bar.close()
    bar.close()  # closing twice prints once
    (line,) = log.getvalue().splitlines()
    assert "\r" not in log.getvalue()
    m = SUMMARY.match(line)
    assert m and (m["desc"], m["done"], m["unit"]) == ("encode docs", "3,000", "texts"), line
    assert line.endswith("shard=2, docs_per_s=714)")


def test_resumed_stage_counts_this_run_and_names_the_total():
    log = io.StringIO()
    with progress(total=10, initial=4, desc="synth", unit="step", stream=log) as bar:
        bar.update(6)
    line = log.getvalue().strip()
    assert line.startswith("synth: 6 steps in ") and "10/10 in all" in line
    log = io.StringIO()
    with progress(total=2, desc="search (bm25)", unit="query", stream=log) as bar:
        bar.update(1)
    assert log.getvalue().startswith("search (bm25): 1 query in ")  # singular
    log = io.StringIO()
    with progress(total=2, desc="search (bm25)", unit="query", stream=log) as bar:
        bar.update(2)
    assert log.getvalue().startswith("search (bm25): 2 queries in ")


def test_iteration_prints_its_summary_when_exhausted():
    log = io.StringIO()
    seen = []
    for shard in progress(range(5), desc="docid lookup", unit="shard", stream=log):
        seen.append(shard)
        assert log.getvalue() == ""
    assert seen == [0, 1, 2, 3, 4]
    assert log.getvalue().startswith("docid lookup: 5 shards in ")


def test_no_summary_for_a_stage_cut_short_or_silenced():
    log = io.StringIO()
    with pytest.raises(ValueError), progress(total=3, desc="with", stream=log) as bar:
        bar.update(1)
        raise ValueError("bad corpus")
    bar = progress(desc="finally", stream=log)
    with pytest.raises(ValueError):
        try:
            bar.update(1)
            raise ValueError("bad corpus")
        finally:
            bar.close()  # the pattern of data_synth's pipeline: close in a finally while the error propagates
    with pytest.raises(ValueError):
        for _ in progress(range(3), desc="loop", stream=log):
            raise ValueError("bad shard")
    for i in progress(range(3), desc="broken", stream=log):
        if i == 1:
            break
    abandoned = progress(total=3, desc="abandoned", stream=log)
    abandoned.update(1)
    del abandoned, bar
    gc.collect()
    assert log.getvalue() == ""
    quiet = progress(range(3), desc="quiet", show=False, stream=log)  # show_progress=False: silence
    assert list(quiet) == [0, 1, 2]
    with progress(total=1, desc="quiet", show=False, stream=log) as bar:
        bar.update(1)
    assert log.getvalue() == ""


def test_a_terminal_still_gets_its_bar_and_no_summary():
    term = _Terminal()
    with progress(total=3, desc="train", unit="step", stream=term) as bar:
        assert bar.live
        bar.update(3)
        bar.set_postfix(loss="0.1234")
    drawn = term.getvalue()
    assert "\r" in drawn and "train" in drawn and "3/3" in drawn and "loss=0.1234" in drawn
    assert not any(SUMMARY.match(line) for line in drawn.splitlines())


# -- through the command line, stderr to a pipe (a log file) ---------------------------------------
def _hopscotch(*argv) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hopscotch.retriever.cli", *map(str, argv)],
                          capture_output=True, text=True, check=False, timeout=1800)


def test_cli_stderr_in_a_log_is_one_line_per_stage(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": f"d{i}", "text": f"hopscotch chalk square {i} jump"}) + "\n"
                              for i in range(40)))
    built = _hopscotch("bm25-index", "--corpus", corpus, "--out", tmp_path / "bm25")
    assert built.returncode == 0, built.stderr
    assert "\r" not in built.stderr
    (line,) = built.stderr.splitlines()  # one stage: the tokenizer's (bm25s's own bars are off too)
    m = SUMMARY.match(line)
    assert m and (m["desc"], m["done"], m["unit"]) == ("bm25 tokenize", "40", "docs"), line
    queries = tmp_path / "queries.jsonl"
    queries.write_text("".join(json.dumps({"_id": f"q{i}", "text": f"square {i}"}) + "\n" for i in range(7)))
    found = _hopscotch("search", "--queries", queries, "--out", tmp_path / "run.trec", "--k", 5,
                       "--searcher", "bm25", "--bm25", tmp_path / "bm25")
    assert found.returncode == 0, found.stderr
    assert "\r" not in found.stderr
    (line,) = found.stderr.splitlines()
    m = SUMMARY.match(line)
    assert m and (m["desc"], m["done"], m["unit"]) == ("search (bm25)", "7", "queries"), line


def test_cli_bad_corpus_leaves_exactly_its_error_line(tmp_path):
    corpus = tmp_path / "BAD.jsonl"  # good rows first, so the tokenizer's stage has started when it breaks
    corpus.write_text("".join(json.dumps({"_id": f"d{i}", "text": "x"}) + "\n" for i in range(5)) + "{bad json\n")
    proc = _hopscotch("bm25-index", "--corpus", corpus, "--out", tmp_path / "idx")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "\r" not in proc.stderr
    assert proc.stderr.startswith("hopscotch bm25-index: error: ") and "BAD.jsonl:6" in proc.stderr
    assert not (tmp_path / "idx").exists()


@pytest.mark.parametrize(("rate", "text"), [(0.0734, "0.073"), (0.07, "0.070"), (1.234, "1.2"), (12.3, "12"),
                                            (4257.3, "4,257"), (0.0, "0")])
def test_rates_print_with_two_significant_digits(rate, text):
    """A slow stage (a training step every 14 s) prints 0.07 steps/s, never 0."""
    from hopscotch.retriever.io.progress import rate_text

    assert rate_text(rate) == text
