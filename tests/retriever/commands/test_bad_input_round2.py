"""Round 2 of the bad-input suite: silent wrong answers turned into one-line refusals (exit 2, nothing written).

Each class is fixed where its rule lives, and each case below goes through ``hopscotch.retriever.cli.main``:

* the output boundary (``io/outputs.py``, ``io/atomic.py``): a folder another command made (its marker files,
  :data:`~hopscotch.retriever.io.outputs.FOLDER_MARKERS`), a path or a path prefix in ``/dev``, ``/proc``
  or ``/sys`` (``--export-tevatron /dev/null`` named ``/dev/null.0.pkl``), a file where a folder goes;
* ClimbMix shard numbers (``io/corpus.py``): two files with one number, a file without one beside numbered ones;
* plans and settings that cannot work: ``IVF0``, more IVF lists (or PQ centroids) than documents
  (``index/faiss_spec.py``, for ``--plan`` and the build), a window stride longer than the window
  (``index/windows.py``), Tevatron vectors of another dimension than the query encoder's;
* searcher flags the selected backend does not use (``searchers/registry.py``).

Each case checks exit 2, one stderr line naming the file or flag, no traceback, the inputs unchanged and nothing
left in the case's output folder (nor beside a refused special path).
"""

from __future__ import annotations

import hashlib
import json
import pickle
from pathlib import Path

import numpy as np
import pytest


def tree_digest(*folders: Path) -> dict[str, str]:
    """sha256 of every file under ``folders`` (the inputs), by path."""
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest()
            for folder in folders for p in sorted(folder.rglob("*")) if p.is_file()}


def run_main(capsys, argv: list[str]) -> tuple[int, str, str]:
    from hopscotch.retriever.cli import main

    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def argv_of(line: str, paths: dict[str, Path], out: Path) -> list[str]:
    return [w.format(out=out, **paths) for w in line.split()]


def assert_refused(code: int, err: str, needle: str) -> None:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2, f"exit {code}, stderr: {err!r}"
    assert "Traceback" not in err
    assert len(lines) == 1, f"expected one stderr line, got {lines}"
    assert needle in lines[0], f"{needle!r} not in {lines[0]!r}"


@pytest.fixture(scope="module")
def paths(small_world, small_world_index, tiny_bert_dir, tmp_path_factory) -> dict[str, Path]:
    """The world, a BM25 index folder made by ``bm25-index`` (its marker file), the tiny dense index, ClimbMix
    folders with a shard clash and with a file without a number, and Tevatron pickles of 7-d vectors."""
    from hopscotch.retriever.cli import main

    root = tmp_path_factory.mktemp("bad_round2")
    assert main(["bm25-index", "--corpus", str(small_world / "corpus.jsonl"), "--out", str(root / "bm25")]) == 0
    clash, nonum = root / "clash", root / "nonum"
    for folder, names in ((clash, ("a_45.jsonl", "b_045.jsonl")), (nonum, ("part_00001.jsonl", "extra.jsonl"))):
        folder.mkdir()
        for name in names:
            (folder / name).write_text(json.dumps({"text": f"a document of {name}"}) + "\n")
    tev = root / "tev"
    tev.mkdir()
    with open(tev / "c.0.pkl", "wb") as fh:
        pickle.dump((np.ones((3, 7), np.float32), ["t1", "t2", "t3"]), fh)
    return {"w": small_world, "bm25": root / "bm25", "dense": small_world_index, "model": tiny_bert_dir,
            "clash": clash, "nonum": nonum, "tev": tev}


IX = "--corpus {w}/corpus.jsonl --model {model}"
S = "--queries {w}/queries.jsonl --out {out}/run.trec"
BM = "--bm25 {bm25} --corpus {w}/corpus.jsonl"
RP = "--runs {w}/traces.jsonl --no-plot --out {out}/r"

