"""GPU check, section 5: one LoRA + gradient-checkpointing bf16 training step of a Qwen3-Embedding-4B-sized model.

Nothing is downloaded: the backbone is a randomly initialised ``transformers.Qwen3Model`` built from
Qwen3-Embedding-4B's configuration (:data:`QWEN3_EMBEDDING_4B`: hidden 2560, 36 layers, 32 query /
8 key-value heads of 128, MLP 9728, vocabulary 151,665, RoPE theta 1e6, tied embeddings), in bf16
with SDPA attention, gradient checkpointing (non-reentrant) and peft LoRA on every projection (the
AgentIR recipe's r 16, alpha 64, dropout 0.1), wrapped in Hopscotch's
:class:`~hopscotch.retriever.model.dual_encoder.DualEncoder` (last-token pooling, left padding,
normalised, t = 0.01). A batch is ``batch`` queries of up to ``query_len`` tokens and ``group``
passages each of up to ``passage_len`` tokens (random token ids, random lengths from half to full,
left-padded, the longest at full length), run through
:func:`hopscotch.retriever.training.step.full_step` and an AdamW step on the LoRA weights.

For each of ``loss.backend=reference`` and ``fused``: the LoRA weights are restored to the same
starting values, one warm-up step (compilation, optimizer state), then ``timed_steps`` steps from the
same weights and seed: peak GPU memory of a step and seconds per step. The section passes when the
two losses of the same step agree within 1e-3 (times the loss, if above 1).
"""

from __future__ import annotations

import sys
import time

from hopscotch_experiments.benchmarks.gpu_check import (Deadline, fmt_gib, peak_gib, reset_peak, section_main,
                                                   synchronize)

#: Qwen/Qwen3-Embedding-4B's config.json (architecture values).
QWEN3_EMBEDDING_4B = {
    "vocab_size": 151665, "hidden_size": 2560, "intermediate_size": 9728, "num_hidden_layers": 36,
    "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "hidden_act": "silu",
    "max_position_embeddings": 40960, "rms_norm_eps": 1e-6, "rope_theta": 1_000_000.0, "tie_word_embeddings": True,
    "attention_bias": False, "attention_dropout": 0.0, "use_sliding_window": False, "max_window_layers": 36,
    "bos_token_id": 151643, "eos_token_id": 151643, "initializer_range": 0.02,
}
TINY_QWEN3 = {**QWEN3_EMBEDDING_4B, "vocab_size": 1000, "hidden_size": 64, "intermediate_size": 128,
              "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
              "max_window_layers": 2, "bos_token_id": 1, "eos_token_id": 1}
LORA = {"r": 16, "alpha": 64, "dropout": 0.1, "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "down_proj",
                                                                  "up_proj", "gate_proj"]}

SIZES = {
    "full": {"model": "qwen3-embedding-4b", "batch": 4, "group": 8, "query_len": 512, "passage_len": 1024,
             "timed_steps": 2},
    "tiny": {"model": "tiny", "batch": 2, "group": 2, "query_len": 16, "passage_len": 24, "timed_steps": 1},
}


def build_encoder(values: dict, device: str, query_len: int, passage_len: int, attn: str = "sdpa"):
    """Random bf16 Qwen3 backbone -> gradient checkpointing -> LoRA -> DualEncoder."""
    import torch
    from transformers import AutoModel, Qwen3Config

    from hopscotch.retriever.model.config import EncoderConfig
    from hopscotch.retriever.model.dual_encoder import DualEncoder, apply_lora

    config = Qwen3Config(**values, use_cache=False)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(device):
            backbone = AutoModel.from_config(config, attn_implementation=attn)
    finally:
        torch.set_default_dtype(previous)
    backbone = backbone.to(device=device, dtype=torch.bfloat16)
    backbone.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    backbone = apply_lora(backbone, LORA)
    encoder_config = EncoderConfig(pooling="last", padding_side="left", normalize=True, temperature=0.01,
                                   query_max_len=query_len, passage_max_len=passage_len, lora=dict(LORA))
    model = DualEncoder(backbone, None, encoder_config).to(device)
    model.train()
    return model


