"""Issue 14 item 7: every command on malformed input exits 2 with one stderr line naming the file or flag.

One table runs every ``hopscotch`` command (world, bm25-index, index, search, eval, compare, tune-fusion,
synth, train, serve (argument errors only), eval-agent, replay, demo) on non-UTF-8 files, truncated gzip,
bad JSON lines, missing files, bad numbers (0, -1, nan, huge) and bad metric strings, in-process through
``hopscotch.retriever.cli.main``. Each case checks: exit code 2, exactly one stderr line holding the
offending file name or flag, no traceback, the inputs byte-identical afterwards, and nothing left in the
case's output folder. Huge ``k`` and ``--max-length`` are clamped instead (exit 0 and a one-line note).
Two cases run as subprocesses (the ``ndcg@0`` that once aborted the process inside trec_eval, and a
damaged index shard).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HUGE = str(10**12)
NON_UTF8 = b'{"_id": "d1", "text": "caf\xe9 cr\xe8me"}\n'


def _truncated_gzip(text: str) -> bytes:
    data = gzip.compress(text.encode())
    return data[: len(data) // 2]


@pytest.fixture(scope="module")
def paths(small_world, small_world_index, tiny_bert_dir, tmp_path_factory) -> dict[str, Path]:
    """The inputs every case reads: the world, a BM25 index, the tiny dense index, two runs and their eval
    results, and a folder of malformed files; built once for the module."""
    from hopscotch.retriever.cli import main
    from hopscotch.retriever.index.bm25 import BM25Index
    from hopscotch.retriever.io.corpus import read_corpus
    from hopscotch.retriever.io.queries import read_queries
    from hopscotch.retriever.io.runs import write_run

    root = tmp_path_factory.mktemp("bad_suite")
    bm25_dir = root / "bm25"
    index = BM25Index.build(read_corpus(small_world / "corpus.jsonl"), show_progress=False)
    index.save(bm25_dir)
    runs = root / "runs"
    runs.mkdir()
    queries = list(read_queries(small_world / "queries.jsonl"))
    hits = index.search([q.text for q in queries], k=50)
    write_run(runs / "bm25.trec", {q.qid: dict(h) for q, h in zip(queries, hits)})
    write_run(runs / "other.trec", {q.qid: dict(h[::-1]) for q, h in zip(queries, hits)})
    for name in ("bm25", "other"):
        assert main(["eval", "--run", str(runs / f"{name}.trec"), "--qrels", str(small_world / "qrels.tsv"),
                     "--json", str(runs / f"{name}.json")]) == 0
    damaged = root / "damaged_index"
    shutil.copytree(small_world_index, damaged)
    emb = sorted((damaged / "shards").glob("*.emb.npy"))[1]
    emb.write_bytes(emb.read_bytes()[:1000])
    bad = root / "bad"
    bad.mkdir()
    good_lines = (small_world / "corpus.jsonl").read_text().splitlines()[:3]
    (bad / "latin1.jsonl").write_bytes(NON_UTF8)
    (bad / "latin1.trec").write_bytes(b"q1 Q0 caf\xe9 1 1.0 t\n")
    (bad / "latin1.tsv").write_bytes(b"query-id\tcorpus-id\tscore\nq\xe9\td1\t1\n")
    (bad / "latin1.json").write_bytes(b'{"manifest": "caf\xe9"}')
    (bad / "latin1.yaml").write_bytes(b"model:\n  name: caf\xe9\n")
    (bad / "cut.jsonl.gz").write_bytes(_truncated_gzip("\n".join(good_lines * 2000) + "\n"))
    (bad / "cut.trec.gz").write_bytes(_truncated_gzip("".join(f"q1 Q0 d{i} 1 {i}.5 t\n" for i in range(4000))))
    (bad / "badline.jsonl").write_text(good_lines[0] + "\n" + '{"_id": "x", "text": \n')
    (bad / "badline.json").write_text('{"manifest": {"command": "eval"}, "per_query": {')
    return {"w": small_world, "bm25": bm25_dir, "dense": small_world_index, "damaged": damaged, "runs": runs,
            "bad": bad, "model": tiny_bert_dir}


S = "--queries {w}/queries.jsonl --out {out}/run.trec"  # search's own flags
BM = "--bm25 {bm25} --corpus {w}/corpus.jsonl"
E = "--run {runs}/bm25.trec --qrels {w}/qrels.tsv"
TF = "--sparse {runs}/bm25.trec --dense {runs}/other.trec --qrels {w}/qrels.tsv --out {out}/t.json"
SY = "--qa {w} --traces {w}/traces.jsonl --out {out}/t.jsonl"
RP = "--runs {w}/traces.jsonl --bm25 {bm25} --corpus {w}/corpus.jsonl --no-plot --out {out}/r"
IX = "--corpus {w}/corpus.jsonl --model {model} --out {out}/idx"
CMP = "{runs}/bm25.json {runs}/other.json --json {out}/c.json"
TRAIN_RECIPE = str(Path(__file__).resolve().parents[3] / "recipes" / "minilm_hotpot.yaml")

# (command line, what the one stderr line must name); "id" is the first words
CASES = [
    # audit
    ("audit contamination --tuples {bad}/missing.jsonl --eval dev={w}", "missing.jsonl"),
    ("audit contamination --tuples {bad}/badline.jsonl --eval dev={w}", "badline.jsonl:1"),
    ("audit contamination --queries {w}/queries.jsonl --eval dev={w} --threshold 1.5", "--threshold"),
    ("audit near-duplicates --corpus {bad}/latin1.jsonl --out {out}/g.jsonl", "latin1.jsonl"),
    ("audit near-duplicates --corpus {w}/corpus.jsonl --out {out}/g.jsonl --threshold nan", "--threshold"),
    ("audit false-negatives --tuples {bad}/missing.jsonl", "missing.jsonl"),
    ("audit perturbation --queries {bad}/latin1.jsonl --qrels {w}/qrels.tsv --bm25 {bm25}", "latin1.jsonl"),
    ("audit ann-fidelity --index {dense} --queries {w}/queries.jsonl --k 0", "--k"),
    ("audit model {bad}", "not a model folder"),
    # world
    ("world --out {out}/w --docs 0", "--docs"), ("world --out {out}/w --docs -1", "--docs"),
    ("world --out {out}/w --docs nan", "--docs"), (f"world --out {{out}}/w --docs {HUGE}", "--docs"),
    ("world --out {out}/w --questions 0", "--questions"), ("world --out {out}/w --seed -1", "--seed"),
    # bm25-index
    ("bm25-index --corpus {bad}/missing.jsonl --out {out}/b", "missing.jsonl"),
    ("bm25-index --corpus {bad}/latin1.jsonl --out {out}/b", "latin1.jsonl"),
    ("bm25-index --corpus {bad}/cut.jsonl.gz --out {out}/b", "cut.jsonl.gz"),
    ("bm25-index --corpus {bad}/badline.jsonl --out {out}/b", "badline.jsonl:2"),
    ("bm25-index --corpus {w}/corpus.jsonl --out {out}/b --k1 nan", "--k1"),
    ("bm25-index --corpus {w}/corpus.jsonl --out {out}/b --b 1.5", "--b"),
    # index
    (f"index {IX} --max-length 0", "--max-length"), (f"index {IX} --batch-size -1", "--batch-size"),
    (f"index {IX} --shard-size 0", "--shard-size"), (f"index {IX} --wait-timeout nan", "--wait-timeout"),
    (f"index {IX} --device nonsense", "--device"),
    ("index --plan --dim 384 --docs 0", "--docs"), ("index --plan --docs 10 --dim 384 --gpus 0", "--gpus"),
    ("index --plan --docs 10 --dim 384 --windows-per-doc -1", "--windows-per-doc"),
    ("index --corpus {bad}/missing.jsonl --model {model} --out {out}/idx", "missing.jsonl"),
    ("index --corpus {bad}/latin1.jsonl --model {model} --out {out}/idx", "latin1.jsonl"),
    # search
    (f"search {S} {BM} --k 0", "--k"), (f"search {S} {BM} --k -1", "--k"), (f"search {S} {BM} --k nan", "--k"),
    (f"search {S} {BM} --batch-size 0", "--batch-size"),
    (f"search {S} --index {{dense}} --nprobe -1", "--nprobe"), (f"search {S} --index {{dense}} --refine 0", "--refine"),
    (f"search {S} --index {{dense}} --ef-search 0", "--ef-search"),
    (f"search {S} --bm25 {{bm25}} --index {{dense}} --alpha nan", "--alpha"),
    (f"search {S} --bm25 {{bm25}} --index {{dense}} --normalization l2", "--normalization"),
    (f"search {S} --bm25 {{bm25}} --index {{dense}} --fusion rrf --normalization minmax", "--normalization minmax applies"),
    (f"search {S} --bm25 {{bm25}} --index {{dense}} --depth 0", "--depth"),
    (f"search {S} --bm25 {{bm25}} --index {{dense}} --rrf-k -1", "--rrf-k"),
    (f"search --queries {{bad}}/missing.jsonl --out {{out}}/run.trec {BM}", "missing.jsonl"),
    (f"search --queries {{bad}}/latin1.jsonl --out {{out}}/run.trec {BM}", "latin1.jsonl"),
    (f"search --queries {{bad}}/badline.jsonl --out {{out}}/run.trec {BM}", "badline.jsonl:2"),
    (f"search --queries {{bad}}/cut.jsonl.gz --out {{out}}/run.trec {BM}", "cut.jsonl.gz"),
    (f"search {S} --index {{damaged}}", "emb.npy"),
    # eval
    (f"eval {E} --metrics ndcg@0", "ndcg@0"), (f"eval {E} --metrics=", "--metrics"),
    (f"eval {E} --metrics ndcg@-1", "ndcg@-1"), (f"eval {E} --metrics foo@10", "foo@10"),
    (f"eval {E} --metrics ndcg@nan", "ndcg@nan"), (f"eval {E} --metrics recall@{HUGE}", "--metrics"),
    (f"eval {E} --near-duplicates-min-jaccard nan", "--near-duplicates-min-jaccard"),
    ("eval --run {bad}/missing.trec --qrels {w}/qrels.tsv", "missing.trec"),
    ("eval --run {bad}/latin1.trec --qrels {w}/qrels.tsv", "latin1.trec"),
    ("eval --run {bad}/cut.trec.gz --qrels {w}/qrels.tsv", "cut.trec.gz"),
    ("eval --run {runs}/bm25.trec --qrels {bad}/latin1.tsv", "latin1.tsv"),
    # compare
    (f"compare {CMP} --permutations 0", "--permutations"), (f"compare {CMP} --permutations -1", "--permutations"),
    (f"compare {CMP} --permutations {HUGE}", "--permutations"), (f"compare {CMP} --metric ndcg@0", "ndcg@0"),
    ("compare {bad}/missing.json {runs}/other.json", "missing.json"),
    ("compare {bad}/latin1.json {runs}/other.json", "latin1.json"),
    ("compare {bad}/badline.json {runs}/other.json", "badline.json"),
    # tune-fusion
    (f"tune-fusion {TF} --k 0", "--k"), (f"tune-fusion {TF} --depth -1", "--depth"),
    (f"tune-fusion {TF} --dev-fraction nan", "--dev-fraction"), (f"tune-fusion {TF} --alphas 0.5,nan", "--alphas"),
    (f"tune-fusion {TF} --alphas 2", "--alphas"),
    (f"tune-fusion {TF} --normalizations l2", "--normalizations"), (f"tune-fusion {TF} --rrf-ks -5", "--rrf-ks"),
    (f"tune-fusion {TF} --metric ndcg@0", "ndcg@0"), (f"tune-fusion {TF} --min-gain inf", "--min-gain"),
    (f"tune-fusion {TF} --seed -1", "--seed"),
    ("tune-fusion --sparse {bad}/latin1.trec --dense {runs}/other.trec --qrels {w}/qrels.tsv", "latin1.trec"),
    ("tune-fusion --sparse {runs}/bm25.trec --dense {bad}/missing.trec --qrels {w}/qrels.tsv", "missing.trec"),
    # synth
    (f"synth {SY} --depth 0", "--depth"), (f"synth {SY} --workers 0", "--workers"),
    (f"synth {SY} --workers {HUGE}", "--workers"), (f"synth {SY} --near-duplicate nan", "--near-duplicate"),
    (f"synth {SY} --negatives -1", "--negatives"), (f"synth {SY} --llm-timeout 0", "--llm-timeout"),
    (f"synth {SY} --oracle-weights gold=nan", "--oracle-weights"), (f"synth {SY} --seed -1", "--seed"),
    ("synth --qa {bad}/missing --traces {w}/traces.jsonl --out {out}/t.jsonl", "missing"),
    ("synth --qa {w} --traces {bad}/badline.jsonl --out {out}/t.jsonl", "badline.jsonl"),
    ("synth --qa {w} --traces {bad}/latin1.jsonl --out {out}/t.jsonl", "latin1.jsonl"),
    # train
    ("train --recipe {bad}/missing.yaml --output {out}/t", "missing.yaml"),
    ("train --recipe {bad}/latin1.yaml --output {out}/t", "latin1.yaml"),
    (f"train --recipe {TRAIN_RECIPE} --output {{out}}/t train.lr=nan", "train.lr"),
    (f"train --recipe {TRAIN_RECIPE} --output {{out}}/t train.batch_size=0", "train.batch_size"),
    (f"train --recipe {TRAIN_RECIPE} --output {{out}}/t data.train={{bad}}/missing.jsonl", "missing.jsonl"),
    # serve: argument errors only (nothing is served)
    ("serve --bm25-index {bm25} --corpus {w}/corpus.jsonl --port -1", "--port"),
    ("serve --bm25-index {bm25} --corpus {w}/corpus.jsonl --max-batch 0", "--max-batch"),
    ("serve --bm25-index {bm25} --corpus {w}/corpus.jsonl --searcher nope", "--searcher"),
    ("serve --index {dense} --nprobe -1", "--nprobe"),
    # eval-agent
    ("eval-agent --runs {bad}/missing.jsonl --qrels {w}/qrels.tsv", "missing.jsonl"),
    ("eval-agent --runs {bad}/badline.jsonl --qrels {w}/qrels.tsv", "badline.jsonl"),
    ("eval-agent --runs {bad}/latin1.jsonl --qrels {w}/qrels.tsv", "latin1.jsonl"),
    ("eval-agent --runs {w}/traces.jsonl --qrels {bad}/latin1.tsv", "latin1.tsv"),
    ("eval-agent --runs {w}/traces.jsonl --qrels {w}/qrels.tsv --near-duplicates-min-jaccard 2",
     "--near-duplicates-min-jaccard"),
    # replay
    (f"replay {RP} --k 0", "--k"), (f"replay {RP} --k {HUGE}", "--k"),
    (f"replay {RP} --permutations 0", "--permutations"),
    (f"replay {RP} --batch-size -1", "--batch-size"),
    ("replay --runs {bad}/missing.jsonl --bm25 {bm25} --no-plot --out {out}/r", "missing.jsonl"),
    ("replay --runs {bad}/badline.jsonl --bm25 {bm25} --no-plot --out {out}/r", "badline.jsonl"),
    ("replay --runs {bad}/latin1.jsonl --bm25 {bm25} --no-plot --out {out}/r", "latin1.jsonl"),
    (f"replay {RP} --qrels {{bad}}/latin1.tsv", "latin1.tsv"),
    # demo
    ("demo --out {out}/d --docs 0", "--docs"), ("demo --out {out}/d --docs -1", "--docs"),
    ("demo --out {out}/d --docs nan", "--docs"), (f"demo --out {{out}}/d --docs {HUGE}", "--docs"),
    ("demo --out {out}/d --questions 0", "--questions"), ("demo --out {out}/d --train-steps 0", "--train-steps"),
    ("demo --out {out}/d --seed -1", "--seed"),
]


def _case_id(case) -> str:
    """``command-badfile`` or ``command-lastflag-value``."""
    words = (case.values[0] if hasattr(case, "values") else case[0]).split()
    bad = [w.rsplit("/", 1)[-1] for w in words if w.startswith("{bad}")]
    if bad:
        return f"{words[0]}-{bad[0]}"
    last = max(i for i, w in enumerate(words) if w.startswith("--") or "=" in w)
    return "-".join(words[:1] + words[last:last + 2])


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


@pytest.mark.parametrize(("line", "needle"), CASES, ids=[_case_id(c) for c in CASES])
def test_malformed_input_exits_2_with_one_line(line, needle, paths, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    inputs = [paths[k] for k in ("w", "bm25", "dense", "damaged", "runs", "bad", "model")]
    before = tree_digest(*inputs)
    code, _, err = run_main(capsys, argv_of(line, paths, out))
    assert_refused(code, err, needle)
    assert tree_digest(*inputs) == before, "an input changed"
    assert sorted(p.name for p in out.rglob("*")) == [], "stray files in the output folder"


def test_the_case_table_covers_every_command():
    from hopscotch.retriever.cli import COMMAND_MODULES

    commands = {(c.values[0] if hasattr(c, "values") else c[0]).split()[0] for c in CASES}
    assert commands == {name.replace("_", "-") for name in COMMAND_MODULES}


def test_device_cuda_without_cuda_is_refused(paths, tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    code, _, err = run_main(capsys, argv_of(f"index {IX} --device cuda", paths, tmp_path))
    assert_refused(code, err, "--device cuda")
    assert "CUDA is not available" in err and not (tmp_path / "idx").exists()


def test_huge_k_is_clamped_to_the_index_with_a_note(paths, tmp_path, capsys):
    for name, flags in (("bm25", BM), ("dense", "--index {dense}")):
        run = tmp_path / f"{name}.trec"
        argv = argv_of(f"search --queries {{w}}/queries.jsonl --out {run} {flags} --k 1000000000", paths, tmp_path)
        code, _, err = run_main(capsys, argv)
        assert code == 0, err
        assert "--k 1000000000 > 300 documents: using 300" in err
        per_query = {}
        for row in run.read_text().splitlines():
            per_query[row.split()[0]] = per_query.get(row.split()[0], 0) + 1
        assert max(per_query.values()) <= 300


def test_huge_max_length_is_clamped_to_the_model_positions(paths, tmp_path, capsys):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"_id": f"d{i}", "text": " ".join(["word"] * 900)}) + "\n"
                              for i in range(3)))
    argv = ["index", "--corpus", str(corpus), "--model", str(paths["model"]), "--out", str(tmp_path / "idx"),
            "--max-length", "100000"]
    code, _, err = run_main(capsys, argv)
    assert code == 0, err
    assert "--max-length 100000 > the model's 512 positions: using 512" in err
    assert json.loads((tmp_path / "idx" / "index.json").read_text())["max_length"] == 512


@pytest.mark.parametrize(("line", "needle"), [
    ("eval --run {runs}/bm25.trec --qrels {w}/qrels.tsv --metrics ndcg@0", "ndcg@0"),
    ("search --queries {w}/queries.jsonl --out {out}/run.trec --index {damaged}", "emb.npy"),
], ids=["eval-ndcg@0", "search-damaged-shard"])
def test_subprocess_exits_2_without_traceback(line, needle, paths, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.run([sys.executable, "-m", "hopscotch.retriever.cli", *argv_of(line, paths, out)],
                          check=False, capture_output=True, text=True, timeout=1800)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(lines) == 1 and needle in lines[0], lines
    assert list(out.iterdir()) == []


def test_a_damaged_shard_is_one_error_naming_the_file(paths, tmp_path, capsys):
    """The error line itself names the damaged shard file."""
    argv = argv_of(f"search {S} --index {{damaged}}", paths, tmp_path)
    code, _, err = run_main(capsys, argv)
    last = err.strip().splitlines()[-1]
    assert code == 2 and "Traceback" not in err and not (tmp_path / "run.trec").exists()
    assert last.startswith("hopscotch search: error: ") and "shard_00001.emb.npy" in last


@pytest.mark.parametrize("damage", ["truncated", "header-only", "empty", "garbage", "missing"])
def test_load_shard_files_refuse_a_damaged_file(small_world_index, tmp_path, damage):
    from hopscotch.retriever.errors import FormatError
    from hopscotch.retriever.index.layout import load_shard_embeddings, load_shard_ids

    index = tmp_path / "idx"
    shutil.copytree(small_world_index, index)
    for name, load in (("emb", load_shard_embeddings), ("ids", load_shard_ids)):
        path = index / "shards" / f"shard_00000.{name}.npy"
        data = path.read_bytes()
        damaged = {"truncated": data[: len(data) - 40], "header-only": data[:60], "empty": b"",
                   "garbage": b"not a numpy file\n" * 10, "missing": None}[damage]
        if damaged is None:
            path.unlink()
        else:
            path.write_bytes(damaged)
        for mmap in (True, False):
            with pytest.raises(FormatError) as exc:
                load(index, 0, mmap=mmap)
            assert str(path) in str(exc.value) and "\n" not in str(exc.value)
    assert load_shard_embeddings(index, 1).shape[0] == 64  # the other shards still load
