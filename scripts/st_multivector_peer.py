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

A thin driver: the model, the rows and the training are :mod:`hopscotch_experiments.ablations.st_peer`.
"""

from __future__ import annotations

from hopscotch_experiments.ablations.st_peer import main_cli


def main(argv=None) -> dict:
    return main_cli(argv, kind="multi_vector", description=__doc__.split("\n")[0])


if __name__ == "__main__":
    main()