def random_features(count: int, max_len: int, vocab: int, gen, device: str) -> dict:
    """Left-padded random token ids, lengths from ``max_len // 2`` to ``max_len`` (the first at full length)."""
    import torch

    lengths = torch.randint(max_len // 2, max_len + 1, (count,), generator=gen)
    lengths[0] = max_len
    ids = torch.randint(2, vocab, (count, max_len), generator=gen)
    mask = (torch.arange(max_len)[None, :] >= (max_len - lengths)[:, None]).long()
    return {"input_ids": (ids * mask).to(device), "attention_mask": mask.to(device)}


def make_batch(batch: int, group: int, query_len: int, passage_len: int, vocab: int, device: str):
    import torch

    from hopscotch.retriever.training.batches import Batch

    gen = torch.Generator().manual_seed(0)
    queries = random_features(batch, query_len, vocab, gen, device)
    passages = random_features(batch * group, passage_len, vocab, gen, device)
    labels = torch.arange(batch, device=device) * group
    p_ids = torch.arange(batch * group, device=device)
    return Batch(queries, passages, labels, p_ids[labels].clone(), p_ids)


def measure_backend(model, batch, backend: str, start_state: dict, device: str, timed_steps: int,
                    deadline: Deadline) -> dict:
    """Warm-up step, then ``timed_steps`` steps from the same weights and seed: losses, s/step, peak memory."""
    import torch

    from hopscotch.retriever.training.loss import InfoNCELoss
    from hopscotch.retriever.training.step import full_step

    loss_fn = InfoNCELoss(backend=backend)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-4)
    losses, seconds, peaks = [], [], []
    for step in range(1 + timed_steps):
        if step > 1 and deadline.passed():
            break
        model.load_state_dict(start_state, strict=False)
        torch.manual_seed(0)  # the same LoRA dropout masks for both backends
        reset_peak(device)
        start = time.perf_counter()
        loss = full_step(model, batch, loss_fn, lambda value: value.backward())
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        synchronize(device)
        if step:  # step 0: compilation, autotuning, optimizer state
            losses.append(loss)
            seconds.append(time.perf_counter() - start)
            peaks.append(peak_gib(device))
    return {"losses": losses, "s_per_step": min(seconds), "peak": max(peaks) if peaks[0] is not None else None}


def run_qwen(rec, device: str = "cuda", deadline: Deadline | None = None, model: str = "qwen3-embedding-4b",
             batch: int = 4, group: int = 8, query_len: int = 512, passage_len: int = 1024,
             timed_steps: int = 2) -> None:
    """Section 5 (see the module docstring)."""
    deadline = deadline or Deadline()
    values = QWEN3_EMBEDDING_4B if model == "qwen3-embedding-4b" else TINY_QWEN3
    start = time.perf_counter()
    encoder = build_encoder(values, device, query_len, passage_len)
    total = sum(p.numel() for p in encoder.parameters())
    trainable = sum(p.numel() for p in encoder.parameters() if p.requires_grad)
    rec.row(f"qwen3 random init ({model} config)", f"{total / 1e6:,.1f} M parameters, {trainable / 1e6:,.2f} M "
            f"LoRA trainable, built in {time.perf_counter() - start:.1f} s")
    start_state = {k: v.detach().clone() for k, v in encoder.state_dict().items() if "lora_" in k}
    data = make_batch(batch, group, query_len, passage_len, values["vocab_size"], device)
    shape = f"{batch} x {query_len} query + {batch * group} x {passage_len} passage tokens, bf16, LoRA, grad ckpt"
    results = {}
    for backend in ("reference", "fused"):
        results[backend] = r = measure_backend(encoder, data, backend, start_state, device, timed_steps, deadline)
        rec.row(f"qwen3 step loss.backend={backend}", f"{r['s_per_step']:.2f} s/step, peak {fmt_gib(r['peak'])}, "
                f"loss {r['losses'][0]:.4f} ({shape})")
    ref, fused = results["reference"], results["fused"]
    diffs = [abs(a - b) / max(1.0, abs(b)) for a, b in zip(fused["losses"], ref["losses"])]
    ok = bool(diffs) and max(diffs) <= 1e-3
    memory = "" if ref["peak"] is None else f"; peak memory fused / reference {fused['peak'] / ref['peak']:.3f}x"
    rec.row("qwen3 fused vs reference", f"loss diff {max(diffs):.1e}; s/step fused / reference "
            f"{fused['s_per_step'] / ref['s_per_step']:.2f}x{memory}", "PASS" if ok else "FAIL")


if __name__ == "__main__":
    sys.exit(section_main('qwen', run_qwen, SIZES))
