"""The CLI end to end on a small world: world -> bm25-index -> search -> eval, and its error contract."""

from __future__ import annotations

import json
import subprocess
import sys

from hopscotch.retriever.io.runs import read_run


def test_world_bm25_eval_end_to_end(tmp_path, cli):
    world = tmp_path / "world"
    code, out, _ = cli("world", "--out", world, "--docs", 300, "--questions", 30, "--seed", 3)
    assert code == 0 and "300 documents" in out
    code, _, _ = cli("bm25-index", "--corpus", world / "corpus.jsonl", "--out", tmp_path / "bm25")
    assert code == 0 and (tmp_path / "bm25" / "docids.txt").exists()
    # a BM25 run written by the library, evaluated through the CLI
    from hopscotch.retriever.index.bm25 import BM25Index
    from hopscotch.retriever.io.queries import read_queries
    from hopscotch.retriever.io.runs import write_run

    index = BM25Index.load(tmp_path / "bm25")
    qs = list(read_queries(world / "queries.jsonl"))
    write_run(tmp_path / "bm25.trec", {q.qid: dict(h) for q, h in zip(qs, index.search([q.text for q in qs], k=100))})
    assert set(read_run(tmp_path / "bm25.trec")) == {q.qid for q in qs}
    code, out, _ = cli("eval", "--run", tmp_path / "bm25.trec", "--qrels", world / "qrels.tsv",
                       "--metrics", "ndcg@10,recall@100,mrr@10", "--json", tmp_path / "m.json",
                       "--compare", tmp_path / "bm25.trec")
    assert code == 0 and "ndcg@10" in out and "paired comparison" in out
    report = json.loads((tmp_path / "m.json").read_text())
    assert set(report["metrics"]) == {"ndcg@10", "recall@100", "mrr@10"}
    assert 0 < report["metrics"]["recall@100"] <= 1
    assert set(report["per_query"]) == {q.qid for q in qs}
    assert report["compare"]["tests"]["ndcg@10"]["delta"] == 0


def test_malformed_input_is_one_line_and_exit_2(tmp_path, cli):
    bad = tmp_path / "run.trec"
    bad.write_text("q1 Q0 d1 1 0.5 t\nq1 Q0 d2\n")
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    code, out, err = cli("eval", "--run", bad, "--qrels", qrels)
    assert code == 2
    assert err.count("\n") == 1 and "run.trec:2" in err and "Traceback" not in err


def test_subprocess_error_has_no_traceback(tmp_path):
    bad = tmp_path / "corpus.jsonl"
    bad.write_text('{"_id": "a", "text": "ok"}\n{"_id": "b"}\n')
    proc = subprocess.run([sys.executable, "-m", "hopscotch.retriever.cli", "bm25-index", "--corpus", str(bad), "--out",
                           str(tmp_path / "idx")], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "corpus.jsonl:2" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "idx").exists()


def test_unknown_flag_exits_2(cli, capsys):
    import pytest

    with pytest.raises(SystemExit) as exc:
        cli("eval", "--nope")
    assert exc.value.code == 2


def test_reasoning_aware_queries_keep_the_query_when_reasoning_is_long(tiny_bert_dir):
    from hopscotch.retriever.model.dense_encoder import DenseEncoder
    from hopscotch.retriever.model.query_template import format_query

    enc = DenseEncoder(str(tiny_bert_dir), max_length=32)
    long_reasoning = " ".join(f"step{i} thought" for i in range(200))
    got = enc.encode_queries(["who directed Gummo"], [long_reasoning], reasoning_aware=True)
    # the same embedding as encoding the kept tail of the reasoning directly
    tok = enc.model.tokenizer
    from hopscotch.retriever.model.query_template import format_query_truncated

    text = format_query_truncated(tok, 32, "who directed Gummo", long_reasoning)
    assert text.endswith("Query: who directed Gummo") and len(tok(text)["input_ids"]) <= 32
    assert abs(enc.encode_texts([text]) - got).max() < 1e-5
    assert format_query("q", None) == "Reasoning: Empty\n\nQuery: q"


def test_every_option_of_every_subcommand_has_help_text():
    import argparse

    from hopscotch.retriever.cli import build_parser

    missing = []
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, parser in action.choices.items():
                missing += [f"{name} {'/'.join(a.option_strings) or a.dest}" for a in parser._actions
                            if not a.help and not isinstance(a, argparse._HelpAction)]
    assert not missing, missing


def test_version_names_the_installed_distribution():
    import subprocess
    import sys
    from importlib.metadata import version

    out = subprocess.run([sys.executable, "-m", "hopscotch.retriever.cli", "--version"], capture_output=True,
                         text=True, timeout=1800)
    assert out.returncode == 0 and out.stdout.strip() == f"hopscotch {version('hopscotch')}", out.stdout + out.stderr


def test_help_loads_no_heavy_package():
    """``hopscotch --help`` builds every command's parser without loading a model library: the imports that would
    (tests/test_architecture.py's ``HEAVY_IMPORTS``) stay inside the functions that need them."""
    import subprocess
    import sys

    code = ("import sys\n"
            "from hopscotch.retriever.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "heavy = ('torch', 'transformers', 'sentence_transformers', 'faiss', 'bm25s', 'numba', 'scipy', 'triton')\n"
            "print(sorted(m for m in heavy if m in sys.modules), file=sys.stderr)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and proc.stderr.strip().splitlines()[-1] == "[]", proc.stderr[-2000:]
