"""The sentence-transformers peer (:mod:`hopscotch_experiments.ablations.st_peer`): their own multi-vector fine-tune
(MultiVectorEncoderTrainer, MultiVectorMultipleNegativesRankingLoss) on Hopscotch tuple files, run on a tiny random BERT: the saved folder
loads in ``MultiVectorEncoder`` and in Hopscotch's ``load_multi_vector_model``, its weights moved, the summary
says what ran; the reasoning-aware query input writes AgentIR's template."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from hopscotch_experiments.ablations import st_peer as peer

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma".split()


def text(i: int, k: int, n: int = 6) -> str:
    return " ".join(WORDS[(i * 5 + j * k) % len(WORDS)] for j in range(n))


@pytest.fixture(scope="module")
def tuples_file(tmp_path_factory) -> Path:
    """8 tuples in DR-Synth's JSONL shape; the last has no hard negative (left out)."""
    from hopscotch.retriever.io.tuples import passage_dict, tuple_line

    path = tmp_path_factory.mktemp("peer_tuples") / "tuples.jsonl"
    lines = []
    for i in range(8):
        negatives = [] if i == 7 else [passage_dict(f"n{i}", text(i, 3, 2), text(i, 7))]
        lines.append(tuple_line(f"q{i}", text(i, 1, 3), text(i, 2, 8) if i % 2 else None,
                                [passage_dict(f"p{i}", text(i, 4, 2), text(i, 5))], negatives))
    path.write_text("\n".join(lines) + "\n")
    return path


def _weights(folder: Path) -> dict:
    from safetensors.torch import load_file

    return {k: v for f in sorted(folder.rglob("*.safetensors")) for k, v in load_file(f).items()}


def test_peer_trains_and_saves_a_folder_both_loaders_read(tiny_backbone, tuples_file, tmp_path):
    from sentence_transformers import MultiVectorEncoder

    from hopscotch.retriever.model.multi_vector import load_multi_vector_model

    out = tmp_path / "peer"
    summary = peer.run_peer(out, [str(tuples_file)], str(tiny_backbone), steps=2, batch_size=4, lr=1e-2, dim=16,
                            threads=1, query_max_len=24, passage_max_len=24, log_every=1)
    final = out / "final"
    recorded = json.loads((out / "peer_summary.json").read_text())
    assert recorded == json.loads(json.dumps(summary))
    assert recorded["steps"] == 2 and recorded["seconds"] > 0 and recorded["samples_per_second"] > 0
    assert (recorded["rows"], recorded["skipped_no_negative"]) == (7, 1)
    assert len(recorded["losses"]) == 2 and recorded["versions"]["sentence_transformers"]
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]  # written atomically, nothing left

    st = MultiVectorEncoder(str(final), device="cpu", local_files_only=True)
    q = st.encode_query([text(0, 1, 3)])
    d = st.encode_document([text(0, 5), text(1, 5)])
    assert q[0].shape[1] == 16 and torch.allclose(q[0].norm(dim=1), torch.ones(q[0].shape[0]), atol=1e-4)
    assert st.similarity(q, d).shape == (1, 2)

    # every weight moved: the backbone's against the tiny BERT, the projection against the seeded init
    start = peer.build_peer_model(str(tiny_backbone), dim=16, seed=42, query_max_len=24, passage_max_len=24,
                                  device="cpu")
    assert torch.equal(start[1].linear.weight, peer.build_peer_model(str(tiny_backbone), 16, 42, 24, 24, "cpu")[1]
                       .linear.weight)  # the seeded init is reproducible
    trained = dict(st.named_parameters())
    initial = dict(start.named_parameters())
    assert trained.keys() == initial.keys()
    moved = [k for k in initial if not torch.equal(initial[k].detach().cpu(), trained[k].detach().cpu())]
    assert "1.linear.weight" in moved and any(k.startswith("0.") for k in moved)
    backbone = _weights(tiny_backbone)
    saved = _weights(final)
    emb = next(k for k in saved if k.endswith("word_embeddings.weight"))
    assert not torch.equal(saved[emb], backbone[next(k for k in backbone if k.endswith("word_embeddings.weight"))])

    # Hopscotch's loader reads the plain folder (no hopscotch_config.json) with defaults from its modules
    assert not (final / "hopscotch_config.json").exists()
    ours = load_multi_vector_model(final, device="cpu")
    assert ours.config.dim == 16 and ours.config.query_max_len == 24 and ours.config.passage_max_len == 24
    assert (ours.config.query_marker, ours.config.document_marker, ours.config.query_augmentation) == ("", "", None)
    assert ours.config.skiplist == [] and ours.config.query_input == "reasoning"  # the variant asked for by --reasoning
    ours_q = ours.encode_queries([text(0, 1, 3)], query_input="query")
    assert torch.allclose(ours_q[0], q[0].float(), atol=1e-5)
    aware = ours.encode_queries([text(0, 1, 3)], [text(0, 2, 8)])  # reasoning-aware: AgentIR's template, cut to 24
    assert torch.allclose(aware[0], st.encode_query(ours.format_queries([text(0, 1, 3)], [text(0, 2, 8)]))[0].float(),
                          atol=1e-5)
    assert aware[0].shape[0] <= 24


