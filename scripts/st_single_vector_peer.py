"""The peer baseline of the single-vector recipe: a plain sentence-transformers fine-tune on the same tuples.

    python scripts/st_single_vector_peer.py --data runs/agent/data --out runs/peer_sv
    python scripts/st_single_vector_peer.py --tuples a.jsonl b.jsonl --out runs/peer_sv --query-input query

What a user writes with sentence-transformers alone: ``SentenceTransformer`` of the bundled all-MiniLM-L6-v2 (or
``--model``), ``SentenceTransformerTrainer`` with ``SentenceTransformerTrainingArguments`` and
``MultipleNegativesRankingLoss`` (scale 20, cosine; in-batch + one hard negative) on ``(anchor, positive, negative)``
rows of our recipe's own tuple files: the query text, the tuple's first positive and its first hard negative
(``title + " " + text``). The anchor is AgentIR's ``Reasoning: ...\\n\\nQuery: ...`` template (``--query-input
reasoning``, the default; the reasoning cut from the left to fit ``--query-max-len``), or the query alone
(``--query-input query``). Optimizer as recipes/minilm_agent.yaml: AdamW, lr 5e-5, linear decay after 10% warmup,
weight decay 0.01, gradient norm clipped at 1; sampler ``no_duplicates``.

Writes OUT/final (a ``SentenceTransformer`` folder, which ``hopscotch index`` / ``search`` take as ``--model``) and
OUT/peer_summary.json, each atomically. Offline. A thin driver over :mod:`hopscotch_experiments.ablations.st_peer`.
"""

from __future__ import annotations

from hopscotch_experiments.ablations.st_peer import main_cli


def main(argv=None) -> dict:
    return main_cli(argv, kind="single_vector", description=__doc__.split("\n")[0])


if __name__ == "__main__":
    main()
