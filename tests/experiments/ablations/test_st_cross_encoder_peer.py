"""The cross-encoder peer (:mod:`hopscotch_experiments.ablations.st_cross_encoder_peer`): sentence-transformers' own
``CrossEncoderTrainer`` and its ``MultipleNegativesRankingLoss`` on Hopscotch tuple files, run on a tiny random BERT:
the rows are the same pairs Hopscotch's reranker reads (its query side, the tuple's positive and first hard
negatives), the saved folder loads in ``CrossEncoder`` and in Hopscotch's reranker with the same scores, its weights
moved, and the summary says what ran."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from hopscotch_experiments.ablations import st_cross_encoder_peer as peer

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma".split()


def text(i: int, k: int, n: int = 6) -> str:
    return " ".join(WORDS[(i * 5 + j * k) % len(WORDS)] for j in range(n))


@pytest.fixture(scope="module")
def tuples_file(tmp_path_factory) -> Path:
    """10 tuples with 3 hard negatives; the last has 1 (left out)."""
    from hopscotch.retriever.io.tuples import passage_dict, tuple_line

    path = tmp_path_factory.mktemp("ce_peer_tuples") / "tuples.jsonl"
    lines = []
    for i in range(10):
        negatives = [passage_dict(f"n{i}_{k}", "", text(i, 7 + k)) for k in range(1 if i == 9 else 3)]
        lines.append(tuple_line(f"q{i}", text(i, 1, 3), text(i, 2, 12) if i % 2 else None,
                                [passage_dict(f"p{i}", text(i, 4, 2), text(i, 5))], negatives))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_rows_are_the_pairs_our_reranker_reads(tiny_backbone, tuples_file):
    from transformers import AutoTokenizer

    from hopscotch.retriever.io.tuples import read_training_tuples
    from hopscotch.retriever.model.query_template import format_queries

    tuples = read_training_tuples(tuples_file)
    tok = AutoTokenizer.from_pretrained(str(tiny_backbone))
    rows, skipped = peer.cross_encoder_rows(tuples, tok, 16, 3)
    assert skipped == 1 and list(rows) == ["anchor", "positive", "negative_1", "negative_2", "negative_3"]
    assert rows["anchor"] == format_queries(tok, 16, [t.query for t in tuples[:9]], tuples[:9])
    assert rows["anchor"][1].endswith(f"\n\nQuery: {tuples[1].query}") and len(tok(rows["anchor"][1])["input_ids"]) <= 16
    assert rows["negative_3"][0] == tuples[0].negatives[2].text
    plain, _ = peer.cross_encoder_rows(tuples, tok, 16, 3, "query")
    assert plain["anchor"][1] == tuples[1].query


def test_the_peer_trains_with_their_trainer_and_our_reranker_reads_it(tiny_backbone, tuples_file, tmp_path):
    from sentence_transformers import CrossEncoder

    from hopscotch.retriever.model.cross_encoder import load_cross_encoder_model

    out = tmp_path / "peer"
    summary = peer.run_cross_encoder_peer(out, [str(tuples_file)], str(tiny_backbone), steps=2, batch_size=4, lr=1e-2,
                                          threads=1, query_max_len=16, passage_max_len=24, log_every=1,
                                          in_batch_negatives=1)
    recorded = json.loads((out / "peer_summary.json").read_text())
    assert recorded == json.loads(json.dumps(summary)) and recorded["steps"] == 2 and len(recorded["losses"]) == 2
    assert (recorded["rows"], recorded["skipped_few_negatives"], recorded["in_batch_negatives"]) == (9, 1, 1)
    assert recorded["sentence_transformers_classes"][1] == "CrossEncoderTrainer"
    final = out / "final"
    st = CrossEncoder(str(final), device="cpu", local_files_only=True)
    assert st.num_labels == 1 and st.max_seq_length == 40
    ours = load_cross_encoder_model(final, device="cpu")
    assert ours.config.query_input == "query" and ours.config.max_length == 40  # a plain CrossEncoder folder
    sides = [text(0, 1, 3), text(1, 1, 3)]
    docs = [text(0, 5), text(1, 7)]
    logits = st.predict(list(zip(sides, docs)), activation_fn=torch.nn.Identity())
    assert ours.score(sides, docs) == pytest.approx([float(x) for x in logits], abs=1e-5)
    start = peer.build_cross_encoder_peer(str(tiny_backbone), 40, seed=42)
    trained, initial = dict(st.named_parameters()), dict(start.named_parameters())
    moved = [k for k in initial if not torch.equal(initial[k].detach().cpu(), trained[k].detach().cpu())]
    assert any("classifier" in k for k in moved) and any("encoder" in k for k in moved)
    with pytest.raises(SystemExit, match="--query-max-len must be <= --passage-max-len"):
        peer.run_cross_encoder_peer(tmp_path / "bad", [str(tuples_file)], str(tiny_backbone), query_max_len=32,
                                    passage_max_len=16)
