"""Tevatron formats: encode pickles read safely (crafted pickles refused, unrun) and written; newer-format
training rows resolved against a corpus."""

from __future__ import annotations

import json
import os
import pickle
import pickletools
import re

import numpy as np
import pytest

from hopscotch.retriever.errors import FormatError, UsageError
from hopscotch.retriever.io.tevatron import (
    TevatronIdResolver,
    read_tevatron_pickle,
    tevatron_export_path,
    tevatron_pickle_paths,
    write_tevatron_pickle,
)
from hopscotch.retriever.io.tuples import read_training_tuples


def dump(path, obj, protocol=4):
    with open(path, "wb") as fh:
        pickle.dump(obj, fh, protocol=protocol)
    return path


# -- encode pickles ---------------------------------------------------------------------------------
def test_write_then_read_round_trip(tmp_path):
    reps = np.random.default_rng(0).standard_normal((5, 8)).astype(np.float32)
    ids = ["d0", "d1", "shard_00045_06622", "d3", "d4"]
    path = tevatron_export_path(tmp_path / "corpus", 3)
    assert path.name == "corpus.3.pkl"
    write_tevatron_pickle(path, reps, ids)
    with open(path, "rb") as fh:  # what Tevatron itself loads: a plain (ndarray, list of str) tuple
        raw_reps, raw_ids = pickle.load(fh)
    assert raw_reps.dtype == np.float32 and np.array_equal(raw_reps, reps) and raw_ids == ids
    got = read_tevatron_pickle(path)
    assert np.array_equal(got.reps, reps)
    assert got.docids == ["d0", "d1", "shard_00045_6622", "d3", "d4"]  # canonical ClimbMix spelling
    with pytest.raises(ValueError):
        write_tevatron_pickle(tmp_path / "bad.pkl", reps, ids[:4])


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_reads_pickles_as_tevatron_writes_them(tmp_path, protocol):
    reps = np.arange(12, dtype=np.float16).reshape(4, 3)  # fp16 autocast output
    lookups = [["a", "b", "c", "d"], np.array(["a", "b", "c", "d"]), [np.str_("a"), "b", 7, np.int64(9)]]
    for i, lookup in enumerate(lookups):
        got = read_tevatron_pickle(dump(tmp_path / f"p{i}.pkl", (reps, lookup), protocol))
        assert got.reps.dtype == np.float32 and got.reps.shape == (4, 3)
        assert np.array_equal(got.reps, reps.astype(np.float32))
        assert got.docids == (["a", "b", "c", "d"] if i < 2 else ["a", "b", "7", "9"])
    # a list of row vectors is accepted too (np.array(reps) in Tevatron's loader)
    got = read_tevatron_pickle(dump(tmp_path / "rows.pkl", ([np.ones(3), np.zeros(3)], ["x", "y"]), protocol))
    assert got.reps.tolist() == [[1, 1, 1], [0, 0, 0]]


class _Exploit:
    """Unpickling this calls ``os.system(command)``: what a crafted '.pkl' does to a plain pickle.load."""

    def __init__(self, command: str):
        self.command = command

    def __reduce__(self):
        return os.system, (self.command,)


class _EvalExploit:
    def __init__(self, code: str):
        self.code = code

    def __reduce__(self):
        import builtins
        return builtins.eval, (self.code,)


def test_malicious_pickles_are_refused_and_run_nothing(tmp_path):
    marker = tmp_path / "pwned"
    cmd = f"touch {marker}"
    crafted = {  # name -> (object, the reference the error must name)
        "top": (_Exploit(cmd), r"(os|posix)\.system"),
        "in_lookup": ((np.zeros((1, 2), np.float32), [_Exploit(cmd)]), r"(os|posix)\.system"),
        "as_reps": ((_Exploit(cmd), ["a"]), r"(os|posix)\.system"),
        "eval": ((np.zeros((1, 2), np.float32), [_EvalExploit(f"open({str(marker)!r}, 'w')")]), r"builtins\.eval"),
    }
    for name, (obj, ref) in crafted.items():
        path = dump(tmp_path / f"{name}.pkl", obj)
        assert any(op.name in ("GLOBAL", "STACK_GLOBAL") for op, _, _ in pickletools.genops(path.read_bytes()))
        with pytest.raises(FormatError, match="refused unexecuted: pickles can run code") as err:
            read_tevatron_pickle(path)
        assert re.search(ref, str(err.value)), (name, str(err.value))
        assert not marker.exists(), name
    # hand-written protocol-0 opcodes: GLOBAL 'os system', then REDUCE
    raw = tmp_path / "raw.pkl"
    raw.write_bytes(f"cos\nsystem\n(V{cmd}\ntR.".encode())
    with pytest.raises(FormatError, match=r"os\.system"):
        read_tevatron_pickle(raw)
    # a gadget that builds an arbitrary object without a REDUCE of a bad global
    sneaky = tmp_path / "sneaky.pkl"
    sneaky.write_bytes(b"ccopyreg\n_reconstructor\n(csubprocess\nPopen\nc__builtin__\nobject\nNtR.")
    with pytest.raises(FormatError, match=r"copyreg\._reconstructor"):
        read_tevatron_pickle(sneaky)
    assert not marker.exists()
    # the same bytes *would* run the command under a plain pickle.load (the test's exploit is real)
    with open(tmp_path / "top.pkl", "rb") as fh:
        pickle.load(fh)
    assert marker.exists()


