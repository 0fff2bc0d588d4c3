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

A thin driver: the model, the rows and the training are :mod:`hopscotch.retriever.experiments.st_peer`.
"""

from __future__ import annotations

import argparse

from hopscotch.retriever.experiments.st_peer import DEFAULT_DATA, SOURCES, default_tuples, run_peer


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
    return run_peer(args.out, args.tuples or default_tuples(args.data), args.model, steps=args.steps,
                    batch_size=args.batch_size, lr=args.lr, seed=args.seed, dim=args.dim, threads=args.threads,
                    query_input=args.query_input, query_max_len=args.query_max_len,
                    passage_max_len=args.passage_max_len, batch_sampler=args.batch_sampler, log_every=args.log_every)


if __name__ == "__main__":
    main()
