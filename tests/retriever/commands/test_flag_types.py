"""Range-checked flags (issue 14 part 1): the ``type=`` functions, metric parsing, clamps and the device
check of :mod:`hopscotch.retriever.commands.flag_types`, and that every numeric flag of every command uses
them (introspected from the real parser)."""

from __future__ import annotations

import argparse
import json

import pytest

from hopscotch.retriever.commands import flag_types as ft
from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.evaluation.metrics import MAX_CUTOFF, parse_metric, parse_metric_list


@pytest.mark.parametrize(("parse", "text", "value"), [
    (ft.positive_int, "1", 1), (ft.positive_int, " 42 ", 42), (ft.positive_int, "1_000", 1000),
    (ft.non_negative_int, "0", 0), (ft.seed_int, str(ft.SEED_MAX), ft.SEED_MAX),
    (ft.int_range(50, 100), "50", 50), (ft.finite_float, "-2.5", -2.5), (ft.finite_float, "1e-3", 0.001),
    (ft.positive_float, "0.001", 0.001), (ft.non_negative_float, "0", 0.0), (ft.unit_interval, "1", 1.0),
    (ft.unit_interval, "0", 0.0), (ft.permutations_int, "1000000", 1_000_000),
    (ft.cutoff_int, str(MAX_CUTOFF), MAX_CUTOFF),
])
def test_accepted_values(parse, text, value):
    assert parse(text) == value and type(parse(text)) is type(value)


@pytest.mark.parametrize(("parse", "text", "message"), [
    (ft.positive_int, "0", "expected an integer >= 1, got '0'"),
    (ft.positive_int, "-1", "expected an integer >= 1, got '-1'"),
    (ft.positive_int, "nan", "got 'nan'"), (ft.positive_int, "2.0", "got '2.0'"), (ft.positive_int, "1e3", "1e3"),
    (ft.positive_int, "", "got ''"), (ft.positive_int, "0x10", "0x10"),
    (ft.non_negative_int, "-1", "expected an integer >= 0"),
    (ft.seed_int, "-1", "expected an integer in [0, 4,294,967,295]"), (ft.seed_int, str(2**32), "4294967296"),
    (ft.int_range(50, 100), "49", "expected an integer in [50, 100], got '49'"), (ft.int_range(50, 100), "101", "101"),
    (ft.finite_float, "nan", "expected a finite number, got 'nan'"), (ft.finite_float, "-inf", "-inf"),
    (ft.finite_float, "1e999", "1e999"), (ft.finite_float, "x", "got 'x'"),
    (ft.positive_float, "0", "expected a finite number > 0, got '0'"), (ft.positive_float, "inf", "inf"),
    (ft.non_negative_float, "-0.5", "expected a finite number >= 0"),
    (ft.unit_interval, "1.5", "expected a finite number in [0, 1], got '1.5'"), (ft.unit_interval, "-0.1", "-0.1"),
    (ft.unit_interval, "nan", "nan"), (ft.permutations_int, "1000001", "1,000,000"),
    (ft.cutoff_int, str(MAX_CUTOFF + 1), str(MAX_CUTOFF + 1)),
])
def test_refused_values_say_what_was_expected(parse, text, message):
    with pytest.raises(argparse.ArgumentTypeError) as exc:
        parse(text)
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_metric_parsing():
    assert parse_metric(" NDCG@10 ") == ("ndcg", 10) and parse_metric("precision@5") == ("p", 5)
    assert parse_metric(f"recall@{MAX_CUTOFF}") == ("recall", MAX_CUTOFF)
    for bad in ("ndcg@0", "ndcg@-1", "ndcg@", "ndcg@nan", "ndcg@1.5", "foo@10", "ndcg", "", "ndcg @10",
                "ndcg@\u0661\u0660", f"recall@{MAX_CUTOFF + 1}", "ndcg@10,recall@10"):
        with pytest.raises(UsageError):
            parse_metric(bad)
    assert parse_metric_list("NDCG@10, recall@100,,ndcg@10,") == ["ndcg@10", "recall@100"]
    for bad in ("", " , ", "ndcg@10,ndcg@0", "ndcg@10;recall@10"):
        with pytest.raises(UsageError):
            parse_metric_list(bad)
    assert ft.metric_list("mrr@10,map@100") == ["mrr@10", "map@100"] and ft.metric_name(" P@5 ") == "p@5"
    with pytest.raises(argparse.ArgumentTypeError, match="ndcg@0"):
        ft.metric_list("ndcg@10,ndcg@0")
    with pytest.raises(argparse.ArgumentTypeError, match="no metric"):
        ft.metric_list("")


def test_clamp_prints_one_note_only_when_it_cuts(capsys):
    assert ft.clamp("search", "--k", 1_000_000_000, 3000, "3,000 documents") == 3000
    assert capsys.readouterr().err == "hopscotch search: note: --k 1000000000 > 3,000 documents: using 3,000\n"
    assert ft.clamp("search", "--k", 3000, 3000, "3,000 documents") == 3000
    assert ft.clamp("search", "--k", 10**9, None, "") == 10**9
    assert capsys.readouterr().err == ""


class _Meta:
    def __init__(self, n):
        self.num_docs = n


class _Index:
    def __init__(self, n):
        self.docids = [f"d{i}" for i in range(n)]


class _Dense:
    def __init__(self, n):
        self.meta = _Meta(n)


class _Bm25:
    def __init__(self, n):
        self.index = _Index(n)


class _Hybrid:
    def __init__(self, bm25, dense):
        self.bm25, self.dense = bm25, dense


class _Reranked:
    def __init__(self, first):
        self.first = first