@pytest.mark.parametrize("obj, match", [
    ({"reps": 1}, "a dict"),
    ((np.zeros((2, 3)), ["a"]), "one docid per row"),
    ((np.zeros(3), ["a", "b", "c"]), r"\[n, d\] numeric array"),
    ((np.zeros((2, 3)), [("a", 0), ("a", 1)]), "chunked lookups"),
    ((np.array([[1.0, np.nan]]), ["a"]), "finite"),
    ((np.array([["x", "y"]]), ["a"]), "numeric"),
    ((np.zeros((1, 2)), "ab"), "lookup list"),
    ((np.zeros((1, 2)), [None]), "docids"),
])
def test_bad_pickle_layouts(tmp_path, obj, match):
    with pytest.raises(FormatError, match=match):
        read_tevatron_pickle(dump(tmp_path / "x.pkl", obj))


def test_unreadable_pickles(tmp_path):
    good = dump(tmp_path / "good.pkl", (np.zeros((2, 2), np.float32), ["a", "b"]))
    cut = tmp_path / "cut.pkl"
    cut.write_bytes(good.read_bytes()[:40])
    with pytest.raises(FormatError, match="unreadable pickle"):
        read_tevatron_pickle(cut)
    with pytest.raises(FormatError, match="no such file"):
        read_tevatron_pickle(tmp_path / "absent.pkl")


def test_pickle_paths_natural_order(tmp_path):
    for i in (10, 2, 1):
        (tmp_path / f"corpus.{i}.pkl").write_bytes(b"")
    assert [p.name for p in tevatron_pickle_paths(str(tmp_path / "corpus.*.pkl"))] == \
        ["corpus.1.pkl", "corpus.2.pkl", "corpus.10.pkl"]
    assert tevatron_pickle_paths(str(tmp_path / "corpus.2.pkl"))[0].name == "corpus.2.pkl"
    with pytest.raises(UsageError, match="no file matches"):
        tevatron_pickle_paths(str(tmp_path / "nothing.*.pkl"))


# -- training JSONL, newer format ---------------------------------------------------------------------
@pytest.fixture
def corpus(tmp_path):
    docs = [{"docid": "d1", "title": "Gummo", "text": "a 1997 film"}, {"docid": "d2", "text": "Xenia, Ohio"},
            {"docid": "shard_00001_7", "text": "climbmix row"}, {"docid": "d4", "text": "unrelated"}]
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return path


