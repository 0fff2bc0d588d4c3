"""Packaging: our top-level ``kernels`` package must not confuse transformers' probe for the
Hugging Face ``kernels`` hub package, and every import package imports cleanly."""

from __future__ import annotations

import subprocess
import sys


def test_transformers_works_with_our_kernels_installed():
    code = r"""
import importlib.util, kernels
assert hasattr(kernels, "infonce_loss") and hasattr(kernels, "reference_infonce_loss"), dir(kernels)
assert importlib.util.find_spec("kernels").origin.endswith("kernels/__init__.py")
from transformers.utils.import_utils import is_kernels_available
assert is_kernels_available() is False, "transformers mistook Hopscotch's kernels for the HF kernels hub"
import torch
from transformers import BertConfig, BertModel
model = BertModel(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                             intermediate_size=32))
out = model(input_ids=torch.tensor([[1, 2, 3]]))
assert out.last_hidden_state.shape == (1, 3, 16)
import transformers.integrations.hub_kernels  # the module that imports from `kernels` when it is "available"
print("ok")
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().endswith("ok")


def test_import_packages():
    from hopscotch import (
        data_synth,  # noqa: F401
        retriever,  # noqa: F401
    )
    from hopscotch.retriever.cli import build_parser

    parser = build_parser()
    for name in ("world", "bm25-index", "eval", "demo"):
        assert name in parser._subparsers._group_actions[0].choices
