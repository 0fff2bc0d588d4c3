"""The peer baselines of our recipes: plain sentence-transformers fine-tunes on the same tuples.

Two kinds (``kind``): ``multi_vector`` (the ColBERT-style peer, below) and ``single_vector``: a
``SentenceTransformer`` of the backbone as it is (the bundled all-MiniLM-L6-v2: its mean pooling and
normalisation; another backbone: sentence-transformers' defaults), trained by ``SentenceTransformerTrainer`` with
``SentenceTransformerTrainingArguments`` and ``MultipleNegativesRankingLoss`` (their defaults: scale 20, cosine;
in-batch + one hard negative) on the same ``(anchor, positive, negative)`` rows, its ``max_seq_length`` the query
length (what a user writing one model for both sides sets). ``scripts/st_single_vector_peer.py`` is its command line.

The multi-vector peer:

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

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

from hopscotch.retriever.io.atomic import atomic_folder, check_target
from hopscotch.retriever.io.common import write_json
from hopscotch.retriever.io.tuples import read_training_tuples
from hopscotch.retriever.model.loading import bundled_minilm_path, quiet_loading_bars
from hopscotch.retriever.model.query_input import QueryInput
from hopscotch.retriever.model.query_template import format_document, format_queries

SOURCES = ("hotpot", "musique", "tongyi_use", "world")
DEFAULT_DATA = "runs/agent/data"  # OUT/data of scripts/train_agent_retriever.sh (the recipes' default OUT)


def default_tuples(data: str | os.PathLike, tongyi_labels: str = "trajectory-use") -> list[str]:
    """The four tuple files scripts/train_agent_retriever.sh trains on: the decontaminated ones under
    ``OUT/data/clean/`` (the recipe never sees the uncleaned files, whose tuples may ask a dev or test question), with
    the Tongyi file of its default labels (``trajectory-use``: ``tongyi_use_tuples.jsonl``; ``top3``:
    ``tongyi_tuples.jsonl``, as ``TONGYI_LABELS=top3`` trains), so that a peer runs on our recipe's own tuples."""
    names = [("tongyi" if tongyi_labels == "top3" and n == "tongyi_use" else n) for n in SOURCES]
    return [str(Path(data) / "clean" / f"{name}_tuples.jsonl") for name in names]


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


KINDS = ("multi_vector", "single_vector")


def build_single_vector_peer(model_path: str, max_seq_length: int = 256, seed: int = 42, device: str | None = None):
    """A ``SentenceTransformer`` of ``model_path`` as sentence-transformers loads it (offline), ``max_seq_length``
    tokens on both sides."""
    import torch
    from sentence_transformers import SentenceTransformer

    torch.manual_seed(seed)  # a backbone without a pooling config gets sentence-transformers' own modules
    model = SentenceTransformer(model_path, device=device or "cpu", local_files_only=True)
    model.max_seq_length = max_seq_length
    return model


def _trainer_classes(kind: str):
    """``(Trainer, TrainingArguments, loss class)`` of sentence-transformers for the peer ``kind`` (``cross_encoder``:
    the cross-encoder peer of :mod:`hopscotch_experiments.ablations.st_cross_encoder_peer`)."""
    if kind == "cross_encoder":
        from sentence_transformers.cross_encoder import CrossEncoderTrainer, CrossEncoderTrainingArguments
        from sentence_transformers.cross_encoder.losses import MultipleNegativesRankingLoss

        return CrossEncoderTrainer, CrossEncoderTrainingArguments, MultipleNegativesRankingLoss
    if kind == "single_vector":
        from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
        from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

        return SentenceTransformerTrainer, SentenceTransformerTrainingArguments, MultipleNegativesRankingLoss
    from sentence_transformers import MultiVectorEncoderTrainer, MultiVectorEncoderTrainingArguments
    from sentence_transformers.multi_vector_encoder.losses import MultiVectorMultipleNegativesRankingLoss

    return MultiVectorEncoderTrainer, MultiVectorEncoderTrainingArguments, MultiVectorMultipleNegativesRankingLoss


