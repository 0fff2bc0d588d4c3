"""The peer baseline of the reranker recipe: sentence-transformers' own ``CrossEncoder`` fine-tune on the same tuples.

What a user writes with sentence-transformers alone: ``CrossEncoder`` of the bundled all-MiniLM-L6-v2 (or
``--model``) with ``num_labels=1`` (a new one-logit head, seeded) and ``max_length`` the pair's length,
``CrossEncoderTrainer`` with ``CrossEncoderTrainingArguments`` and its ``MultipleNegativesRankingLoss`` (its defaults:
sigmoid activation, scale 10, cross-entropy of the positive) over ``(anchor, positive, negative_1, ...,
negative_n)`` rows of our recipe's own tuple files: the query side, the tuple's first positive and its first ``n``
hard negatives (``title + " " + text``; tuples with fewer left out), plus ``--in-batch-negatives`` other candidates
of the batch per anchor (the loss's own default, 4: it samples at least one; recipes/minilm_agent_reranker.yaml scores
each query against its own group only, so a peer step reads 1 + 3 + 4 = 8 pairs per query where the recipe's reads 4).
The anchor is written by Hopscotch's one formatter (AgentIR's
``Reasoning: ...\\n\\nQuery: ...`` template, the reasoning cut from the left to ``--query-max-len`` tokens; ``--query-input
query``: the query alone), so both models read the same pairs; the document is cut by sentence-transformers itself
(``longest_first`` to ``--query-max-len + --passage-max-len``). Optimizer as the recipe: AdamW, lr 5e-5, linear decay after
10% warmup, weight decay 0.01, gradient norm clipped at 1; sampler ``no_duplicates``.

Writes OUT/final (a ``CrossEncoder`` folder; ``hopscotch search --rerank-model OUT/final`` reranks with it: a plain
``CrossEncoder`` folder reads the query alone, give ``--query-input reasoning`` for the template it trained on) and
OUT/peer_summary.json, each atomically. ``scripts/st_cross_encoder_peer.py`` is its command line.
"""

from __future__ import annotations

import os

from hopscotch_experiments.ablations.st_peer import default_tuples, peer_outputs, peer_parser, train_peer, versions

from hopscotch.retriever.io.atomic import atomic_folder
from hopscotch.retriever.io.common import write_json
from hopscotch.retriever.io.tuples import read_training_tuples
from hopscotch.retriever.model.query_input import QueryInput
from hopscotch.retriever.model.query_template import format_document, format_queries


def build_cross_encoder_peer(model_path: str, max_length: int, seed: int = 42, device: str | None = None):
    """``CrossEncoder(model_path, num_labels=1, max_length=...)`` as sentence-transformers loads it (offline); its new
    head drawn after ``torch.manual_seed(seed)``."""
    import torch
    from sentence_transformers import CrossEncoder

    torch.manual_seed(seed)
    return CrossEncoder(model_path, num_labels=1, max_length=max_length, device=device or "cpu",
                        local_files_only=True)


def cross_encoder_rows(tuples, tokenizer, query_max_len: int, negatives: int,
                       query_input: str = "reasoning") -> tuple[dict, int]:
    """``{"anchor", "positive", "negative_1", ...}`` columns of the tuples with at least ``negatives`` hard negatives,
    and how many were left out."""
    variant = QueryInput.parse(query_input, "--query-input")
    kept = [t for t in tuples if len(t.negatives) >= negatives]
    columns = {"anchor": format_queries(tokenizer, query_max_len, [t.query for t in kept], kept,
                                        reasoning_aware=variant.uses_reasoning, query_input=variant),
               "positive": [format_document(t.positives[0].title, t.positives[0].text) for t in kept]}
    for k in range(negatives):
        columns[f"negative_{k + 1}"] = [format_document(t.negatives[k].title, t.negatives[k].text) for t in kept]
    return columns, len(tuples) - len(kept)