# (id, command line, what the one stderr line must name: each needle in it)
CASES = [
    # 1. the output boundary: another command's folder, special folders, a file where a folder goes
    ("index-into-bm25-folder", f"index {IX} --out {{bm25}}", ["{bm25}", "hopscotch bm25-index", "--overwrite"]),
    ("bm25-index-into-dense-index", "bm25-index --corpus {w}/corpus.jsonl --out {dense}",
     ["{dense}", "hopscotch index"]),
    ("world-into-bm25-folder", "world --docs 50 --questions 3 --out {bm25}", ["{bm25}", "hopscotch bm25-index"]),
    ("replay-into-dense-index", "replay --runs {w}/traces.jsonl --bm25 {bm25} --no-plot --out {dense}",
     ["{dense}", "hopscotch index"]),
    ("demo-into-bm25-folder", "demo --out {bm25}", ["{bm25}", "hopscotch bm25-index"]),
    ("export-prefix-dev-null", "index --out {dense} --export-tevatron /dev/null", ["/dev/null", "--export-tevatron"]),
    ("export-prefix-proc", f"index {IX} --out {{out}}/idx --export-tevatron /proc/hopscotch_x",
     ["/proc/hopscotch_x", "/proc"]),
    ("search-out-in-sys", f"search {BM} --queries {{w}}/queries.jsonl --out /sys/hopscotch_x/run.trec",
     ["/sys/hopscotch_x/run.trec", "lies in /sys"]),
    ("index-out-is-a-file", f"index {IX} --out {{w}}/corpus.jsonl", ["{w}/corpus.jsonl", "is a file"]),
    ("import-out-is-a-file", "index --import-tevatron {tev}/c.*.pkl --out {w}/queries.jsonl",
     ["{w}/queries.jsonl", "is a file"]),
    ("demo-out-is-a-file", "demo --out {w}/corpus.jsonl", ["{w}/corpus.jsonl", "is a file"]),
    # 2. ClimbMix shard numbers
    ("shard-clash", "bm25-index --corpus {clash} --out {out}/b", ["a_45.jsonl", "b_045.jsonl", "shard 45"]),
    ("shard-clash-index", "index --corpus {clash} --model {model} --out {out}/idx", ["b_045.jsonl"]),
    ("shard-without-number", "bm25-index --corpus {nonum} --out {out}/b", ["{nonum}/extra.jsonl", "shard number"]),
    # 3. plans and settings that cannot work
    ("plan-ivf0", "index --plan --docs 100 --dim 384 --spec IVF0,PQ64", ["IVF0,PQ64", "at least 1 list"]),
    ("build-ivf0", f"index {IX} --out {{out}}/idx --spec IVF0,Flat", ["IVF0,Flat"]),
    ("plan-nlist-over-docs", "index --plan --docs 100 --dim 384 --spec IVF4096,PQ64",
     ["IVF4096,PQ64", "at least 4096 training vectors", "100 documents"]),
    ("plan-pq-over-docs", "index --plan --docs 100 --dim 384 --spec IVF2,PQ64", ["IVF2,PQ64", "at least 256"]),
    ("plan-train-size", "index --plan --docs 100000 --dim 384 --spec IVF1024,Flat --train-size 500",
     ["--train-size 500", "1024"]),
    ("build-train-size", f"index {IX} --out {{out}}/idx --spec IVF4,PQ8 --train-size 100",
     ["--train-size 100", "256"]),
    ("stride-over-window", f"index {IX} --out {{out}}/idx --window-stride 500 --max-length 32",
     ["--window-stride 500", "--max-length 32"]),
    ("plan-stride-over-window", f"index --plan {IX} --windows 4 --window-stride 500 --max-length 32",
     ["--window-stride 500"]),
    ("tevatron-dim-mismatch", "index --import-tevatron {tev}/c.*.pkl --model {model} --out {out}/idx",
     ["c.0.pkl", "7-d", "32-d"]),
    # 4. flags the selected searcher does not use
    *[(f"bm25-only{flag.split()[0]}", f"search {S} {BM} {flag}", [flag.split()[0], "bm25 searcher"])
      for flag in ("--fusion-config {w}/none.json", "--query-mix 0.5", "--normalization zscore", "--alpha 0.3",
                   "--rrf-k 5", "--adapt 1", "--depth 50", "--nprobe 4")],
    ("dense-only--alpha", f"search {S} --index {{dense}} --alpha 0.3", ["--alpha", "dense searcher"]),
    ("remote--bm25", f"search {S} --url http://127.0.0.1:9 --bm25 {{bm25}} --searcher-type remote",
     ["--bm25", "remote searcher"]),
    ("replay-bm25--rrf-k", f"replay {RP} --searcher bm25 --bm25 {{bm25}} --rrf-k 5", ["--rrf-k", "bm25 searcher"]),
]


