"""``hopscotch index --plan`` for a multi-vector (late-interaction) index: bytes per token, tokens per document,
what a build and a search hold, and the corpus size past which a full token index stops being sensible.

A token costs ``4 + dim * nbits / 8`` bytes compressed (centroid id + packed residual), plus about 8 bytes of
inverted-file entry per distinct (centroid, document) pair (``ivf_share`` of the tokens: 0.52 measured on
MuSiQue's paragraphs with 4,096 centroids; 0.6 by default) and 4 more for the same pair in the document -> centroids table, and 2 * dim bytes as the float16
token vectors the shards keep for rebuilding. Searching keeps the inverted file, that table and the token offsets
in RAM and reads codes and residuals through the page cache, so a search is
fast only while the compressed tokens fit in RAM: past ``ram_gib`` the plan says to rerank a first stage instead
(``search --rerank-model``), which costs nothing per corpus document.

>>> print(plan_multi_vector(5_000_000, 128, MultiVectorPlanOptions(tokens_per_doc=160, nbits=2)).format())
plan: 5,000,000 documents, dim 128, spec 'multi-vector 2-bit', 5 shards of 1,000,000 (shards layout)
disk: 222.5 GiB
  compressed tokens (36 B a token: id + 2-bit residual)    26.8 GiB
...
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import islice

from hopscotch.retriever.index.multi_vector.codec import (
    COMPRESS_CHUNK,
    assign_chunk,
    default_num_centroids,
    token_bytes,
)
from hopscotch.retriever.index.plan import IndexPlan, PlanOptions, human
from hopscotch.retriever.io.corpus import read_corpus

#: share of a document's tokens that open a new (centroid, document) inverted-file entry
IVF_SHARE = 0.6


@dataclass
class MultiVectorPlanOptions:
    """:param tokens_per_doc: mean stored tokens per document (measured with ``--corpus --model``, else given);
    :param nbits: residual bits per dimension; :param ram_gib: RAM a search machine gives the index;
    :param ivf_share: see :data:`IVF_SHARE`."""

    tokens_per_doc: float = 160.0
    nbits: int = 2
    ram_gib: float = 64.0
    ivf_share: float = IVF_SHARE


def plan_multi_vector(docs: int, dim: int, mv: MultiVectorPlanOptions | None = None,
                      options: PlanOptions | None = None) -> IndexPlan:
    """The plan of a multi-vector index of ``docs`` documents with ``dim``-d token vectors."""
    mv = mv or MultiVectorPlanOptions()
    o = options or PlanOptions()
    tokens = docs * mv.tokens_per_doc
    per_token = token_bytes(dim, mv.nbits)
    centroids = default_num_centroids(int(tokens))
    ivf = 8.0 * mv.ivf_share * tokens
    shard = min(o.shard_size, docs)
    sample = min(int(tokens), 64 * centroids)
    block = 4.0 * centroids * min(assign_chunk(centroids), max(tokens, 1))
    rows = [
        ("disk", f"compressed tokens ({per_token:g} B a token: id + {mv.nbits}-bit residual)", per_token * tokens),
        ("disk", "inverted file (centroid -> documents)", ivf),
        ("disk", "float16 token vectors kept in shards/ (for rebuilds)", 2.0 * dim * tokens),
        ("disk", "pooled document vectors, docids, lookup", (2.0 * dim + o.docid_bytes + 16.0) * docs),
        ("encode memory", "one shard's token vectors (float32 batches, their concatenation, the float16 copy)",
         10.0 * dim * mv.tokens_per_doc * shard),
        ("faiss training memory", f"k-means sample and its residuals ({sample:,} tokens x float32, twice)",
         8.0 * dim * sample),
        ("faiss training memory", "token -> centroid score block", block),
        ("faiss adding memory", f"compressing {COMPRESS_CHUNK:,} tokens a call (float32 tokens and residuals, "
         "bucket bytes, unpacked bits)", 17.0 * dim * min(tokens, COMPRESS_CHUNK)),
        ("faiss adding memory", "token -> centroid score block", block),
        ("faiss adding memory", "inverted-file build (unique centroid-document pairs)", 2 * ivf),
        ("search memory", "inverted file + distinct centroids a document + token offsets + centroids",
         1.5 * ivf + 8.0 * docs + 4.0 * dim * centroids),
        ("search memory", "compressed tokens through the page cache (for fast search)", per_token * tokens),
    ]
    if o.avg_doc_bytes:
        rows.append(("disk", "docstore (document text)", float(o.avg_doc_bytes) * docs))
    ram = mv.ram_gib * 1024 ** 3
    per_doc = (per_token + 12.0 * mv.ivf_share) * mv.tokens_per_doc + 8.0
    sensible = int(ram / per_doc)
    notes = [f"{mv.tokens_per_doc:g} tokens a document, {tokens:,.0f} tokens, {centroids:,} centroids (ColBERTv2's "
             "2^floor(log2(16 sqrt(tokens))))",
             f"{per_doc:,.0f} B a document in RAM to search fast: a {mv.ram_gib:g} GiB machine holds about "
             f"{sensible:,} documents"]
    if docs > sensible:
        notes.append(f"NOT SENSIBLE at {docs:,} documents: the compressed tokens ({human(per_token * tokens)}) exceed "
                     f"{mv.ram_gib:g} GiB of RAM; index single vectors (or BM25) and rerank the top 100 with "
                     "'search --rerank-model M --rerank-depth 100', which encodes only the candidates")
    hours = docs / (o.docs_per_second * max(o.gpus, 1)) / 3600 if o.docs_per_second else None
    return IndexPlan(docs, dim, f"multi-vector {mv.nbits}-bit", o.shard_size, "shards", rows, notes, hours)


def tokens_per_document(corpus, model, sample: int = 200) -> tuple[float, int]:
    """Mean stored token vectors a document (the model's own document encoding: marker, skiplist,
    ``passage_max_len``) over the first ``sample`` documents of ``corpus``, and the number read."""
    from hopscotch.retriever.model.multi_vector import load_multi_vector_model

    docs = list(islice(read_corpus(corpus, unique=False), sample))
    if not docs:
        return 0.0, 0
    vectors = load_multi_vector_model(model, device="cpu").encode_documents(docs)
    return sum(len(v) for v in vectors) / len(docs), len(docs)
