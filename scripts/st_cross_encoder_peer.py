"""The peer baseline of the reranker recipe: sentence-transformers' own CrossEncoder fine-tune on the same tuples.

    python scripts/st_cross_encoder_peer.py --data runs/agent_reranker/data --out runs/peer_ce
    python scripts/st_cross_encoder_peer.py --tuples a.jsonl b.jsonl --out runs/peer_ce --steps 20

What a user writes with sentence-transformers alone: ``CrossEncoder`` of the bundled all-MiniLM-L6-v2 (``num_labels=1``,
``max_length`` the pair's 256 tokens), ``CrossEncoderTrainer`` with ``CrossEncoderTrainingArguments`` and its
``MultipleNegativesRankingLoss`` (defaults: sigmoid, scale 10, 4 in-batch negatives) over ``(anchor, positive,
negative_1..3)`` rows of our recipe's own tuple files, the anchor in AgentIR's template with the reasoning cut from the
left to 128 tokens (as recipes/minilm_agent_reranker.yaml reads it). Optimizer as the recipe: AdamW, lr 5e-5, linear
decay after 10% warmup, weight decay 0.01, gradient norm clipped at 1; 100 steps of 8 anchors.

Writes OUT/final (a ``CrossEncoder`` folder: rerank with ``hopscotch search --rerank-model OUT/final --query-input
reasoning``) and OUT/peer_summary.json, each atomically. Offline. A thin driver over
:mod:`hopscotch_experiments.ablations.st_cross_encoder_peer`.
"""

from __future__ import annotations

from hopscotch_experiments.ablations.st_cross_encoder_peer import main_cli


def main(argv=None) -> dict:
    return main_cli(argv, description=__doc__.split("\n")[0])


if __name__ == "__main__":
    main()
