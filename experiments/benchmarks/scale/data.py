"""Inputs of the cost-curve benchmark (:mod:`.run`): a corpus of any size made of real sentences, real questions as
queries, the encoders it indexes with, and the IVF spec scaled with the corpus.

**Documents.** Every sentence of the source corpora (by default HotpotQA's and MuSiQue's Wikipedia paragraphs of the
shared data, 6,748 paragraphs, ~30,000 sentences) goes into a pool; document ``i`` is 2 to 6 sentences drawn from
the pool (seeded by ``i``'s block of :data:`BLOCK` documents, so the first 10,000 documents of the 1M corpus are the
10,000 corpus), titled with the title of its first sentence's paragraph. Every sentence is real text and no two
documents repeat one another, so BM25's postings, the encoder's token lengths and the vectors' spread look like a
real corpus of that size rather than one paragraph copied 100 times (copies would make every exact top-100 a set
of ties, and recall against it meaningless); what is *not* real is the topical coherence of a document. Written as
the JSONL ``hopscotch index`` reads (``_id``, ``title``, ``text``; :mod:`hopscotch.retriever.io.corpus`).

**Queries.** The questions of the same sets (HotpotQA's 500, then MuSiQue's 100): real questions, none of them a
document.

**Encoders** (``--model``): ``minilmN`` is all-MiniLM-L6-v2 cut to its first N of 6 layers (its own
weights, tokenizer, 384-d mean pooling; ``minilm1``, the default, costs a sixth of MiniLM's encoder a token); ``random`` the same shape
with random weights; ``minilm`` the whole model; anything else a model folder. The index path, the dimension and
so the plan are the same for all of them; the encode cost is the chosen model's, and recall depends on how its
vectors spread (a random BERT's are nearly parallel). The multi-vector model is
:func:`~hopscotch.retriever.model.multi_vector.build_multi_vector_model` over the same backbone (untrained,
orthogonal projection).
"""

from __future__ import annotations

import math
import re
from itertools import islice
from pathlib import Path

import numpy as np

from hopscotch.retriever.index.faiss_spec import auto_ivf, auto_nlist, is_auto
from hopscotch.retriever.io.common import write_jsonl
from hopscotch.retriever.io.corpus import read_corpus
from hopscotch.retriever.io.queries import read_queries
from hopscotch.retriever.model.loading import bundled_minilm_path

#: documents drawn from one seeded generator: document i depends on the seed and i only
BLOCK = 10_000
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
DEFAULT_SOURCES = ("hotpotqa_ircot/corpus.jsonl", "musique_hipporag/corpus.jsonl")
DEFAULT_QUERY_SOURCES = ("hotpotqa_ircot/queries.jsonl", "musique_hipporag/queries.jsonl")
ENCODERS = ("minilm2", "minilm1", "random", "minilm")  # minilmN: MiniLM's first N layers


class SentencePool:
    """Every sentence (4 words or more) of the source corpora and the title of the paragraph it came from."""

    def __init__(self, sources):
        self.titles: list[str] = []
        self.sentences: list[str] = []
        owner: list[int] = []
        for source in sources:
            for doc in read_corpus(source, unique=False):
                kept = [s.strip() for s in SENTENCE_END.split(doc.text or "") if len(s.split()) >= 4]
                if kept:
                    self.titles.append(doc.title or "")
                    self.sentences += kept
                    owner += [len(self.titles) - 1] * len(kept)
        if not self.sentences:
            raise ValueError(f"no sentence of 4 words or more in {', '.join(map(str, sources))}")
        self.owner = np.asarray(owner, dtype=np.int64)

    def block(self, index: int, seed: int) -> list[dict]:
        """The :data:`BLOCK` documents of block ``index`` (ids ``s00000000`` on)."""
        rng = np.random.default_rng([seed, index])
        counts = rng.integers(2, 7, size=BLOCK)
        picks = rng.integers(0, len(self.sentences), size=int(counts.sum()))
        ends = np.cumsum(counts)
        docs = []
        for i, (end, count) in enumerate(zip(ends.tolist(), counts.tolist())):
            chosen = picks[end - count:end]
            docs.append({"_id": f"s{index * BLOCK + i:08d}", "title": self.titles[self.owner[chosen[0]]],
                         "text": " ".join(self.sentences[j] for j in chosen.tolist())})
        return docs

    def documents(self, n: int, seed: int = 0):
        """The first ``n`` documents."""
        for index in range(math.ceil(n / BLOCK)):
            yield from self.block(index, seed)[:n - index * BLOCK]


