"""Tevatron both ways through the CLI: ``index --export-tevatron`` / ``--import-tevatron`` (the pickles an
imported index searches exactly like the original; crafted pickles refused, unrun) and ``synth
--query-format agentir`` (the reasoning inside Tevatron's ``query`` field)."""

from __future__ import annotations

import json
import os
import pickle
import shutil

import numpy as np
import pytest

from hopscotch.retriever.index.docstore import DocStore
from hopscotch.retriever.index.layout import IndexMeta, iter_shard_docids, load_shard_embeddings
from hopscotch.retriever.io.tevatron import read_tevatron_pickle


def _all(index_dir):
    meta = IndexMeta.load(index_dir)
    emb = np.concatenate([np.asarray(load_shard_embeddings(index_dir, s), np.float32) for s in range(meta.num_shards)])
    ids = [d for s in range(meta.num_shards) for d in iter_shard_docids(index_dir, s)]
    return meta, emb, ids


@pytest.fixture(scope="module")
def exported(small_world_index, tmp_path_factory):
    """The small world's index exported as Tevatron pickles; returns their prefix."""
    from hopscotch.retriever.cli import main

    prefix = tmp_path_factory.mktemp("tevatron") / "corpus"
    assert main(["index", "--out", str(small_world_index), "--export-tevatron", str(prefix)]) == 0
    return prefix


def test_export_writes_one_tevatron_pickle_per_shard(small_world_index, exported):
    meta, emb, ids = _all(small_world_index)
    files = sorted(exported.parent.glob("corpus.*.pkl"), key=lambda p: int(p.name.split(".")[1]))
    assert [p.name for p in files] == [f"corpus.{i}.pkl" for i in range(meta.num_shards)]
    reps, lookup = [], []
    for f in files:
        with open(f, "rb") as fh:  # exactly what Tevatron's search driver does
            r, lk = pickle.load(fh)
        assert r.dtype == np.float32 and isinstance(lk, list) and all(isinstance(d, str) for d in lk)
        safe = read_tevatron_pickle(f)  # and what the restricted reader loads
        assert np.array_equal(safe.reps, r) and safe.docids == lk
        reps.append(r)
        lookup += lk
    assert np.array_equal(np.concatenate(reps), emb) and lookup == ids


def test_import_searches_like_the_original(cli, small_world, small_world_index, tiny_bert_dir, exported, tmp_path):
    from hopscotch.retriever.searchers.dense import DenseSearcher

    out = tmp_path / "imported"
    code, stdout, err = cli("index", "--import-tevatron", f"{exported}.*.pkl", "--out", out, "--corpus",
                            small_world / "corpus.jsonl", "--model", tiny_bert_dir, "--max-length", "64",
                            "--shard-size", "100")  # re-cut: the export has shards of 64
    assert code == 0, err
    assert "300 documents" in stdout and "Tevatron pickles" in stdout
    meta, emb, ids = _all(out)
    orig_meta, orig_emb, orig_ids = _all(small_world_index)
    assert (meta.num_docs, meta.num_shards, meta.shard_size, meta.dim) == (300, 3, 100, orig_meta.dim)
    assert ids == orig_ids and np.array_equal(emb, orig_emb) and meta.docstore
    doc = DocStore(out).get(ids[123])
    assert doc is not None and doc.text and doc.text == DocStore(small_world_index).get(ids[123]).text
    queries = [json.loads(line)["text"] for line in (small_world / "queries.jsonl").read_text().splitlines()[:5]]
    a, b = DenseSearcher(small_world_index), DenseSearcher(out)
    for q in queries:
        got, want = b.search(q, k=10), a.search(q, k=10)
        assert [h["docid"] for h in got] == [h["docid"] for h in want]
        assert np.allclose([h["score"] for h in got], [h["score"] for h in want], atol=1e-5)
    # the same folder again: refused without --overwrite, replaced with it
    code, _, err = cli("index", "--import-tevatron", f"{exported}.*.pkl", "--out", out)
    assert code == 2 and "already holds an index" in err.splitlines()[-1]  # (earlier lines: the searchers' loading)
    code, stdout, err = cli("index", "--import-tevatron", f"{exported}.*.pkl", "--out", out, "--overwrite",
                            "--shard-size", "70")
    assert code == 0, err
    meta, emb, ids = _all(out)
    assert (meta.num_shards, meta.shard_rows(4)) == (5, 20) and ids == orig_ids and np.array_equal(emb, orig_emb)
    assert not meta.docstore and meta.model == "" and "search --model" in stdout
    # an encode run into an imported folder is refused, not mixed with the imported shards
    code, _, err = cli("index", "--corpus", small_world / "corpus.jsonl", "--model", tiny_bert_dir, "--out", out)
    assert code == 2 and "different settings" in err