def train_peer(model, columns: dict, *, steps: int, batch_size: int, lr: float, seed: int, threads: int,
               batch_sampler: str = "no_duplicates", log_every: int = 5, kind: str = "multi_vector",
               loss_kwargs: dict | None = None) -> dict:
    """sentence-transformers' trainer and MNRL (multi-vector's, the single-vector one, or the cross-encoder's, with
    ``loss_kwargs``) over ``columns``; returns timings and losses."""
    import torch
    from datasets import Dataset
    from sentence_transformers.base.sampler import BatchSamplers
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
    trainer_class, args_class, loss_class = _trainer_classes(kind)
    torch.set_num_threads(threads)
    with tempfile.TemporaryDirectory(prefix="st_peer_") as tmp:
        training_args = args_class(
            output_dir=tmp, per_device_train_batch_size=batch_size, max_steps=steps,
            learning_rate=lr, warmup_steps=0.1, lr_scheduler_type="linear", weight_decay=0.01,
            max_grad_norm=1.0, seed=seed, data_seed=seed, batch_sampler=sampler,
            dataloader_drop_last=True, logging_steps=log_every, save_strategy="no", report_to="none",
            disable_tqdm=True, use_cpu=not torch.cuda.is_available())
        trainer = trainer_class(model=model, args=training_args, train_dataset=Dataset.from_dict(columns),
                                loss=loss_class(model, **(loss_kwargs or {})), callbacks=[Progress()])
        trainer.remove_callback(PrinterCallback)  # Progress prints the losses (with the time)
        started = time.perf_counter()
        trainer.train()
        seconds = time.perf_counter() - started
    done = int(trainer.state.global_step)
    return {"steps": done, "seconds": round(seconds, 2),
            "samples_per_second": round(done * batch_size / seconds, 3) if seconds > 0 else None,
            "losses": losses}


def peer_outputs(out: str | os.PathLike, model_path: str | None) -> tuple[Path, Path, str]:
    """``(OUT/final, OUT/peer_summary.json, the backbone's folder)``: both outputs checked writable before any work,
    the backbone ``model_path`` or the bundled all-MiniLM-L6-v2."""
    out = Path(out)
    final, summary_path = out / "final", out / "peer_summary.json"
    check_target(final, folder=True)
    check_target(summary_path)
    quiet_loading_bars()
    return final, summary_path, str(model_path or bundled_minilm_path())


