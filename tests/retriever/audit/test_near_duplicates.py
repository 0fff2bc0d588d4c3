"""``audit near-duplicates``: planted pages (a footer apart, an exact copy, an unrelated page), the format
read back by ``eval --duplicates``'s reader, resume after a kill, the LSH against datasketch's, and
``synth --duplicate-groups`` keeping a positive's near duplicate out of its negatives."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from hopscotch.retriever.audit import minhash as mh
from hopscotch.retriever.audit.near_duplicates import NearDuplicateConfig, find_near_duplicates
from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.io.qrels import read_duplicate_groups
from hopscotch.retriever.text.shingles import jaccard, shingles

PAGE = ("The Lumen Bridge is a stone arch bridge that crosses the Arno river in the old town. It was built in 1342 "
        "by the guild of masons and rebuilt after the flood of 1557, when two of its five arches collapsed into "
        "the water. Today it carries pedestrians and a small market of goldsmiths on both sides of the deck.")
FOOTER_A = " Footer: copyright 2023 city archive, all rights reserved."
FOOTER_B = " Footer: contact the visitor office for tours."
UNRELATED = ("Volcanoes form where tectonic plates diverge or converge, and magma rises through the crust to "
             "erupt as lava, ash and gas; most of them lie along the Pacific ring of fire.")


def write_corpus(path, docs):
    path.write_text("".join(json.dumps({"_id": d, "title": "", "text": t}) + "\n" for d, t in docs))
    return path


def filler(i: int) -> str:
    rng = random.Random(i)
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda omicron sigma tau phi chi psi".split()
    return " ".join(rng.choice(words) + str(rng.randrange(50)) for _ in range(40))


def planted(tmp_path):
    docs = [("page", PAGE + FOOTER_A), ("page_footer", PAGE + FOOTER_B), ("page_copy", PAGE + FOOTER_A),
            ("volcano", UNRELATED)] + [(f"f{i}", filler(i)) for i in range(5)]
    return write_corpus(tmp_path / "corpus.jsonl", docs)


def rows(path):
    return {r["doc_id"]: r for r in map(json.loads, path.read_text().splitlines())}


def test_footer_pages_are_near_the_copy_exact_and_the_unrelated_page_absent(tmp_path):
    corpus = planted(tmp_path)
    report = find_near_duplicates(corpus, tmp_path / "groups.jsonl", tmp_path / "state",
                                  NearDuplicateConfig(chunk_size=3))
    got = rows(tmp_path / "groups.jsonl")
    assert set(got) == {"page", "page_footer", "page_copy"}
    assert got["page"]["exact_duplicates"] == ["page_copy"] and got["page_copy"]["exact_duplicates"] == ["page"]
    expected = round(jaccard(shingles(PAGE + FOOTER_A), shingles(PAGE + FOOTER_B)), 4)
    assert 0.8 <= expected < 1
    assert got["page"]["near_duplicates"] == [{"doc_id": "page_footer", "jaccard": expected}]
    assert sorted(n["doc_id"] for n in got["page_footer"]["near_duplicates"]) == ["page", "page_copy"]
    assert got["page_footer"]["exact_duplicates"] == [] and got["page_footer"]["n_near"] == 2
    assert report.verdict == "ok" and report.details["near_pairs"] == 1 and report.details["exact_classes"] == 1
    # read back by the reader `eval --duplicates` uses: the relevant page brings its copy and its footer twin
    groups = read_duplicate_groups(tmp_path / "groups.jsonl", min_jaccard=0.8)
    assert set(groups.expand({"q": {"page": 1}})["q"]) == {"page", "page_copy", "page_footer"}
    assert set(groups.expand({"q": {"volcano": 1}})["q"]) == {"volcano"}


def test_a_killed_run_resumes_from_its_chunks_to_the_same_groups(tmp_path):
    corpus = planted(tmp_path)
    cfg = NearDuplicateConfig(chunk_size=2)
    find_near_duplicates(corpus, tmp_path / "whole.jsonl", tmp_path / "whole_state", cfg)

    def kill(k):
        if k == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        find_near_duplicates(corpus, tmp_path / "g.jsonl", tmp_path / "state", cfg, on_chunk=kill)
    assert not (tmp_path / "g.jsonl").exists()
    assert sorted(p.name for p in (tmp_path / "state").glob("*.meta.npz")) == ["chunk_000000.meta.npz",
                                                                               "chunk_000001.meta.npz"]
    report = find_near_duplicates(corpus, tmp_path / "g.jsonl", tmp_path / "state", cfg)
    assert report.details["chunks"] == 5 and report.details["chunks_computed_now"] == 3
    assert (tmp_path / "g.jsonl").read_text() == (tmp_path / "whole.jsonl").read_text()
    # another threshold reuses the signatures; another corpus is refused unless --fresh
    again = find_near_duplicates(corpus, tmp_path / "g2.jsonl", tmp_path / "state", NearDuplicateConfig(0.95, 2))
    assert again.details["chunks_computed_now"] == 0 and again.details["near_pairs"] == 0
    other = write_corpus(tmp_path / "other.jsonl", [("x", UNRELATED)])
    with pytest.raises(UsageError, match="another corpus"):
        find_near_duplicates(other, tmp_path / "o.jsonl", tmp_path / "state", cfg)
    fresh = find_near_duplicates(other, tmp_path / "o.jsonl", tmp_path / "state", cfg, fresh=True)
    assert fresh.details["documents"] == 1


def test_numpy_bands_find_the_candidates_datasketch_lsh_finds():
    rng = random.Random(3)
    base = [filler(i).split() for i in range(30)]
    texts = []
    for words in base:  # each text and a copy with a few words changed
        texts.append(" ".join(words))
        edited = list(words)
        for _ in range(rng.randrange(1, 6)):
            edited[rng.randrange(len(edited))] = "changed"
        texts.append(" ".join(edited))
    sigs = mh.signatures([shingles(t) for t in texts])
    bands, rows_ = mh.band_params(0.8)
    ours = {tuple(map(int, p)) for b in range(bands)
            for p in mh.bucket_pairs(mh.band_keys(sigs, bands, rows_)[:, b], 1000)}
    lsh = mh.make_lsh(0.8)
    for i in range(len(texts)):
        lsh.insert(i, mh.lean_minhash(sigs[i]))
    theirs = {(min(i, j), max(i, j)) for i in range(len(texts)) for j in lsh.query(mh.lean_minhash(sigs[i])) if i != j}
    assert ours == theirs and len(ours) >= 20
    assert np.isclose(mh.candidate_probability(0.8, bands, rows_), 0.998, atol=1e-3)


def test_cli_exit_code_and_report(cli, tmp_path):
    corpus = planted(tmp_path)
    code, out, _ = cli("audit", "near-duplicates", "--corpus", corpus, "--out", tmp_path / "g.jsonl",
                       "--report", tmp_path / "r.json")
    assert code == 0 and "audit near-duplicates: OK" in out and "1 pairs" in out
    assert json.loads((tmp_path / "r.json").read_text())["details"]["rows_written"] == 3
    assert (tmp_path / "g.jsonl.state" / "manifest.json").is_file()
    code, _, err = cli("audit", "near-duplicates", "--corpus", tmp_path / "nope.jsonl", "--out", tmp_path / "x.jsonl")
    assert code == 2 and "nope.jsonl" in err


def test_synth_takes_no_listed_duplicate_of_a_positive_as_a_negative(tmp_path):
    """A near copy of the gold page (a long footer: Jaccard ~0.65, under synth's own 0.8 text rule) is a
    negative without groups and is kept out with the groups of ``audit near-duplicates --threshold 0.6``."""
    from hopscotch.data_synth.config import SynthConfig
    from hopscotch.data_synth.pipeline import SynthInputs, synthesize

    footer = (" Footer: this page is part of the city archive of bridges and towers; the archive office on the "
              "river bank opens on weekdays and answers letters about bridges.")
    others = [(f"o{i}", f"The {w} bridge is a modern bridge over a canal in the harbour district, built of "
                        f"steel in {1900 + i} and painted {w}.") for i, w in enumerate("red green blue grey".split())]
    qa = tmp_path / "qa"
    qa.mkdir()
    write_corpus(qa / "corpus.jsonl", [("gold", PAGE), ("gold_footer", PAGE + footer), *others])
    query = {"_id": "q1", "text": "Which river does the Lumen Bridge cross?"}
    (qa / "queries.jsonl").write_text(json.dumps(query) + "\n")
    (qa / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\tgold\t1\n")
    assert 0.6 <= jaccard(shingles(PAGE), shingles(PAGE + footer)) < 0.8
    find_near_duplicates(qa / "corpus.jsonl", tmp_path / "groups.jsonl", tmp_path / "state", NearDuplicateConfig(0.6))
    config = SynthConfig(show_progress=False, negatives=10, negative_start=0)

    def negatives(**kw):
        stats = synthesize(SynthInputs(qa, question_only=True, **kw), out=tmp_path / "t.jsonl", config=config)
        [row] = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
        assert [p["docid"] for p in row["positive_passages"]] == ["gold"]
        return {p["docid"] for p in row["negative_passages"]}, stats

    plain, stats = negatives()
    assert "gold_footer" in plain and stats["negatives"]["excluded_by_duplicate_groups"] == 0
    guarded, stats = negatives(duplicate_groups=tmp_path / "groups.jsonl")
    assert "gold_footer" not in guarded and guarded == plain - {"gold_footer"}
    assert stats["negatives"]["excluded_by_duplicate_groups"] == 1
