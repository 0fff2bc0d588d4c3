"""Negatives shared across processes: two CPU processes (torchrun, gloo, DDP through
``Accelerator(cpu=True)``) give the loss and the parameter gradients of one process on the
concatenated batch, plain and GradCache steps alike, with a learnable temperature, and with a copy of
rank 0's positive sitting among rank 1's negatives (masked out, as in one process).

This file is also the worker script: ``torchrun --nproc_per_node 2 tests/retriever/training/test_distributed.py --worker ...``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma".split()
MODEL_CONFIG = dict(query_max_len=32, passage_max_len=48, learn_temperature=True, temperature=0.05)


def make_groups(n: int = 8):
    """Eight query groups; rank 1's first group (index 4) carries a copy of query 0's positive."""
    from hopscotch.retriever.io.tuples import Passage
    from hopscotch.retriever.training.batches import Group

    def text(i, k):
        return " ".join(WORDS[(i * 3 + j * k) % len(WORDS)] for j in range(3 + (i * k) % 11))

    groups = []
    for i in range(n):
        passages = [Passage(f"p{i}", "", text(i, 5))] + [Passage(f"n{i}_{k}", "", text(i, 7 + k)) for k in range(2)]
        groups.append(Group(i, text(i, 1), text(i, 2) if i % 2 else None, passages, frozenset({f"p{i}"})))
    groups[4].passages[2] = groups[0].passages[0]
    return groups


def step_results(model, batch, backward, no_sync=None):
    """Loss and gradients of a plain step, then of a GradCache step (mini-batches of 2)."""
    import contextlib

    from hopscotch.retriever.training.loss import InfoNCELoss
    from hopscotch.retriever.training.step import GradCache, cached_step, full_step

    unwrapped = getattr(model, "module", model)
    out = {}
    for mode in ("full", "cached"):
        if mode == "full":
            loss = full_step(model, batch, InfoNCELoss("reference"), backward)
        else:
            cache = GradCache(2, "right", learn_temperature=True, no_sync=no_sync or contextlib.nullcontext)
            loss = cached_step(model, batch, InfoNCELoss("reference"), backward, unwrapped.temperature, cache)
        out[mode] = {"loss": loss, "grads": {n: p.grad.clone() for n, p in unwrapped.named_parameters()
                                               if p.requires_grad}}
        unwrapped.zero_grad(set_to_none=True)
    return out


def load_model(model_dir):
    from hopscotch.retriever.model.config import EncoderConfig
    from hopscotch.retriever.model.dual_encoder import DualEncoder

    torch.manual_seed(0)
    return DualEncoder.from_pretrained(model_dir, EncoderConfig(**MODEL_CONFIG)).eval()


def worker(out_file: str, model_dir: str) -> None:
    from accelerate import Accelerator

    from hopscotch.retriever.training.batches import Collator, local_share

    torch.set_num_threads(1)
    accelerator = Accelerator(cpu=True)
    assert accelerator.num_processes == 2, accelerator.state
    model = load_model(model_dir)
    batch = Collator(model)(local_share(make_groups(), accelerator.process_index, 2))
    ddp = accelerator.prepare(model)
    assert isinstance(ddp, torch.nn.parallel.DistributedDataParallel)
    result = step_results(ddp, batch, accelerator.backward, lambda: accelerator.no_sync(ddp))
    if accelerator.is_main_process:
        torch.save(result, out_file)
    accelerator.wait_for_everyone()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_processes_equal_one_process_on_the_concatenated_batch(tiny_bert_dir, tmp_path):
    from hopscotch.retriever.training.batches import Collator

    out_file = tmp_path / "rank0.pt"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
           "--master_port", str(free_port()), __file__, "--worker", str(out_file), str(tiny_bert_dir)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    distributed = torch.load(out_file)

    model = load_model(tiny_bert_dir)
    single = step_results(model, Collator(model)(make_groups()), lambda loss: loss.backward())
    for mode in ("full", "cached"):
        assert distributed[mode]["loss"] == pytest.approx(single[mode]["loss"], abs=1e-5)
        grads, expected = distributed[mode]["grads"], single[mode]["grads"]
        assert grads.keys() == expected.keys() and "log_temperature" in grads
        for name, g in expected.items():
            assert torch.allclose(grads[name], g, atol=1e-5, rtol=1e-4), (mode, name, (grads[name] - g).abs().max())


def test_copy_of_a_positive_is_masked_in_one_process_too(tiny_bert_dir):
    """The planted copy matters: without masking, the loss of the concatenated batch changes."""
    from hopscotch.retriever.training.batches import Collator
    from hopscotch.retriever.training.loss import InfoNCELoss

    model = load_model(tiny_bert_dir)
    batch = Collator(model)(make_groups())
    with torch.no_grad():
        q, p, t = model(batch.queries, batch.passages)
    masked = InfoNCELoss("reference")(q, p, batch.labels, t, batch.q_pos_ids, batch.p_ids).value
    plain = InfoNCELoss("reference", exclude_positive_duplicates=False)(q, p, batch.labels, t, batch.q_pos_ids,
                                                                       batch.p_ids).value
    assert masked < plain


if __name__ == "__main__" and "--worker" in sys.argv:
    worker(*sys.argv[sys.argv.index("--worker") + 1:])