def write_corpus(pool: SentencePool, n: int, path: str | Path, seed: int = 0) -> dict:
    """Write the first ``n`` documents to ``path`` (JSONL, atomically); their count, bytes and mean bytes."""
    docs = write_jsonl(path, pool.documents(n, seed))
    size = Path(path).stat().st_size
    return {"docs": docs, "bytes": size, "avg_doc_bytes": size / max(docs, 1), "pool_sentences": len(pool.sentences),
            "pool_paragraphs": len(pool.titles)}


def write_queries(sources, n: int, path: str | Path) -> int:
    """The first ``n`` questions of ``sources`` (in order) as ``{_id, text}`` JSONL; returns how many."""
    rows = ({"_id": q.qid, "text": q.text} for source in sources for q in read_queries(source))
    return write_jsonl(path, islice(rows, n))


def ivf_spec(template: str, docs: int, dim: int = 384) -> str:
    """``auto``: the IVF ``--spec auto`` builds above its Flat cut-off (at any size here); else ``template``
    with ``{nlist}`` replaced by ``--spec auto``'s list count (a spec without it is used as given)."""
    if is_auto(template):
        return auto_ivf(docs, dim)[0]
    return template.replace("{nlist}", str(auto_nlist(docs)))


def build_scale_encoder(kind: str, out: str | Path, max_length: int, seed: int = 0) -> str:
    """The folder of encoder ``kind`` (:data:`ENCODERS` or a model path; see the module doc), saved under ``out``
    once (``minilm`` and paths are used as they are)."""
    layers = int(kind[6:]) if re.fullmatch(r"minilm[1-5]", kind) else None
    if layers is None and kind != "random":
        return kind
    out = Path(out)
    st_dir = out / kind
    if (st_dir / "modules.json").is_file():
        return str(st_dir)
    import torch
    from sentence_transformers import SentenceTransformer, models
    from transformers import AutoModel, AutoTokenizer, BertConfig, BertModel

    minilm = bundled_minilm_path()
    tok = AutoTokenizer.from_pretrained(minilm)
    if layers:
        model = AutoModel.from_pretrained(minilm, local_files_only=True)
        model.encoder.layer = model.encoder.layer[:layers]
        model.config.num_hidden_layers = layers
    else:
        torch.manual_seed(seed)
        model = BertModel(BertConfig(vocab_size=tok.vocab_size, hidden_size=384, num_hidden_layers=2,
                                     num_attention_heads=12, intermediate_size=1536, max_position_embeddings=512))
    hf_dir = out / f"{kind}.hf"
    model.save_pretrained(hf_dir)
    tok.save_pretrained(hf_dir)
    word = models.Transformer(str(hf_dir), max_seq_length=max_length)
    width = (getattr(word, "get_embedding_dimension", None) or word.get_word_embedding_dimension)()
    modules = [word, models.Pooling(width, pooling_mode="mean"), models.Normalize()]
    SentenceTransformer(modules=modules, device="cpu").save(str(st_dir))
    return str(st_dir)


def build_mv_model(backbone: str, out: str | Path, dim: int, passage_max_len: int, query_max_len: int = 32,
                   seed: int = 0) -> str:
    """An untrained multi-vector model over ``backbone`` (``dim``-d tokens), saved at ``out`` once."""
    out = Path(out)
    if not (out / "hopscotch_config.json").is_file():
        from hopscotch.retriever.model.multi_vector import build_multi_vector_model

        build_multi_vector_model(backbone, dim=dim, query_max_len=query_max_len, passage_max_len=passage_max_len,
                                 seed=seed, device="cpu").save(out)
    return str(out)
