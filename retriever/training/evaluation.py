"""The dev-set hook: embed a small corpus and its queries with the model being trained, search exactly
(FAISS inner product), score with :func:`hopscotch.retriever.evaluation.metrics.evaluate`. A multi-vector
model's corpus and queries are encoded as token vectors and every document scored by MaxSim.

Example::

    dev = DevEvaluator("dev/queries.jsonl", "dev/corpus.jsonl", "dev/qrels.tsv", metric="ndcg@10")
    result = dev(model)          # EvalResult; result.mean["ndcg@10"]
"""

from __future__ import annotations

import numpy as np
import torch

from hopscotch.retriever.evaluation.metrics import EvalResult, evaluate
from hopscotch.retriever.io.corpus import read_corpus
from hopscotch.retriever.io.qrels import read_qrels
from hopscotch.retriever.io.queries import read_queries
from hopscotch.retriever.model.dense_encoder import exact_search


def embed_texts(model, items: list, kind: str, batch_size: int) -> np.ndarray:
    """Embed ``(title, text)`` passages or ``(query, reasoning)`` queries, longest first, in input order."""
    order = sorted(range(len(items)), key=lambda i: -sum(len(x or "") for x in items[i]))
    out = np.empty((len(items), model.dim), dtype=np.float32)
    device = next(model.parameters()).device
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            chunk = [items[i] for i in rows]
            if kind == "passage":
                features = model.tokenize_passages(chunk)
            else:
                features = model.tokenize_queries([q for q, _ in chunk], [r for _, r in chunk])
            features = {k: v.to(device) for k, v in features.items()}
            out[rows] = model.encode(features, kind).float().cpu().numpy()
    return out


def maxsim_search(model, docs: list, queries: list, k: int, batch_size: int,
                  docs_per_block: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    """Exact MaxSim search of a :class:`~hopscotch.retriever.model.multi_vector.MultiVectorModel`: the top ``k``
    scores and document rows of each query, as :func:`~hopscotch.retriever.model.dense_encoder.exact_search`."""
    from hopscotch.kernels.maxsim_reference import maxsim_scores

    vectors = model.encode_documents([(d.title, d.text) for d in docs], batch_size)
    tokens = torch.nn.utils.rnn.pad_sequence(vectors, batch_first=True)
    mask = torch.arange(tokens.shape[1]) < torch.tensor([len(v) for v in vectors])[:, None]
    k = min(k, len(docs))
    scores, rows = np.empty((len(queries), k), dtype=np.float32), np.empty((len(queries), k), dtype=np.int64)
    encoded = model.encode_queries([q.text for q in queries], [q.reasoning for q in queries], batch_size=batch_size)
    for i, q in enumerate(encoded):
        s = torch.cat([maxsim_scores(q[None], tokens[j:j + docs_per_block], None, mask[j:j + docs_per_block])[0]
                       for j in range(0, len(docs), docs_per_block)])
        top = torch.topk(s, k)
        scores[i], rows[i] = top.values.numpy(), top.indices.numpy()
    return scores, rows


class DevEvaluator:
    """Evaluate a :class:`~hopscotch.retriever.model.dual_encoder.DualEncoder` (or a multi-vector model being
    trained) on a dev set held in memory."""

    def __init__(self, queries, corpus, qrels, metric: str = "ndcg@10", batch_size: int = 64,
                 max_queries: int | None = None, k: int = 100):
        self.qrels = read_qrels(qrels)
        self.queries = [q for q in read_queries(queries) if q.qid in self.qrels][:max_queries]
        self.docs = list(read_corpus(corpus))
        self.metric = metric
        self.batch_size = batch_size
        self.k = k

    def __call__(self, model) -> EvalResult:
        was_training = model.training
        model.eval()
        try:
            if hasattr(model, "multi_vector"):
                scores, rows = maxsim_search(model.multi_vector, self.docs, self.queries, self.k, self.batch_size)
            else:
                doc_emb = embed_texts(model, [(d.title, d.text) for d in self.docs], "passage", self.batch_size)
                q_emb = embed_texts(model, [(q.text, q.reasoning) for q in self.queries], "query", self.batch_size)
        finally:
            model.train(was_training)
        if not hasattr(model, "multi_vector"):
            scores, rows = exact_search(doc_emb, q_emb, self.k)
        run = {q.qid: {self.docs[j].docid: float(s) for s, j in zip(srow, jrow) if j >= 0}
               for q, srow, jrow in zip(self.queries, scores, rows)}
        qrels = {q.qid: self.qrels[q.qid] for q in self.queries}
        metrics = [self.metric] + [m for m in ("recall@100",) if m != self.metric]
        return evaluate(run, qrels, metrics)
