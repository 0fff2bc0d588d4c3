"""Fixtures of the ablation tests."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

#: the tiny backbone's words (and the peer tests' texts)
WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma".split()


@pytest.fixture(scope="module")
def tiny_backbone(tmp_path_factory) -> Path:
    """A random BERT (hidden 32, 2 layers) with a WordPiece vocabulary of the peer tests' words, as a plain HF
    folder."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    out = tmp_path_factory.mktemp("tiny_peer_bert")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, "reasoning", "query", ":", ".", ",", "?"]
    (out / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tok = BertTokenizerFast(vocab_file=str(out / "vocab.txt"), model_max_length=64)
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=64)).save_pretrained(out)
    tok.save_pretrained(out)
    return out
