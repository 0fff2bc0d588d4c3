"""An index resume is decided by content, not by the path the same bytes are read from (issue 36, mechanism 8)."""

from __future__ import annotations


def test_the_same_corpus_bytes_from_another_path_resume(small_world, tiny_bert_dir, tmp_path, cli):
    """Mechanism 8: a rerun whose corpus is the same bytes at another path is the same run (no 'changed' refusal);
    other bytes are still refused."""
    import shutil

    first, second = tmp_path / "a" / "corpus.jsonl", tmp_path / "b" / "corpus.jsonl"
    first.parent.mkdir()
    second.parent.mkdir()
    lines = (small_world / "corpus.jsonl").read_text().splitlines(keepends=True)[:40]
    first.write_text("".join(lines))
    shutil.copy(first, second)
    out = tmp_path / "idx"
    args = ["--model", tiny_bert_dir, "--out", out, "--shard-size", "16", "--batch-size", "8"]
    assert cli("index", "--corpus", first, *args)[0] == 0
    code, _, err = cli("index", "--corpus", second, *args)
    assert code == 0, err
    second.write_text("".join(lines[:-1]))
    code, _, err = cli("index", "--corpus", second, *args)
    assert code == 2 and "changed" in err, err