def write_rows(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_newer_format_resolves_ids_against_the_corpus(tmp_path, corpus):
    rows = [
        {"query_id": "q1", "query_text": "who directed Gummo", "query_image": None,
         "positive_document_ids": ["d1"], "negative_document_ids": ["d2", "shard_00001_00007", "d1"],
         "reasoning": "Gummo is a film; find its director", "answer": "Korine"},
        {"query_id": "q2", "query_text": "Reasoning: Empty\n\nQuery: where is Xenia",
         "positive_document_ids": ["d2"], "negative_document_ids": []},
        {"query_id": "q3", "query": "older layout in the same file", "positive_passages": [{"docid": "d4",
                                                                                          "text": "unrelated"}]},
    ]
    a, b, c = read_training_tuples(write_rows(tmp_path / "train.jsonl", rows), corpus=corpus)
    assert (a.query_id, a.query, a.reasoning) == ("q1", "who directed Gummo", "Gummo is a film; find its director")
    assert [(p.docid, p.title, p.text) for p in a.positives] == [("d1", "Gummo", "a 1997 film")]
    # padded ClimbMix id read canonically; a negative equal to the positive is dropped (as for the older layout)
    assert [n.docid for n in a.negatives] == ["d2", "shard_00001_7"]
    assert (b.query, b.reasoning, b.negatives) == ("where is Xenia", None, [])  # AgentIR string split back
    assert c.positives[0].docid == "d4"


def test_newer_format_errors(tmp_path, corpus):
    row = {"query_id": "q1", "query_text": "q", "positive_document_ids": ["d1"], "negative_document_ids": []}
    f = write_rows(tmp_path / "t.jsonl", [row])
    with pytest.raises(UsageError, match="needs the corpus"):
        read_training_tuples(f)
    with pytest.raises(UsageError, match="no such file"):
        read_training_tuples(f, corpus=tmp_path / "absent.jsonl")
    bad = dict(row, negative_document_ids=["d9"])
    with pytest.raises(FormatError, match="unknown docid 'd9'") as err:
        read_training_tuples(write_rows(tmp_path / "u.jsonl", [row, bad]), corpus=corpus)
    assert err.value.line == 2
    image = {"query_id": "q", "query_text": "", "query_image": "img.png", "positive_document_ids": ["d1"],
             "negative_document_ids": []}
    with pytest.raises(FormatError, match="image/video/audio queries are not supported"):
        read_training_tuples(write_rows(tmp_path / "i.jsonl", [image]), corpus=corpus)
    with pytest.raises(FormatError, match="as a list of docids"):
        read_training_tuples(write_rows(tmp_path / "l.jsonl", [dict(row, positive_document_ids="d1")]),
                             corpus=corpus)
    with pytest.raises(FormatError, match="at least one entry"):
        read_training_tuples(write_rows(tmp_path / "e.jsonl", [dict(row, positive_document_ids=[])]),
                             corpus=corpus)


def test_resolver_reads_the_corpus_once_and_only_when_needed(tmp_path, corpus):
    resolver = TevatronIdResolver(tmp_path / "absent.jsonl")
    old = {"query_id": "q", "query": "x", "positive_passages": []}
    assert resolver.expand(old, "f", 1) is old  # an older-layout row never touches the corpus
    resolver = TevatronIdResolver(corpus)
    row = {"query_id": "q", "query_text": "x", "positive_document_ids": ["d1"], "negative_document_ids": ["d2"]}
    out = resolver.expand(row, "f", 1)
    assert set(out) == {"query_id", "query", "positive_passages", "negative_passages"}
    docs = resolver.documents("f", 1)
    assert resolver.expand(row, "f", 2) == out and resolver.documents("f", 2) is docs


@pytest.mark.parametrize("lookup, match", [
    ([b"d0", b"\xff\xfebad"], r"UTF-8 bytes.*invalid start byte"),  # bytes that are not UTF-8
    ([np.bytes_(b"ok"), np.bytes_(b"\xc3")], "UTF-8 bytes"),
    (["d0", "d1\nd2"], "without control or line-break characters"),  # would shift every later lookup line
    (["d0", "d\x00"], "without control or line-break characters"),
    (["d0", b"d\r"], "without control or line-break characters"),  # checked after decoding too
    (["d0", ""], "not empty"),
    (["d0", "\ud800"], "without control or line-break characters"),  # a lone surrogate cannot be written back
])
def test_bad_lookup_docids_are_format_errors(tmp_path, lookup, match):
    path = dump(tmp_path / "x.pkl", (np.zeros((2, 2), np.float32), lookup))
    with pytest.raises(FormatError, match=match) as err:
        read_tevatron_pickle(path)
    assert str(path) in str(err.value)


def test_utf8_bytes_lookup_reads_canonically(tmp_path):
    lookup = [b"shard_00045_06622", np.bytes_("caf\u00e9".encode())]
    got = read_tevatron_pickle(dump(tmp_path / "b.pkl", (np.zeros((2, 2), np.float32), lookup)))
    assert got.docids == ["shard_00045_6622", "caf\u00e9"]


@pytest.mark.parametrize("bad", ["d1\nd2", "d1\r", "\t", "", "d\u2028"])
def test_resolver_refuses_control_characters_in_ids(tmp_path, corpus, bad):
    row = {"query_id": "q1", "query_text": "q", "positive_document_ids": ["d1"], "negative_document_ids": [bad]}
    f = write_rows(tmp_path / "t.jsonl", [row])
    with pytest.raises(FormatError, match="docid in 'negative_document_ids'") as err:
        read_training_tuples(f, corpus=corpus)
    assert err.value.line == 1 and str(f) in str(err.value)
    # an integer id is read as its decimal string (and, absent from the corpus, named as unknown)
    with pytest.raises(FormatError, match="unknown docid 7"):
        read_training_tuples(write_rows(tmp_path / "n.jsonl", [dict(row, negative_document_ids=[7])]),
                             corpus=corpus)
