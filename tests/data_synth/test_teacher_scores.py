"""Teacher scores for distillation (``hopscotch synth --mode teacher``): each passage of a tuple file scored again by
the reasoning-aware hybrid (expanded BM25 fused with a dense model's cosine), a cross-encoder, or both (the mean of
their z-scores over the tuple's candidates), checked against the same scores computed here by hand; the tuples
are otherwise unchanged (the old score kept as ``oracle_score``), the output trains a distillation recipe, and the
command's errors are one line."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hopscotch.data_synth.teacher_scores import TeacherSpec, annotate, standardised
from hopscotch.retriever.errors import UsageError


@pytest.fixture(scope="module")
def world_tuples(small_world, tmp_path_factory):
    """DR-Synth tuples of the small world's first 6 questions (with the oracle's scores)."""
    from hopscotch.data_synth.config import SynthConfig
    from hopscotch.data_synth.pipeline import SynthInputs, synthesize

    out = tmp_path_factory.mktemp("teacher") / "tuples.jsonl"
    synthesize(SynthInputs(small_world, traces=[small_world / "traces.jsonl"]), out=out,
               config=SynthConfig(show_progress=False, max_questions=6, negatives=3))
    return out


def _rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def _hybrid_by_hand(small_world, tiny_bert_dir, row):
    from hopscotch.retriever.index.bm25 import BM25Index
    from hopscotch.retriever.io.corpus import read_corpus
    from hopscotch.retriever.model.dense_encoder import DenseEncoder
    from hopscotch.retriever.model.query_template import format_document, format_queries
    from hopscotch.retriever.searchers.bm25 import BM25Searcher
    from hopscotch.retriever.searchers.fusion import default_settings

    index = BM25Index.build(read_corpus(small_world / "corpus.jsonl"), show_progress=False)
    passages = row["positive_passages"] + row["negative_passages"]
    parts = BM25Searcher(index).expansion.text_parts(row["query"], row["reasoning"])
    all_bm25 = index.weighted_scores(index.term_weights(parts))
    bm25 = [float(all_bm25[index.row(p["docid"])]) for p in passages]
    enc = DenseEncoder(tiny_bert_dir, max_length=None)
    [q] = enc.encode_texts(format_queries(enc.model.tokenizer, enc.model.max_seq_length, [row["query"]],
                                          [row["reasoning"]], reasoning_aware=True))
    d = enc.encode_texts([format_document(p["title"], p["text"]) for p in passages])
    ids = [str(i) for i in range(len(passages))]
    rank = lambda s: sorted(zip(ids, s), key=lambda h: (-h[1], h[0]))  # noqa: E731
    fused = dict(default_settings().apply(rank(bm25), rank((d @ q).tolist()), k=len(ids)))
    return [fused[i] for i in ids]


def test_the_hybrid_teacher_scores_each_candidate_as_the_hybrid_would(small_world, tiny_bert_dir, world_tuples,
                                                                      tmp_path):
    out = tmp_path / "hybrid.jsonl"
    stats = annotate([world_tuples], out, TeacherSpec("hybrid", corpus=small_world / "corpus.jsonl",
                                                      model=str(tiny_bert_dir)))
    before, after = _rows(world_tuples), _rows(out)
    assert stats["tuples"] == len(before) == len(after) and stats["missing_from_bm25"] == 0
    assert json.loads((tmp_path / "hybrid.stats.json").read_text())["teacher"] == "hybrid"
    for old, new in zip(before, after):
        assert new["teacher"] == "hybrid" and new["query"] == old["query"] and new["reasoning"] == old["reasoning"]
        assert new.get("prior_queries") == old.get("prior_queries")
        for a, b in zip(old["positive_passages"] + old["negative_passages"],
                        new["positive_passages"] + new["negative_passages"]):
            assert (b["docid"], b["text"], b["oracle_score"]) == (a["docid"], a["text"], a["score"])
    row = after[0]
    got = [p["score"] for p in row["positive_passages"] + row["negative_passages"]]
    assert got == pytest.approx(_hybrid_by_hand(small_world, tiny_bert_dir, row), abs=1e-5)


def test_the_cross_encoder_and_both_teachers(small_world, tiny_bert_dir, tiny_cross_encoder_dir, world_tuples,
                                             tmp_path):
    from hopscotch.retriever.io.tuples import read_training_tuples
    from hopscotch.retriever.model.cross_encoder import load_cross_encoder_model

    annotate([world_tuples], tmp_path / "ce.jsonl", TeacherSpec("cross-encoder", reranker=tiny_cross_encoder_dir))
    annotate([world_tuples], tmp_path / "hybrid.jsonl", TeacherSpec("hybrid", corpus=small_world / "corpus.jsonl",
                                                                    model=str(tiny_bert_dir)))
    annotate([world_tuples], tmp_path / "both.jsonl", TeacherSpec(
        "both", corpus=small_world / "corpus.jsonl", model=str(tiny_bert_dir), reranker=tiny_cross_encoder_dir))
    model = load_cross_encoder_model(tiny_cross_encoder_dir, device="cpu")
    ce, hybrid, both = (_rows(tmp_path / f"{n}.jsonl") for n in ("ce", "hybrid", "both"))
    scores = lambda r: [p["score"] for p in r["positive_passages"] + r["negative_passages"]]  # noqa: E731
    for c, h, b in zip(ce[:3], hybrid[:3], both[:3]):
        passages = c["positive_passages"] + c["negative_passages"]
        [side] = model.format_queries([c["query"]], [c["reasoning"]], reasoning_aware=True)
        want = model.score([side] * len(passages), [f"{p['title']} {p['text']}" if p["title"] else p["text"]
                                                    for p in passages])
        assert scores(c) == pytest.approx(want, abs=1e-5)
        mean = (standardised(scores(h)) + standardised(scores(c))) / 2
        assert scores(b) == pytest.approx(mean.tolist(), abs=1e-6) and b["teacher"] == "both"
    # the teacher's scores are what the distillation losses read
    tuples = read_training_tuples(tmp_path / "both.jsonl", scores_for="loss.distill: kl")
    assert np.isclose([p.score for p in tuples[0].positives + tuples[0].negatives], scores(both[0])).all()


def test_the_spec_says_what_each_teacher_needs(tiny_bert_dir):
    with pytest.raises(UsageError, match="--teacher hybrid needs --teacher-model M"):
        TeacherSpec("hybrid", corpus="c.jsonl")
    with pytest.raises(UsageError, match="needs --teacher-reranker R"):
        TeacherSpec("both", corpus="c.jsonl", model="m")
    with pytest.raises(UsageError, match="are the hybrid teacher's"):
        TeacherSpec("cross-encoder", reranker="r", corpus="c.jsonl")
    with pytest.raises(UsageError, match="expected one of hybrid, cross-encoder, both"):
        TeacherSpec("oracle")


def test_cli_teacher_mode(cli, small_world, tiny_cross_encoder_dir, world_tuples, tmp_path, capsys):
    out = tmp_path / "t.jsonl"
    code, stdout, err = cli("synth", "--mode", "teacher", "--tuples", world_tuples, "--teacher", "cross-encoder",
                            "--teacher-reranker", tiny_cross_encoder_dir, "--out", out)
    assert code == 0, err
    assert "passages scored by the cross-encoder teacher" in stdout and _rows(out)[0]["teacher"] == "cross-encoder"
    code, _, err = cli("synth", "--mode", "teacher", "--tuples", world_tuples, "--teacher", "hybrid",
                       "--corpus", small_world / "corpus.jsonl", "--out", tmp_path / "h.jsonl")
    assert code == 2 and "needs --teacher-model M" in err and len(err.strip().splitlines()) == 1
    with pytest.raises(SystemExit) as exc:
        cli("synth", "--mode", "teacher", "--tuples", world_tuples, "--teacher", "hybrid", "--traces", "x.jsonl",
            "--out", tmp_path / "x.jsonl")
    assert exc.value.code == 2 and "--traces does not apply to --mode teacher" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        cli("synth", "--qa", small_world, "--question-only", "--teacher", "hybrid", "--out", tmp_path / "y.jsonl")
    assert exc.value.code == 2 and "--teacher does not apply to --mode dr-synth" in capsys.readouterr().err