def test_import_errors(cli, small_world, exported, tmp_path):
    code, _, err = cli("index", "--import-tevatron", tmp_path / "none.*.pkl", "--out", tmp_path / "o")
    assert code == 2 and "no file matches" in err
    docs = tmp_path / "partial.jsonl"
    docs.write_text(json.dumps({"docid": "other", "text": "x"}) + "\n")
    code, _, err = cli("index", "--import-tevatron", f"{exported}.0.pkl", "--out", tmp_path / "p", "--corpus", docs)
    assert code == 2 and "every docid of the pickles" in err
    shutil.copy(f"{exported}.0.pkl", tmp_path / "mixed.0.pkl")
    with open(tmp_path / "mixed.1.pkl", "wb") as fh:
        pickle.dump((np.zeros((2, 7), np.float32), ["w1", "w2"]), fh)
    code, _, err = cli("index", "--import-tevatron", f"{tmp_path}/mixed.*.pkl", "--out", tmp_path / "q")
    assert code == 2 and "mixed.1.pkl: expected 32-d reps like" in err
    code, _, err = cli("index", "--export-tevatron", tmp_path / "x")
    assert code == 2 and "need --out" in err


class _Exploit:
    def __init__(self, command: str):
        self.command = command

    def __reduce__(self):
        return os.system, (self.command,)


def test_import_refuses_a_malicious_pickle_without_running_it(cli, tmp_path):
    marker = tmp_path / "pwned"
    with open(tmp_path / "corpus.0.pkl", "wb") as fh:
        pickle.dump((np.zeros((2, 4), np.float32), ["a", _Exploit(f"touch {marker}")]), fh)
    code, _, err = cli("index", "--import-tevatron", tmp_path / "corpus.*.pkl", "--out", tmp_path / "idx")
    assert code == 2 and err.count("\n") == 1
    assert "corpus.0.pkl" in err and "system" in err and "refused unexecuted" in err
    assert not marker.exists()


def test_index_help_warns_that_pickles_run_code(capsys):
    from hopscotch.retriever.cli import main

    with pytest.raises(SystemExit):
        main(["index", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--import-tevatron GLOB" in text and "pickles run code" in text and "--export-tevatron OUT_PREFIX" in text


# -- synth --query-format agentir -------------------------------------------------------------------------
def test_synth_agentir_query_format_puts_the_reasoning_in_the_query(cli, small_world, tmp_path):
    from hopscotch.retriever.io.tuples import read_training_tuples
    from hopscotch.retriever.model.query_template import format_query

    base = ["synth", "--qa", small_world, "--traces", small_world / "traces.jsonl", "--max-questions", "6"]
    plain, agentir = tmp_path / "plain.jsonl", tmp_path / "agentir.jsonl"
    assert cli(*base, "--out", plain)[0] == 0
    code, _, err = cli(*base, "--out", agentir, "--query-format", "agentir")
    assert code == 0, err
    rows_p = [json.loads(x) for x in plain.read_text().splitlines()]
    rows_a = [json.loads(x) for x in agentir.read_text().splitlines()]
    assert len(rows_a) == len(rows_p) > 5 and any(r["reasoning"] for r in rows_p)
    for p, a in zip(rows_p, rows_a):
        assert a["query"] == format_query(p["query"], p["reasoning"])  # 'Reasoning: ...\n\nQuery: ...'
        assert a["reasoning"] is None
        assert a["positive_passages"] == p["positive_passages"] and a["negative_passages"] == p["negative_passages"]
    code, _, err = cli("synth", "--qa", small_world, "--question-only", "--max-questions", "3", "--out",
                       tmp_path / "q.jsonl", "--query-format", "agentir")
    assert code == 0, err
    assert all(json.loads(x)["query"].startswith("Reasoning: Empty\n\nQuery: ")  # no reasoning: AgentIR's 'Empty'
               for x in (tmp_path / "q.jsonl").read_text().splitlines())
    # Hopscotch reads the AgentIR string back into the same query and reasoning
    for tp, ta in zip(read_training_tuples(plain), read_training_tuples(agentir)):
        assert (ta.query, ta.reasoning or None) == (tp.query, tp.reasoning or None)
    stats = json.loads((tmp_path / "agentir.stats.json").read_text())
    assert stats["config"]["query_format"] == "agentir"
    assert "query_format" not in json.loads((tmp_path / "plain.stats.json").read_text())["config"]
    code, _, _ = cli(*base, "--out", tmp_path / "i.jsonl", "--query-format", "agentir", "--query-instruction",
                     "Instruct: find\nQuery:")
    assert code == 0
    first = json.loads((tmp_path / "i.jsonl").read_text().splitlines()[0])
    assert first["query"].startswith("Instruct: find\nQuery:Reasoning: ")
    code, _, err = cli(*base, "--out", tmp_path / "j.jsonl", "--query-instruction", "x")
    assert code == 2 and "--query-format agentir" in err
