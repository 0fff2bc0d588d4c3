"""The peer baseline of the multi-vector (ColBERT-style) model: a plain sentence-transformers fine-tune.

    python scripts/st_multivector_peer.py --data runs/agent_mv/data --out runs/peer_mv
    python scripts/st_multivector_peer.py --tuples a.jsonl b.jsonl --out runs/peer_mv --query-input reasoning

sentence-transformers' own classes end to end, none of Hopscotch's training code: a ``MultiVectorEncoder`` of
``Transformer`` (the bundled all-MiniLM-L6-v2, or ``--model``) -> ``Dense`` (hidden -> ``--dim``, no bias,
identity activation, on ``token_embeddings``; sentence-transformers' default ``nn.Linear`` init, seeded) ->
``MultiVectorMask`` (no skiplist) -> ``Normalize`` (what ``MultiVectorEncoder(minilm)`` itself builds for a
``SentenceTransformer`` checkpoint, with the projection size a flag and no markers, augmentation or
skiplist), trained by ``MultiVectorEncoderTrainer`` with ``MultiVectorEncoderTrainingArguments`` and
``MultiVectorMultipleNegativesRankingLoss`` (scale 1, MaxSim; in-batch + one hard negative) on
``(anchor, positive, negative)`` rows: the query text, the tuple's first positive and its first hard negative
(``title + " " + text``), tuples without a hard negative left out. Sampler ``no_duplicates`` (the loss's
recommendation). Optimizer as recipes/minilm_agent_multivector.yaml: AdamW, lr 5e-5, linear decay after 10%
warmup, weight decay 0.01, gradient norm clipped at 1.

Only the tuple files are read with Hopscotch's reader (``hopscotch.retriever.io.tuples``), and the query text
is written by Hopscotch's one formatter (``query_template.format_queries``, the one ``MultiVectorModel
.format_queries`` calls): ``--query-input query`` (default) is the query alone, any other variant
(``reasoning``, ``current_reasoning``, ``reasoning_tail:128``...) AgentIR's ``Reasoning: ...\\n\\nQuery: ...``
with the reasoning cut from the left to fit ``--query-max-len``.

Writes OUT/final (a ``MultiVectorEncoder`` folder: ``MultiVectorEncoder(path)`` and Hopscotch's
``load_multi_vector_model(path)`` both load it) and OUT/peer_summary.json (steps, seconds, samples/s, loss
history, settings, versions), each atomically. Offline: nothing is downloaded.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SOURCES = ("hotpot", "musique", "tongyi", "world")
DEFAULT_DATA = "runs/agent/data"  # OUT/data of scripts/train_agent_retriever.sh (the recipes' default OUT)


def default_tuples(data: str | os.PathLike) -> list[str]:
    """The four tuple files scripts/train_agent_retriever.sh writes to OUT/data."""
    return [str(Path(data) / f"{name}_tuples.jsonl") for name in SOURCES]


def build_peer_model(model_path: str, dim: int = 128, seed: int = 42, query_max_len: int = 256,
                     passage_max_len: int = 160, device: str | None = None):
    """A new ``MultiVectorEncoder``: Transformer -> Dense(hidden, dim) -> MultiVectorMask -> Normalize."""
    import torch
    from sentence_transformers import MultiVectorEncoder
    from sentence_transformers.base.modules import Dense, Normalize, Transformer
    from sentence_transformers.multi_vector_encoder.modules import MultiVectorMask

    local = {"local_files_only": True}
    transformer = Transformer(model_path, model_kwargs=dict(local), processor_kwargs=dict(local),
                              config_kwargs=dict(local), query_length=query_max_len, document_length=passage_max_len,
                              max_seq_length=max(query_max_len, passage_max_len))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        projection = Dense(transformer.get_embedding_dimension(), dim, bias=False,
                           activation_function=torch.nn.Identity(), module_input_name="token_embeddings")
    modules = [transformer, projection, MultiVectorMask(), Normalize(module_input_name="token_embeddings")]
    return MultiVectorEncoder(modules=modules, device=device, similarity_fn_name="maxsim")


def peer_rows(tuples, tokenizer, query_max_len: int, query_input: str = "query") -> tuple[dict, int]:
    """``{"anchor", "positive", "negative"}`` columns of the tuples that have a hard negative, and how many
    were left out (no hard negative)."""
    from hopscotch.retriever.model.query_input import QueryInput
    from hopscotch.retriever.model.query_template import format_document, format_queries

    variant = QueryInput.parse(query_input, "--query-input")
    kept = [t for t in tuples if t.negatives]
    anchors = format_queries(tokenizer, query_max_len, [t.query for t in kept], kept,
                             reasoning_aware=variant.uses_reasoning, query_input=variant)
    columns = {"anchor": anchors,
               "positive": [format_document(t.positives[0].title, t.positives[0].text) for t in kept],
               "negative": [format_document(t.negatives[0].title, t.negatives[0].text) for t in kept]}
    return columns, len(tuples) - len(kept)


def versions() -> dict:
    import datasets
    import sentence_transformers
    import torch
    import transformers

    return {"python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__, "sentence_transformers": sentence_transformers.__version__,
            "datasets": datasets.__version__}


def train_peer(model, columns: dict, args) -> dict:
    """sentence-transformers' trainer and multi-vector MNRL over ``columns``; returns timings and losses."""
    import torch
    from datasets import Dataset
    from sentence_transformers import MultiVectorEncoderTrainer, MultiVectorEncoderTrainingArguments
    from sentence_transformers.base.sampler import BatchSamplers
    from sentence_transformers.multi_vector_encoder.losses import MultiVectorMultipleNegativesRankingLoss
    from transformers import TrainerCallback
    from transformers.trainer_callback import PrinterCallback

    losses: list[dict] = []

    class Progress(TrainerCallback):
        def on_log(self, training_args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                losses.append({"step": state.global_step, "loss": float(logs["loss"])})
                print(f"peer: step {state.global_step}/{state.max_steps} loss {logs['loss']:.4f} "
                      f"lr {logs.get('learning_rate', 0):.2e} ({time.perf_counter() - started:.0f} s)", flush=True)

    sampler = BatchSamplers.NO_DUPLICATES if args.batch_sampler == "no_duplicates" else BatchSamplers.BATCH_SAMPLER
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="st_peer_") as tmp:
        training_args = MultiVectorEncoderTrainingArguments(
            output_dir=tmp, per_device_train_batch_size=args.batch_size, max_steps=args.steps,
            learning_rate=args.lr, warmup_steps=0.1, lr_scheduler_type="linear", weight_decay=0.01,
            max_grad_norm=1.0, seed=args.seed, data_seed=args.seed, batch_sampler=sampler,
            dataloader_drop_last=True, logging_steps=args.log_every, save_strategy="no", report_to="none",
            disable_tqdm=True, use_cpu=not torch.cuda.is_available())
        trainer = MultiVectorEncoderTrainer(model=model, args=training_args,
                                            train_dataset=Dataset.from_dict(columns),
                                            loss=MultiVectorMultipleNegativesRankingLoss(model),
                                            callbacks=[Progress()])
        trainer.remove_callback(PrinterCallback)  # Progress prints the losses (with the time)
        started = time.perf_counter()
        trainer.train()
        seconds = time.perf_counter() - started
    steps = int(trainer.state.global_step)
    return {"steps": steps, "seconds": round(seconds, 2),
            "samples_per_second": round(steps * args.batch_size / seconds, 3) if seconds > 0 else None,
            "losses": losses}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tuples", nargs="+", help="tuple JSONL files (default: the four under --data)")
    parser.add_argument("--data", default=DEFAULT_DATA,
                        help=f"OUT/data of scripts/train_agent_retriever.sh: {{{','.join(SOURCES)}}}_tuples.jsonl "
                             f"(default {DEFAULT_DATA})")
    parser.add_argument("--out", required=True, help="writes OUT/final and OUT/peer_summary.json")
    parser.add_argument("--model", help="backbone folder (default: the bundled all-MiniLM-L6-v2)")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--dim", type=int, default=128, help="token vector size (the Dense projection)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--query-input", default="query",
                        help="query text: 'query' (the query alone) or a reasoning-aware variant (reasoning, "
                             "current_reasoning, reasoning_tail:N, ...): 'Reasoning: ...\\n\\nQuery: ...'")
    parser.add_argument("--query-max-len", type=int, default=256, help="query tokens (the reasoning is cut to fit)")
    parser.add_argument("--passage-max-len", type=int, default=160, help="document tokens")
    parser.add_argument("--batch-sampler", choices=["no_duplicates", "batch_sampler"], default="no_duplicates")
    parser.add_argument("--log-every", type=int, default=5, help="print the loss every N steps")
    args = parser.parse_args(argv)

    from hopscotch.retriever.io.atomic import atomic_folder, check_target
    from hopscotch.retriever.io.common import write_json
    from hopscotch.retriever.io.tuples import read_training_tuples
    from hopscotch.retriever.model.loading import bundled_minilm_path, quiet_loading_bars
    from hopscotch.retriever.model.query_input import QueryInput

    QueryInput.parse(args.query_input, "--query-input")
    out = Path(args.out)
    final, summary_path = out / "final", out / "peer_summary.json"
    check_target(final, folder=True)
    check_target(summary_path)
    files = args.tuples or default_tuples(args.data)
    model_path = str(args.model or bundled_minilm_path())
    quiet_loading_bars()

    tuples = read_training_tuples(files)
    model = build_peer_model(model_path, args.dim, args.seed, args.query_max_len, args.passage_max_len)
    columns, skipped = peer_rows(tuples, model.tokenizer, args.query_max_len, args.query_input)
    rows = len(columns["anchor"])
    print(f"peer: {rows} rows (anchor, positive, negative) from {len(tuples)} tuples in {len(files)} files "
          f"({skipped} without a hard negative left out); query input {args.query_input}; "
          f"{args.steps} steps of {args.batch_size}", flush=True)
    if rows < args.batch_size:
        raise SystemExit(f"st_multivector_peer: {rows} rows, fewer than one batch of {args.batch_size}")

    run = train_peer(model, columns, args)
    with atomic_folder(final) as build:
        model.save(str(build))
    summary = {**run, "batch_size": args.batch_size, "lr": args.lr, "seed": args.seed, "dim": args.dim,
               "threads": args.threads, "query_input": args.query_input, "query_max_len": args.query_max_len,
               "passage_max_len": args.passage_max_len, "batch_sampler": args.batch_sampler,
               "model": model_path, "tuples": [str(f) for f in files], "rows": rows, "skipped_no_negative": skipped,
               "final": str(final),
               "sentence_transformers_classes": ["MultiVectorEncoder", "MultiVectorEncoderTrainer",
                                                 "MultiVectorEncoderTrainingArguments",
                                                 "MultiVectorMultipleNegativesRankingLoss"],
               "versions": versions()}
    write_json(summary_path, summary)
    print(f"peer: {run['steps']} steps in {run['seconds']:.0f} s ({run['samples_per_second']} samples/s): {final}",
          flush=True)
    return summary


if __name__ == "__main__":
    main()
