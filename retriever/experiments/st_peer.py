"""The peer baseline of the multi-vector (ColBERT-style) model: a plain sentence-transformers fine-tune.

sentence-transformers' own classes end to end, none of Hopscotch's training code: a ``MultiVectorEncoder`` of
``Transformer`` (the bundled all-MiniLM-L6-v2, or another backbone) -> ``Dense`` (hidden -> ``dim``, no bias,
identity activation, on ``token_embeddings``; sentence-transformers' default ``nn.Linear`` init, seeded) ->
``MultiVectorMask`` (no skiplist) -> ``Normalize``, trained by ``MultiVectorEncoderTrainer`` with
``MultiVectorEncoderTrainingArguments`` and ``MultiVectorMultipleNegativesRankingLoss`` (scale 1, MaxSim;
in-batch + one hard negative) on ``(anchor, positive, negative)`` rows: the query text, the tuple's first
positive and its first hard negative (``title + " " + text``), tuples without a hard negative left out.
Optimizer as recipes/minilm_agent_multivector.yaml: AdamW, lr 5e-5, linear decay after 10% warmup, weight decay
0.01, gradient norm clipped at 1.

Only the tuple files are read with Hopscotch's reader (``hopscotch.retriever.io.tuples``), and the query text
is written by Hopscotch's one formatter (``query_template.format_queries``, the one ``MultiVectorModel
.format_queries`` calls). :func:`run_peer` writes OUT/final (a ``MultiVectorEncoder`` folder) and
OUT/peer_summary.json, each atomically; ``scripts/st_multivector_peer.py`` is its command line.
"""

from __future__ import annotations

import os
import platform
import tempfile
import time
from pathlib import Path

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
    """The versions of Python and the libraries the peer ran on."""
    import datasets
    import sentence_transformers
    import torch
    import transformers

    return {"python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__, "sentence_transformers": sentence_transformers.__version__,
            "datasets": datasets.__version__}


def train_peer(model, columns: dict, *, steps: int, batch_size: int, lr: float, seed: int, threads: int,
               batch_sampler: str = "no_duplicates", log_every: int = 5) -> dict:
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

    sampler = BatchSamplers.NO_DUPLICATES if batch_sampler == "no_duplicates" else BatchSamplers.BATCH_SAMPLER
    torch.set_num_threads(threads)
    with tempfile.TemporaryDirectory(prefix="st_peer_") as tmp:
        training_args = MultiVectorEncoderTrainingArguments(
            output_dir=tmp, per_device_train_batch_size=batch_size, max_steps=steps,
            learning_rate=lr, warmup_steps=0.1, lr_scheduler_type="linear", weight_decay=0.01,
            max_grad_norm=1.0, seed=seed, data_seed=seed, batch_sampler=sampler,
            dataloader_drop_last=True, logging_steps=log_every, save_strategy="no", report_to="none",
            disable_tqdm=True, use_cpu=not torch.cuda.is_available())
        trainer = MultiVectorEncoderTrainer(model=model, args=training_args,
                                            train_dataset=Dataset.from_dict(columns),
                                            loss=MultiVectorMultipleNegativesRankingLoss(model),
                                            callbacks=[Progress()])
        trainer.remove_callback(PrinterCallback)  # Progress prints the losses (with the time)
        started = time.perf_counter()
        trainer.train()
        seconds = time.perf_counter() - started
    done = int(trainer.state.global_step)
    return {"steps": done, "seconds": round(seconds, 2),
            "samples_per_second": round(done * batch_size / seconds, 3) if seconds > 0 else None,
            "losses": losses}


def run_peer(out: str | os.PathLike, files: list[str], model_path: str | None = None, *, steps: int = 100,
             batch_size: int = 32, lr: float = 5e-5, seed: int = 42, dim: int = 128, threads: int = 2,
             query_input: str = "query", query_max_len: int = 256, passage_max_len: int = 160,
             batch_sampler: str = "no_duplicates", log_every: int = 5) -> dict:
    """Train the peer on the tuple ``files`` from ``model_path`` (None: the bundled all-MiniLM-L6-v2); writes
    OUT/final and OUT/peer_summary.json (steps, seconds, samples/s, loss history, settings, versions), each
    atomically, and returns the summary."""
    from hopscotch.retriever.io.atomic import atomic_folder, check_target
    from hopscotch.retriever.io.common import write_json
    from hopscotch.retriever.io.tuples import read_training_tuples
    from hopscotch.retriever.model.loading import bundled_minilm_path, quiet_loading_bars
    from hopscotch.retriever.model.query_input import QueryInput

    QueryInput.parse(query_input, "--query-input")
    out = Path(out)
    final, summary_path = out / "final", out / "peer_summary.json"
    check_target(final, folder=True)
    check_target(summary_path)
    model_path = str(model_path or bundled_minilm_path())
    quiet_loading_bars()

    tuples = read_training_tuples(files)
    model = build_peer_model(model_path, dim, seed, query_max_len, passage_max_len)
    columns, skipped = peer_rows(tuples, model.tokenizer, query_max_len, query_input)
    rows = len(columns["anchor"])
    print(f"peer: {rows} rows (anchor, positive, negative) from {len(tuples)} tuples in {len(files)} files "
          f"({skipped} without a hard negative left out); query input {query_input}; "
          f"{steps} steps of {batch_size}", flush=True)
    if rows < batch_size:
        raise SystemExit(f"st_multivector_peer: {rows} rows, fewer than one batch of {batch_size}")

    run = train_peer(model, columns, steps=steps, batch_size=batch_size, lr=lr, seed=seed, threads=threads,
                     batch_sampler=batch_sampler, log_every=log_every)
    with atomic_folder(final) as build:
        model.save(str(build))
    summary = {**run, "batch_size": batch_size, "lr": lr, "seed": seed, "dim": dim,
               "threads": threads, "query_input": query_input, "query_max_len": query_max_len,
               "passage_max_len": passage_max_len, "batch_sampler": batch_sampler,
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