@pytest.mark.parametrize(("line", "needles"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_refused_with_one_line_and_nothing_written(line, needles, paths, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    inputs = [paths[k] for k in ("w", "bm25", "dense", "model", "clash", "nonum", "tev")]
    before = tree_digest(*inputs)
    beside = {p: sorted(p.parent.iterdir()) for p in (paths["bm25"], paths["dense"])}  # no sidecar or temp beside
    code, _, err = run_main(capsys, argv_of(line, paths, out))
    assert_refused(code, err, needles[0].format(**paths))
    for needle in needles[1:]:
        assert needle.format(**paths) in err, f"{needle!r} not in {err!r}"
    assert tree_digest(*inputs) == before, "an input changed"
    assert sorted(p.name for p in out.rglob("*")) == [], "stray files in the output folder"
    assert {p: sorted(p.parent.iterdir()) for p in beside} == beside
    assert not list(Path("/dev").glob("null.*")) and not Path("/proc/hopscotch_x.0.pkl").exists()


def test_the_same_commands_work_where_they_should(paths, tmp_path, capsys):
    """The guards refuse only what cannot work: an own resumable folder, --overwrite, a numbered ClimbMix
    folder, a plan that fits and BM25 flags on BM25 are still fine."""
    from hopscotch.retriever.io.corpus import corpus_files, read_corpus

    for name in ("b_045.jsonl",):
        (paths["clash"] / name).rename(tmp_path / name)  # the clash gone: a_45.jsonl alone is shard 45
    try:
        assert [d.docid for d in read_corpus(paths["clash"])] == ["shard_00045_0"]
    finally:
        (tmp_path / "b_045.jsonl").rename(paths["clash"] / "b_045.jsonl")
    single = tmp_path / "part_00012.jsonl"
    single.write_text(json.dumps({"text": "x"}) + "\n")
    assert corpus_files(single) == [(12, single)] and corpus_files(paths["w"])[0][0] == 0
    plan = "index --plan --docs 100000 --dim 384 --spec IVF1024,PQ64"
    code, _, err = run_main(capsys, argv_of(plan, paths, tmp_path))
    assert code == 0, err
    code, _, err = run_main(capsys, argv_of(f"search {S} {BM} --k 5", paths, tmp_path))
    assert code == 0, err
    copy = tmp_path / "bm25copy"
    copy.mkdir()
    (copy / "hopscotch_bm25.json").write_text("{}")
    code, _, err = run_main(capsys, argv_of(f"index {IX} --out {copy} --max-length 32 --overwrite", paths, tmp_path))
    assert code == 0, err  # --overwrite: the user asked to write into it
    code, _, err = run_main(capsys, argv_of(f"index {IX} --out {copy} --max-length 32", paths, tmp_path))
    assert code == 0, err  # its own resumable index now (it also holds the other marker: its own count)


def test_folder_markers_are_the_owners_names():
    from hopscotch.retriever.commands.demo_pipeline import STAGES_FILE
    from hopscotch.retriever.commands.replay import REPLAY_FILES
    from hopscotch.retriever.commands.world import WORLD_FILES
    from hopscotch.retriever.index import bm25, layout
    from hopscotch.retriever.io.outputs import FOLDER_MARKERS
    from hopscotch.retriever.model.config import HOPSCOTCH_CONFIG
    from hopscotch.retriever.training.preflight import MANIFEST_FILE

    assert FOLDER_MARKERS["index"] == (layout.META_FILE, layout.ENCODE_CONFIG_FILE, layout.SHARD_DIR)
    assert FOLDER_MARKERS["bm25-index"] == (bm25.META_FILE,)
    assert set(FOLDER_MARKERS["world"]) <= set(WORLD_FILES) and set(FOLDER_MARKERS["replay"]) <= set(REPLAY_FILES)
    assert FOLDER_MARKERS["demo"] == (STAGES_FILE,) and FOLDER_MARKERS["train"] == (MANIFEST_FILE, HOPSCOTCH_CONFIG)
