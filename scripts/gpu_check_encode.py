"""GPU check, section 2: Hopscotch's sharded encoder against ``SentenceTransformer.encode`` on CUDA.

Same documents (a generated world's corpus), same model (the bundled all-MiniLM-L6-v2), batch size
and maximum length, fp16:

* ``hopscotch``: :func:`hopscotch.retriever.index.encode.encode_corpus` from the corpus file to finished
  float16 shards (reading, encoding under fp16 autocast, writing shards, lookup table and manifest all
  inside the timed call; the encoder is loaded and warmed up before it);
* ``sentence-transformers``: ``model.half().encode(texts, ...)`` on the same texts already in memory.

Both are warmed up first and timed ``repeats`` times (best run). The embeddings are compared at the
end: the row passes when every pair's cosine is at least 0.99 (mean at least 0.999).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from hopscotch_experiments.benchmarks.gpu_check import Deadline, section_main, synchronize

SIZES = {
    "full": {"docs": 20000, "batch_size": 256, "max_length": 256, "repeats": 2, "precision": "fp16"},
    "tiny": {"docs": 40, "batch_size": 16, "max_length": 64, "repeats": 1, "precision": "fp32"},
}


def make_corpus(work: Path, docs: int) -> tuple[Path, list[str]]:
    """A generated world's ``corpus.jsonl`` and its documents as the model sees them."""
    from hopscotch.data_synth.world import build_world, write_world
    from hopscotch.retriever.io.corpus import read_corpus
    from hopscotch.retriever.model.query_template import format_document

    write_world(build_world(seed=11, docs=docs, questions=20), work / "world")
    corpus = work / "world" / "corpus.jsonl"
    return corpus, [format_document(d.title, d.text) for d in read_corpus(corpus)]


def run_encode_corpus(corpus: Path, out: Path, encoder, **options):
    """``encode_corpus`` of the bundled model with ``options`` (an ``EncodeOptions`` where it takes one)."""
    from hopscotch.retriever.index import encode

    if hasattr(encode, "EncodeOptions"):
        return encode.encode_corpus(corpus, "minilm", out, encode.EncodeOptions(**options), encoder=encoder)
    return encode.encode_corpus(corpus, "minilm", out, encoder=encoder, **options)


def time_hopscotch(corpus: Path, texts: list[str], out: Path, device: str, batch_size: int, max_length: int,
                   precision: str, repeats: int, deadline: Deadline) -> tuple[float, np.ndarray]:
    """Best docs/s of ``encode_corpus`` and the embeddings it wrote."""
    from hopscotch.retriever.index.layout import load_shard_embeddings
    from hopscotch.retriever.model.dense_encoder import DenseEncoder

    encoder = DenseEncoder("minilm", max_length=max_length, batch_size=batch_size, device=device)
    encoder.encode_texts(texts[:2 * batch_size])  # warm-up: CUDA context, cuBLAS, kernels
    best = 0.0
    for attempt in range(repeats):
        if attempt and deadline.passed():
            break
        shutil.rmtree(out, ignore_errors=True)
        synchronize(device)
        start = time.perf_counter()
        result = run_encode_corpus(corpus, out, encoder, shard_size=5000, batch_size=batch_size,
                                   max_length=max_length, device=device, precision=precision, show_progress=False)
        synchronize(device)
        best = max(best, result.meta.num_docs / (time.perf_counter() - start))
    emb = np.concatenate([np.asarray(load_shard_embeddings(out, s), dtype=np.float32)
                          for s in range(result.meta.num_shards)])
    return best, emb


def time_st(texts: list[str], device: str, batch_size: int, max_length: int, precision: str, repeats: int,
            deadline: Deadline) -> tuple[float, np.ndarray]:
    """Best docs/s of ``SentenceTransformer.encode`` (fp16 weights when ``precision`` is fp16)."""
    from hopscotch.retriever.model.loading import load_sentence_transformer

    model = load_sentence_transformer("minilm", device=device, max_length=max_length)
    if precision == "fp16":
        model.half()
    options = {"batch_size": batch_size, "normalize_embeddings": True, "convert_to_numpy": True,
               "show_progress_bar": False}
    model.encode(texts[:2 * batch_size], **options)  # warm-up
    best, emb = 0.0, None
    for attempt in range(repeats):
        if attempt and deadline.passed():
            break
        synchronize(device)
        start = time.perf_counter()
        emb = model.encode(texts, **options)
        synchronize(device)
        best = max(best, len(texts) / (time.perf_counter() - start))
    return best, np.asarray(emb, dtype=np.float32)


def run_encode(rec, device: str = "cuda", deadline: Deadline | None = None, docs: int = 20000, batch_size: int = 256,
               max_length: int = 256, repeats: int = 2, precision: str = "fp16") -> None:
    """Section 2 (see the module docstring)."""
    deadline = deadline or Deadline()
    with tempfile.TemporaryDirectory(prefix="gpu-check-encode-") as tmp:
        work = Path(tmp)
        corpus, texts = make_corpus(work, docs)
        setting = f"{len(texts):,} docs, minilm, batch {batch_size}, max_length {max_length}, {precision}"
        hop_rate, hop_emb = time_hopscotch(corpus, texts, work / "index", device, batch_size, max_length, precision,
                                           repeats, deadline)
        rec.row("hopscotch encode_corpus (sharded, to float16 shards)", f"{hop_rate:,.0f} docs/s ({setting})")
        st_rate, st_emb = time_st(texts, device, batch_size, max_length, precision, repeats, deadline)
        rec.row("SentenceTransformer.encode (texts in memory)", f"{st_rate:,.0f} docs/s ({setting})")
        rec.row("encode speed hopscotch / sentence-transformers", f"{hop_rate / st_rate:.2f}x")
    cos = np.sum(hop_emb * st_emb, axis=1) / (np.linalg.norm(hop_emb, axis=1) * np.linalg.norm(st_emb, axis=1))
    ok = len(cos) == len(texts) and float(cos.min()) >= 0.99 and float(cos.mean()) >= 0.999
    rec.row("encode agreement (cosine of each document's two embeddings)",
            f"min {cos.min():.5f}, mean {cos.mean():.5f} over {len(cos):,} docs", "PASS" if ok else "FAIL")


if __name__ == "__main__":
    sys.exit(section_main('encode', run_encode, SIZES))