def test_searcher_size_and_clamp_k(capsys):
    assert ft.searcher_size(_Dense(300)) == 300 and ft.searcher_size(_Bm25(250)) == 250
    assert ft.searcher_size(_Hybrid(_Bm25(250), _Dense(300))) == 300
    assert ft.searcher_size(object()) is None  # a remote service: unknown
    assert ft.searcher_size(_Reranked(_Hybrid(_Bm25(250), _Dense(300)))) == 300  # a reranker's first stage's
    assert ft.clamp_k("replay", 10, _Dense(300)) == 10 and capsys.readouterr().err == ""
    assert ft.clamp_k("replay", 301, _Dense(300)) == 300
    assert "hopscotch replay: note: --k 301 > 300 documents: using 300" in capsys.readouterr().err
    assert ft.clamp_k("search", 10**9, object()) == 10**9


def test_searcher_size_of_real_searchers(small_world, small_world_index, tiny_bert_dir, tmp_path):
    from hopscotch.retriever.index.bm25 import BM25Index
    from hopscotch.retriever.io.corpus import read_corpus
    from hopscotch.retriever.searchers import build_searcher

    BM25Index.build(read_corpus(small_world / "corpus.jsonl"), show_progress=False).save(tmp_path / "bm25")
    dense = build_searcher("dense", index=small_world_index, model=str(tiny_bert_dir))
    bm25 = build_searcher("bm25", bm25=tmp_path / "bm25")
    hybrid = build_searcher("hybrid", bm25=tmp_path / "bm25", index=small_world_index, model=str(tiny_bert_dir))
    assert ft.searcher_size(dense) == ft.searcher_size(bm25) == ft.searcher_size(hybrid) == 300


def _model_folder(tmp_path, name, config, modules=None):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    if modules is not None:
        (folder / "modules.json").write_text(json.dumps(modules))
    return folder


def test_model_position_limit(tmp_path, tiny_bert_dir, capsys):
    assert ft.model_position_limit("minilm") == 512
    assert ft.model_position_limit(tiny_bert_dir) == 512  # not the 128 sentence-transformers saved as max_seq_length
    roberta = _model_folder(tmp_path, "roberta", {"model_type": "xlm-roberta", "max_position_embeddings": 514,
                                                  "pad_token_id": 1})
    assert ft.model_position_limit(roberta) == 512
    gpt = _model_folder(tmp_path, "gpt", {"model_type": "gpt2", "n_positions": 1024})
    assert ft.model_position_limit(gpt) == 1024
    modules = [{"path": "0_Transformer", "type": "sentence_transformers.models.Transformer"}]
    nested = _model_folder(tmp_path, "st", {}, modules)
    (nested / "0_Transformer").mkdir()
    (nested / "0_Transformer" / "config.json").write_text(json.dumps({"max_position_embeddings": 8192}))
    assert ft.model_position_limit(nested) == 8192
    assert ft.model_position_limit(_model_folder(tmp_path, "none", {"model_type": "t5"})) is None
    assert ft.clamp_max_length("index", 100_000, "minilm") == 512
    note = "hopscotch index: note: --max-length 100000 > the model's 512 positions: using 512\n"
    assert capsys.readouterr().err == note
    assert ft.clamp_max_length("index", 256, "minilm") == 256 and ft.clamp_max_length("index", None, "minilm") is None
    assert capsys.readouterr().err == ""


def test_check_device():
    import torch

    assert ft.check_device(None) is None and ft.check_device("cpu") == "cpu"
    for bad in ("nonsense", "cuda:x", "gpu"):
        with pytest.raises(UsageError, match="--device"):
            ft.check_device(bad)
    if torch.cuda.is_available():
        assert ft.check_device("cuda") == "cuda"
        with pytest.raises(UsageError, match="CUDA device"):
            ft.check_device(f"cuda:{torch.cuda.device_count()}")
    else:
        with pytest.raises(UsageError, match="CUDA is not available on this machine"):
            ft.check_device("cuda:0")


# numeric flags that keep a plain int/float type, each checked elsewhere before work: serve's own (serve.py,
# another helper's: run-time checks) and the dense searcher's late fusion (DenseSearcher checks the range)
LATE_FUSION = {"--late-fusion", "--late-fusion-max-words", "--late-fusion-long"}
PLAIN_NUMERIC = {"search": LATE_FUSION, "replay": LATE_FUSION,
                 "serve": LATE_FUSION | {"--port", "--max-batch", "--idle-timeout", "--header-timeout",
                                         "--max-in-flight", "--threads", "--k", "--snippet-max-tokens"}}


def _subparsers():
    from hopscotch.retriever.cli import build_parser

    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices


def test_every_numeric_flag_is_range_checked():
    plain = {}
    for name, sub in _subparsers().items():
        for action in sub._actions:
            if action.type in (int, float) and not set(action.option_strings) & PLAIN_NUMERIC.get(name, set()):
                plain.setdefault(name, []).append(action.option_strings[0])
    assert plain == {}


def test_every_default_passes_its_own_check():
    for name, sub in _subparsers().items():
        for action in sub._actions:
            parse = action.type
            if callable(parse) and parse not in (int, float, str) and action.default not in (None, argparse.SUPPRESS):
                default = action.default
                if not isinstance(default, str):
                    assert parse(str(default)) == default, (name, action.option_strings)


def test_a_bad_flag_is_one_line_naming_it(capsys):
    from hopscotch.retriever.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["search", "--queries", "q.jsonl", "--out", "r.trec", "--bm25", "b", "--k", "0"])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert err == "hopscotch search: error: argument --k: expected an integer >= 1, got '0'\n"