def run_peer(out: str | os.PathLike, files: list[str], model_path: str | None = None, *, steps: int = 100,
             batch_size: int = 32, lr: float = 5e-5, seed: int = 42, dim: int = 128, threads: int = 2,
             query_input: str = "query", query_max_len: int = 256, passage_max_len: int = 160,
             batch_sampler: str = "no_duplicates", log_every: int = 5, kind: str = "multi_vector") -> dict:
    """Train the ``kind`` peer on the tuple ``files`` from ``model_path`` (None: the bundled all-MiniLM-L6-v2); writes
    OUT/final and OUT/peer_summary.json (steps, seconds, samples/s, loss history, settings, versions), each
    atomically, and returns the summary."""
    QueryInput.parse(query_input, "--query-input")
    if kind not in KINDS:
        raise ValueError(f"kind: expected one of {KINDS}, got {kind!r}")
    final, summary_path, model_path = peer_outputs(out, model_path)
    tuples = read_training_tuples(files)
    if kind == "single_vector":
        model = build_single_vector_peer(model_path, query_max_len, seed)
    else:
        model = build_peer_model(model_path, dim, seed, query_max_len, passage_max_len)
    columns, skipped = peer_rows(tuples, model.tokenizer, query_max_len, query_input)
    rows = len(columns["anchor"])
    print(f"peer: {rows} rows (anchor, positive, negative) from {len(tuples)} tuples in {len(files)} files "
          f"({skipped} without a hard negative left out); query input {query_input}; "
          f"{steps} steps of {batch_size}", flush=True)
    if rows < batch_size:
        raise SystemExit(f"st_{kind.replace('_', '')}_peer: {rows} rows, fewer than one batch of {batch_size}")

    run = train_peer(model, columns, steps=steps, batch_size=batch_size, lr=lr, seed=seed, threads=threads,
                     batch_sampler=batch_sampler, log_every=log_every, kind=kind)
    with atomic_folder(final) as build:
        model.save(str(build))
    classes = (["SentenceTransformer", "SentenceTransformerTrainer", "SentenceTransformerTrainingArguments",
                "MultipleNegativesRankingLoss"] if kind == "single_vector" else
               ["MultiVectorEncoder", "MultiVectorEncoderTrainer", "MultiVectorEncoderTrainingArguments",
                "MultiVectorMultipleNegativesRankingLoss"])
    summary = {**run, "kind": kind, "batch_size": batch_size, "lr": lr, "seed": seed,
               "dim": dim if kind == "multi_vector" else None,
               "threads": threads, "query_input": query_input, "query_max_len": query_max_len,
               "passage_max_len": passage_max_len, "batch_sampler": batch_sampler,
               "model": model_path, "tuples": [str(f) for f in files], "rows": rows, "skipped_no_negative": skipped,
               "final": str(final),
               "sentence_transformers_classes": classes,
               "versions": versions()}
    write_json(summary_path, summary)
    print(f"peer: {run['steps']} steps in {run['seconds']:.0f} s ({run['samples_per_second']} samples/s): {final}",
          flush=True)
    return summary


def peer_parser(description: str, batch_size: int):
    """The flags every peer's command line has: its tuples, output, backbone, schedule and sampler."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--tuples", nargs="+", help="tuple JSONL files (default: the four under --data)")
    parser.add_argument("--data", default=DEFAULT_DATA,
                        help=f"OUT/data of scripts/train_agent_retriever.sh: {{{','.join(SOURCES)}}}_tuples.jsonl "
                             f"(default {DEFAULT_DATA})")
    parser.add_argument("--out", required=True, help="writes OUT/final and OUT/peer_summary.json")
    parser.add_argument("--model", help="backbone folder (default: the bundled all-MiniLM-L6-v2)")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=batch_size)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--batch-sampler", choices=["no_duplicates", "batch_sampler"], default="no_duplicates")
    parser.add_argument("--log-every", type=int, default=5, help="print the loss every N steps")
    return parser


def main_cli(argv=None, kind: str = "multi_vector", description: str = "") -> dict:
    """The command line of ``scripts/st_multivector_peer.py`` and ``scripts/st_single_vector_peer.py``."""
    parser = peer_parser(description, batch_size=32)
    if kind == "multi_vector":
        parser.add_argument("--dim", type=int, default=128, help="token vector size (the Dense projection)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--query-input", default="query" if kind == "multi_vector" else "reasoning",
                        help="query text: 'query' (the query alone) or a reasoning-aware variant (reasoning, "
                             "current_reasoning, reasoning_tail:N, ...): 'Reasoning: ...\\n\\nQuery: ...'")
    parser.add_argument("--query-max-len", type=int, default=256, help="query tokens (the reasoning is cut to fit)")
    if kind == "multi_vector":
        parser.add_argument("--passage-max-len", type=int, default=160, help="document tokens")
    args = parser.parse_args(argv)
    return run_peer(args.out, args.tuples or default_tuples(args.data), args.model, steps=args.steps,
                    batch_size=args.batch_size, lr=args.lr, seed=args.seed, dim=getattr(args, "dim", 128),
                    threads=args.threads, query_input=args.query_input, query_max_len=args.query_max_len,
                    passage_max_len=getattr(args, "passage_max_len", 160), batch_sampler=args.batch_sampler,
                    log_every=args.log_every, kind=kind)