def run_cross_encoder_peer(out: str | os.PathLike, files: list[str], model_path: str | None = None, *,
                           steps: int = 100, batch_size: int = 8, lr: float = 5e-5, seed: int = 42, threads: int = 2,
                           negatives: int = 3, in_batch_negatives: int = 4, query_input: str = "reasoning",
                           query_max_len: int = 128, passage_max_len: int = 128, batch_sampler: str = "no_duplicates",
                           log_every: int = 5) -> dict:
    """Train the peer on the tuple ``files``; writes OUT/final and OUT/peer_summary.json (steps, seconds, loss
    history, settings, versions), each atomically, and returns the summary."""
    if in_batch_negatives < 1:
        raise SystemExit("st_cross_encoder_peer: --in-batch-negatives must be >= 1 (sentence-transformers' "
                         "MultipleNegativesRankingLoss samples at least one)")
    if query_max_len > passage_max_len:
        raise SystemExit("st_cross_encoder_peer: --query-max-len must be <= --passage-max-len (the query side takes "
                         "at most half of the pair, as Hopscotch's cross-encoder)")
    final, summary_path, model_path = peer_outputs(out, model_path)
    tuples = read_training_tuples(files)
    model = build_cross_encoder_peer(model_path, query_max_len + passage_max_len, seed)
    columns, skipped = cross_encoder_rows(tuples, model.tokenizer, query_max_len, negatives, query_input)
    rows = len(columns["anchor"])
    print(f"peer: {rows} rows (anchor, positive, {negatives} negatives) from {len(tuples)} tuples in {len(files)} "
          f"files ({skipped} with fewer hard negatives left out); query input {query_input}; {steps} steps of "
          f"{batch_size}; {in_batch_negatives} in-batch negatives", flush=True)
    if rows < batch_size:
        raise SystemExit(f"st_cross_encoder_peer: {rows} rows, fewer than one batch of {batch_size}")
    run = train_peer(model, columns, steps=steps, batch_size=batch_size, lr=lr, seed=seed, threads=threads,
                     batch_sampler=batch_sampler, log_every=log_every, kind="cross_encoder",
                     loss_kwargs={"num_negatives": in_batch_negatives})
    with atomic_folder(final) as build:
        model.save(str(build))
    summary = {**run, "kind": "cross_encoder", "batch_size": batch_size, "lr": lr, "seed": seed, "threads": threads,
               "negatives": negatives, "in_batch_negatives": in_batch_negatives, "query_input": query_input,
               "query_max_len": query_max_len, "passage_max_len": passage_max_len, "batch_sampler": batch_sampler,
               "model": model_path, "tuples": [str(f) for f in files], "rows": rows, "skipped_few_negatives": skipped,
               "final": str(final),
               "sentence_transformers_classes": ["CrossEncoder", "CrossEncoderTrainer", "CrossEncoderTrainingArguments",
                                                 "cross_encoder.losses.MultipleNegativesRankingLoss"],
               "versions": versions()}
    write_json(summary_path, summary)
    print(f"peer: {run['steps']} steps in {run['seconds']:.0f} s: {final}", flush=True)
    return summary


def main_cli(argv=None, description: str = "") -> dict:
    """The command line of ``scripts/st_cross_encoder_peer.py``."""
    parser = peer_parser(description, batch_size=8)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--negatives", type=int, default=3, help="hard negatives per anchor (the recipe's "
                                                                 "data.group_size - 1)")
    parser.add_argument("--in-batch-negatives", type=int, default=4,
                        help="other candidates of the batch per anchor (default 4, the loss's own)")
    parser.add_argument("--query-input", default="reasoning",
                        help="query side: 'query' (the query alone) or a reasoning-aware variant (reasoning, "
                             "current_reasoning, reasoning_tail:N, ...): 'Reasoning: ...\\n\\nQuery: ...'")
    parser.add_argument("--query-max-len", type=int, default=128, help="query-side tokens (the reasoning is cut)")
    parser.add_argument("--passage-max-len", type=int, default=128, help="the document's share of the pair")
    args = parser.parse_args(argv)
    return run_cross_encoder_peer(
        args.out, args.tuples or default_tuples(args.data), args.model, steps=args.steps, batch_size=args.batch_size,
        lr=args.lr, seed=args.seed, threads=args.threads, negatives=args.negatives,
        in_batch_negatives=args.in_batch_negatives, query_input=args.query_input, query_max_len=args.query_max_len,
        passage_max_len=args.passage_max_len, batch_sampler=args.batch_sampler, log_every=args.log_every)