def test_reasoning_aware_query_input_writes_agentir_template(tiny_backbone, tuples_file, tmp_path):
    from transformers import AutoTokenizer

    from hopscotch.retriever.io.tuples import read_training_tuples

    tuples = read_training_tuples(tuples_file)
    tok = AutoTokenizer.from_pretrained(str(tiny_backbone))
    plain, skipped = peer.peer_rows(tuples, tok, 24)
    aware, _ = peer.peer_rows(tuples, tok, 24, "reasoning")
    assert skipped == 1 and plain["anchor"][0] == tuples[0].query
    assert aware["anchor"][1].startswith("Reasoning: ") and aware["anchor"][1].endswith(f"\n\nQuery: {tuples[1].query}")
    assert aware["anchor"][0] == f"Reasoning: Empty\n\nQuery: {tuples[0].query}"
    assert plain["positive"][0] == f"{tuples[0].positives[0].title} {tuples[0].positives[0].text}"
    assert plain["negative"][0] == f"{tuples[0].negatives[0].title} {tuples[0].negatives[0].text}"
    with pytest.raises(Exception, match="unknown query input"):
        peer.run_peer(tmp_path / "unused", ["x.jsonl"], query_input="nope")
    assert not (tmp_path / "unused").exists()


def test_default_tuples_are_the_four_decontaminated_files_train_agent_retriever_trains_on():
    assert peer.default_tuples("D") == [f"D/clean/{s}_tuples.jsonl" for s in ("hotpot", "musique", "tongyi_use", "world")]
    assert peer.default_tuples("D", "top3") == [f"D/clean/{s}_tuples.jsonl" for s in ("hotpot", "musique", "tongyi", "world")]


def test_single_vector_peer_trains_with_their_trainer_and_our_search_reads_it(tiny_backbone, tuples_file, tmp_path):
    """The single-vector peer: sentence-transformers' trainer and MNRL on the same rows; the folder loads in
    ``SentenceTransformer`` and in Hopscotch's dense encoder (what ``hopscotch index --model`` uses)."""
    from sentence_transformers import SentenceTransformer

    from hopscotch.retriever.model.dense_encoder import DenseEncoder

    out = tmp_path / "peer_sv"
    summary = peer.run_peer(out, [str(tuples_file)], str(tiny_backbone), steps=2, batch_size=4, lr=1e-2, threads=1,
                            query_max_len=24, log_every=1, kind="single_vector", query_input="reasoning")
    recorded = json.loads((out / "peer_summary.json").read_text())
    assert recorded["kind"] == "single_vector" and recorded["steps"] == 2 and recorded["dim"] is None
    assert recorded["sentence_transformers_classes"][-1] == "MultipleNegativesRankingLoss"
    assert (recorded["rows"], recorded["skipped_no_negative"], recorded["query_input"]) == (7, 1, "reasoning")
    final = out / "final"
    st = SentenceTransformer(str(final), device="cpu", local_files_only=True)
    start = peer.build_single_vector_peer(str(tiny_backbone), 24, seed=42)
    moved = [k for k, v in dict(start.named_parameters()).items()
             if not torch.equal(v.detach(), dict(st.named_parameters())[k].detach())]
    assert moved and st.max_seq_length == 24
    ours = DenseEncoder(str(final), max_length=24, device="cpu").encode_texts([text(0, 1, 3)])
    theirs = st.encode([text(0, 1, 3)], convert_to_numpy=True)
    assert ours.shape == theirs.shape
    with pytest.raises(ValueError, match="kind"):
        peer.run_peer(tmp_path / "unused", [str(tuples_file)], kind="colbert")
