"""The stages of the cost-curve benchmark (:mod:`.run`), each run in a process of its own so that its wall time and
peak RSS are its own::

    python -m hopscotch_experiments.benchmarks.scale.stages STAGE WORK SIZE   # prints 'SCALE {json}' last

``WORK/config.json`` is the :class:`ScaleConfig`; ``WORK/n<SIZE>/`` the size's files. Every stage removes what an
unfinished earlier run of it left, then builds through the package's own API: the corpus (:mod:`.data`),
``encode_corpus`` (the single-vector shards; ``hopscotch index``), both BM25 backends (``hopscotch bm25-index``:
:mod:`.bm25`),
``ShardedFaissIndex`` over the shards (Flat; beside a bare FAISS ``IndexFlatIP``, :func:`stage_flat_bare`) and
``build_faiss_index`` (IVF-PQ, merged layout), and ``encode_corpus`` with a multi-vector model (token shards, codec,
compressed tokens, inverted file). Search stages time ``queries``
searches at ``k`` (median of ``repeats``, after one warm-up) with the query vectors already encoded (BM25: with its
query analysis), so q/s is the index's, not the encoder's.

Peak RSS is ``ru_maxrss``; ``base_rss_mib`` is the peak just before the measured work (imports, a loaded encoder),
so ``peak - base`` is what the work added: what the plan predicts.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field, fields
from itertools import islice
from pathlib import Path

import numpy as np
from hopscotch_experiments.benchmarks.common import folder_bytes, peak_rss_mib
from hopscotch_experiments.benchmarks.scale import bm25
from hopscotch_experiments.benchmarks.scale.data import (
    SentencePool,
    build_mv_model,
    build_scale_encoder,
    ivf_spec,
    write_corpus,
    write_queries,
)
from hopscotch_experiments.benchmarks.scale.exact import exact_maxsim_top

from hopscotch.retriever.evaluation.ann_recall import recall_at
from hopscotch.retriever.index.encode import EncodeOptions, encode_corpus
from hopscotch.retriever.index.faiss_flat import flat_search_settings
from hopscotch.retriever.index.faiss_index import ShardedFaissIndex, build_faiss_index, index_name, remove_faiss_index
from hopscotch.retriever.index.faiss_spec import auto_ivf
from hopscotch.retriever.index.layout import IndexMeta, load_shard_embeddings
from hopscotch.retriever.index.multi_vector.build import MultiVectorOptions, shard_tokens
from hopscotch.retriever.index.multi_vector.encode import TokenShardEncoder
from hopscotch.retriever.io.common import read_json, write_json
from hopscotch.retriever.io.corpus import read_corpus
from hopscotch.retriever.io.queries import read_queries
from hopscotch.retriever.model.dense_encoder import DenseEncoder
from hopscotch.retriever.model.query_template import format_document
from hopscotch.retriever.searchers.multi_vector_index import MultiVectorIndexSearcher

CONFIG_FILE = "config.json"
PREFIX = "SCALE "
#: the index kinds a run may measure (``--kinds``)
KINDS = ("bm25s", "disk", "dense", "mv")


@dataclass
class ScaleConfig:
    """What a cost-curve run measures (the ``scripts/bench_scale.py`` flags)."""

    work: str
    sizes: list[int] = field(default_factory=lambda: [10_000, 100_000, 1_000_000])
    sources: list[str] = field(default_factory=list)        # corpora whose sentences make the documents
    query_sources: list[str] = field(default_factory=list)  # query files, read in order
    model: str = "minilm1"
    max_length: int = 32
    batch_size: int = 64
    shard_size: int = 100_000
    queries: int = 200
    k: int = 100
    ivf_spec: str = "auto"     # --spec auto's IVF at every size; or a spec, {nlist} scaled with N
    nprobe: int | None = None  # None: --spec auto's search defaults at the size
    refine: int | None = None
    multivector_max: int = 10_000
    kinds: list[str] = field(default_factory=lambda: list(KINDS))  # which indexes: bm25s, disk, dense, mv
    bm25s_max: int = 1_000_000   # largest size bm25s is built at (its score matrix is in RAM)
    dense_max: int = 1_000_000   # largest size encoded (Flat, IVF-PQ)
    mv_dim: int = 128
    mv_nbits: int = 2
    mv_nprobe: int = 4
    mv_candidates: int = 256
    mv_exact: bool = True
    threads: int = 2
    repeats: int = 3
    seed: int = 0
    inline: bool = False   # run the stages in this process (tests): no per-stage RSS

    @property
    def models_needed(self) -> bool:
        """Whether a kind measured here encodes (dense, multi-vector): only then does the setup build models."""
        return bool({"dense", "mv"} & set(self.kinds))

    def save(self) -> None:
        Path(self.work).mkdir(parents=True, exist_ok=True)
        write_json(Path(self.work) / CONFIG_FILE, asdict(self))

    @classmethod
    def load(cls, work: str | Path) -> ScaleConfig:
        saved = read_json(Path(work) / CONFIG_FILE)
        return cls(**{f.name: saved[f.name] for f in fields(cls) if f.name in saved})


def size_dir(cfg: ScaleConfig, size: int | None) -> Path:
    """``WORK/n<size>`` (``WORK`` itself for the size-free setup stage)."""
    return Path(cfg.work) if size is None else Path(cfg.work) / f"n{size}"


def _setup(cfg: ScaleConfig) -> dict:
    return read_json(Path(cfg.work) / "setup.json")


def _query_texts(cfg: ScaleConfig) -> list[str]:
    return [q.text for q in read_queries(Path(cfg.work) / "queries.jsonl")]


def _first_texts(cfg: ScaleConfig, folder: Path) -> list[str]:
    """The first batch of documents as the encoder sees them: a warm-up before the baseline RSS, so that the
    runtime's one-off allocations count as the model's, as the plan has them."""
    docs = islice(read_corpus(folder / "corpus.jsonl", unique=False), cfg.batch_size)
    return [format_document(d.title, d.text) for d in docs]


def _timed_median(repeats: int, fn) -> tuple[float, object]:
    """Median wall seconds of ``repeats`` calls of ``fn`` and the last call's result."""
    times, out = [], None
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), out


def stage_setup(cfg: ScaleConfig, folder: Path) -> dict:
    t0 = time.perf_counter()
    models = folder / "models"
    encoder = mv = None
    if cfg.models_needed:  # a BM25-only run builds no model
        encoder = build_scale_encoder(cfg.model, models, cfg.max_length, cfg.seed)
        mv = build_mv_model(encoder, models / f"mv_{Path(encoder).name}_{cfg.mv_dim}_{cfg.max_length}", cfg.mv_dim,
                            cfg.max_length, seed=cfg.seed)
    queries = write_queries(cfg.query_sources, cfg.queries, folder / "queries.jsonl")
    return {"encoder": encoder, "mv_model": mv, "queries": queries, "seconds": time.perf_counter() - t0}


def stage_corpus(cfg: ScaleConfig, folder: Path, size: int) -> dict:
    t0 = time.perf_counter()
    folder.mkdir(parents=True, exist_ok=True)
    stats = write_corpus(SentencePool(cfg.sources), size, folder / "corpus.jsonl", cfg.seed)
    return {**stats, "seconds": time.perf_counter() - t0, "peak_rss_mib": peak_rss_mib()}


def _index_disk(index_dir: Path) -> dict:
    return {"total": folder_bytes(index_dir), "embeddings": folder_bytes(index_dir, "shards/*.emb.npy"),
            "docstore": (folder_bytes(index_dir, "shards/*.docs.jsonl")
                         + folder_bytes(index_dir, "shards/*.offsets.npy")),
            "ids_and_lookup": folder_bytes(index_dir, "shards/*.ids.npy") + folder_bytes(index_dir, "lookup"),
            "faiss": folder_bytes(index_dir, "faiss/**/*")}


def stage_encode(cfg: ScaleConfig, folder: Path) -> dict:
    out = folder / "dense"
    shutil.rmtree(out, ignore_errors=True)
    model = _setup(cfg)["encoder"]
    t0 = time.perf_counter()
    encoder = DenseEncoder(model, max_length=cfg.max_length, batch_size=cfg.batch_size, device="cpu")
    load_s = time.perf_counter() - t0
    encoder.encode_texts(_first_texts(cfg, folder))
    base = peak_rss_mib()
    t0 = time.perf_counter()
    result = encode_corpus(folder / "corpus.jsonl", model, out, EncodeOptions(
        shard_size=cfg.shard_size, batch_size=cfg.batch_size, max_length=cfg.max_length, device="cpu",
        show_progress=False), encoder=encoder)
    call_s, peak = time.perf_counter() - t0, peak_rss_mib()
    texts = _query_texts(cfg)
    t0 = time.perf_counter()
    np.save(folder / "queries.npy", encoder.encode_queries(texts))
    query_s = time.perf_counter() - t0
    return {"encode_seconds": result.encode_seconds, "docs_per_second": result.docs_per_second,
            "finalize_seconds": call_s - result.encode_seconds, "model_load_seconds": load_s,
            "base_rss_mib": base, "peak_rss_mib": peak, "dim": result.meta.dim, "shards": result.meta.num_shards,
            "disk": _index_disk(out), "query_encode_qps": len(texts) / query_s}


def _faiss_search(cfg: ScaleConfig, folder: Path, name: str | None, nprobe: int | None, refine: int) -> dict:
    queries = np.load(folder / "queries.npy")
    base = peak_rss_mib()
    t0 = time.perf_counter()
    index = ShardedFaissIndex.load(folder / "dense", name=name, use_gpu=False)
    load_s = time.perf_counter() - t0
    index.search(queries[:8], cfg.k, nprobe=nprobe, refine=refine)  # warm-up (builds the refine copy)
    seconds, (_, rows) = _timed_median(cfg.repeats, lambda: index.search(queries, cfg.k, nprobe=nprobe, refine=refine))
    return {"load_seconds": load_s, "search_seconds": seconds, "qps": len(queries) / seconds, "base_rss_mib": base,
            "peak_rss_mib": peak_rss_mib(), "rows": rows}


def stage_flat_search(cfg: ScaleConfig, folder: Path) -> dict:
    out = _faiss_search(cfg, folder, None, None, 1)
    np.save(folder / "flat_rows.npy", out.pop("rows"))
    return out


def stage_flat_bare(cfg: ScaleConfig, folder: Path) -> dict:
    """The reference of Flat search: one bare FAISS ``IndexFlatIP`` over the same float16 shards' vectors (FAISS's
    own settings), timed on the same query vectors and ``k`` interleaved with a ``ShardedFaissIndex`` (``Flat``)
    loaded beside it, so that their ratio is one process's, under one load of the machine: ``ratio`` is ours
    over bare (search seconds; below 1: ours is faster). ``bare_tuned`` is the bare index searched with the
    BLAS settings ours uses (:func:`~hopscotch.retriever.index.faiss_flat.flat_blas_settings`): ours over it is
    what the shards and their merge cost."""
    import faiss

    queries = np.ascontiguousarray(np.load(folder / "queries.npy"), dtype=np.float32)
    dense = folder / "dense"
    meta = IndexMeta.load(dense)
    base = peak_rss_mib()
    t0 = time.perf_counter()
    bare = faiss.IndexFlatIP(meta.dim)
    for shard in range(meta.num_shards):  # one shard's float32 copy at a time
        bare.add(np.asarray(load_shard_embeddings(dense, shard), dtype=np.float32))
    load_s = time.perf_counter() - t0
    bare_rss = peak_rss_mib()
    ours = ShardedFaissIndex.load(dense, name=None, use_gpu=False)

    def bare_tuned():
        with flat_search_settings(len(queries), bare.ntotal, meta.dim):
            return bare.search(queries, cfg.k)

    runs = {"ours": lambda: ours.search(queries, cfg.k), "bare": lambda: bare.search(queries, cfg.k),
            "bare_tuned": bare_tuned}
    for fn in runs.values():  # warm-up
        fn()
    times: dict = {name: [] for name in runs}
    for _ in range(max(1, cfg.repeats)):  # interleaved: a change in the machine's load hits every one alike
        for name, fn in runs.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    sec = {name: float(np.median(t)) for name, t in times.items()}
    _, ours_rows = ours.search(queries, cfg.k)
    _, bare_rows = bare.search(queries, cfg.k)
    return {"load_seconds": load_s, "search_seconds": sec["bare"], "qps": len(queries) / sec["bare"],
            "ours_search_seconds": sec["ours"], "ours_qps": len(queries) / sec["ours"],
            "tuned_search_seconds": sec["bare_tuned"], "tuned_qps": len(queries) / sec["bare_tuned"],
            "ratio": sec["ours"] / sec["bare"], "ratio_tuned": sec["ours"] / sec["bare_tuned"],
            # exact search both: only the order of (near-)tied scores may differ
            "agreement": recall_at(ours_rows, bare_rows, cfg.k), "threads": cfg.threads,
            "base_rss_mib": base, "bare_rss_mib": bare_rss, "peak_rss_mib": peak_rss_mib()}


def stage_ivf_build(cfg: ScaleConfig, folder: Path, size: int) -> dict:
    spec = ivf_spec(cfg.ivf_spec, size)
    search = auto_ivf(size, 384)[1]
    name = index_name(spec, "merged")
    dense = folder / "dense"
    if (dense / "faiss" / name).exists():
        remove_faiss_index(dense, name)
        shutil.rmtree(dense / "faiss" / name, ignore_errors=True)
    base = peak_rss_mib()
    t0 = time.perf_counter()
    build_faiss_index(dense, spec, layout="merged", use_gpu=False, set_default=False, show_progress=False)
    return {"spec": spec, "name": name, "search_defaults": search, "build_seconds": time.perf_counter() - t0, "base_rss_mib": base,
            "peak_rss_mib": peak_rss_mib(), "index_bytes": folder_bytes(dense / "faiss" / name),
            "index_file_bytes": (dense / "faiss" / name / "merged.faiss").stat().st_size}


def stage_ivf_search(cfg: ScaleConfig, folder: Path) -> dict:
    build = read_json(folder / "ivf_build.json")
    defaults = build.get("search_defaults", {})
    nprobe = cfg.nprobe if cfg.nprobe is not None else defaults.get("nprobe")
    refine = cfg.refine if cfg.refine is not None else defaults.get("refine", 1)
    out = _faiss_search(cfg, folder, build["name"], nprobe, refine)
    out["recall"] = recall_at(out.pop("rows"), np.load(folder / "flat_rows.npy"), cfg.k)
    return {**out, "nprobe": nprobe, "refine": refine}


def stage_mv_build(cfg: ScaleConfig, folder: Path) -> dict:
    out = folder / "mv"
    shutil.rmtree(out, ignore_errors=True)
    model = _setup(cfg)["mv_model"]
    encoder = TokenShardEncoder.load(model, batch_size=cfg.batch_size, device="cpu")
    encoder.encode_texts(_first_texts(cfg, folder))
    base = peak_rss_mib()
    t0 = time.perf_counter()
    result = encode_corpus(folder / "corpus.jsonl", model, out, EncodeOptions(
        shard_size=cfg.shard_size, batch_size=cfg.batch_size, device="cpu", show_progress=False,
        multi_vector=MultiVectorOptions(nbits=cfg.mv_nbits, show_progress=False)), encoder=encoder)
    call_s = time.perf_counter() - t0
    mv = result.meta.multi_vector
    return {"encode_seconds": result.encode_seconds, "docs_per_second": result.docs_per_second,
            "build_seconds": call_s - result.encode_seconds, "base_rss_mib": base, "peak_rss_mib": peak_rss_mib(),
            "num_tokens": mv["num_tokens"], "tokens_per_doc": mv["tokens_per_doc"],
            "num_centroids": mv["num_centroids"], "dim": mv["dim"],
            # what `index --plan --corpus C --model M` measures: the first 200 documents' tokens
            "plan_tokens_per_doc": float(np.mean(shard_tokens(out, 0)[1][:200])),
            "disk": {**_index_disk(out), "compressed": folder_bytes(out / "mv"),
                     "token_vectors": folder_bytes(out, "shards/*.tok.npy")}}


def stage_mv_search(cfg: ScaleConfig, folder: Path) -> dict:
    texts = _query_texts(cfg)
    base0 = peak_rss_mib()
    searcher = MultiVectorIndexSearcher(folder / "mv", nprobe=cfg.mv_nprobe, candidates=cfg.mv_candidates,
                                        device="cpu")
    _mv_top(searcher, searcher.scorer.query_vectors(texts[:1], [None], [False])[0][0], cfg.k)  # warm-up
    base = peak_rss_mib()
    t0 = time.perf_counter()
    vectors = [q for q, _ in searcher.scorer.query_vectors(texts, [None] * len(texts), [False] * len(texts))]
    query_s = time.perf_counter() - t0

    def search_all():
        return np.stack([_mv_top(searcher, q, cfg.k) for q in vectors])

    seconds, rows = _timed_median(cfg.repeats, search_all)
    out = {"search_seconds": seconds, "qps": len(texts) / seconds, "query_encode_qps": len(texts) / query_s,
           "model_rss_mib": base - base0, "base_rss_mib": base, "peak_rss_mib": peak_rss_mib(),
           "nprobe": cfg.mv_nprobe, "candidates": cfg.mv_candidates}
    if cfg.mv_exact:
        t0 = time.perf_counter()
        truth = exact_maxsim_top(folder / "mv", [q.numpy() for q in vectors], cfg.k)
        out.update(recall=recall_at(rows, truth, cfg.k), exact_seconds=time.perf_counter() - t0)
    return out


def _mv_top(searcher, query, k: int) -> np.ndarray:
    """The global rows of one query's top ``k`` (``-1`` padded), as the multi-vector searcher ranks them."""
    rows, _ = searcher.store.candidates(query.numpy(), searcher.nprobe, max(searcher.candidates, k))
    out = np.full(k, -1, dtype=np.int64)
    if len(rows):
        scores = searcher.scorer.scores(query, None, [[v] for v in searcher.store.document_vectors(rows)])
        best = rows[np.argsort(-np.asarray(scores), kind="stable")[:k]]
        out[:len(best)] = best
    return out


def _bm25_stages() -> dict:
    return {"bm25": bm25.stage_bm25, "bm25_search": bm25.stage_bm25_search,
            "bm25_disk": bm25.stage_bm25_disk, "bm25_disk_search": bm25.stage_bm25_disk_search}


STAGES = {"setup": stage_setup, "corpus": stage_corpus, "encode": stage_encode, "flat_search": stage_flat_search,
          "flat_bare": stage_flat_bare, "ivf_build": stage_ivf_build, "ivf_search": stage_ivf_search,
          "mv_build": stage_mv_build, "mv_search": stage_mv_search, **_bm25_stages()}
SIZED = ("corpus", "ivf_build")  # stages that take the size itself
TORCH_STAGES = ("setup", "encode", "mv_build", "mv_search")
FAISS_STAGES = ("flat_search", "flat_bare", "ivf_build", "ivf_search", "mv_build", "mv_search")


def run_scale_stage(cfg: ScaleConfig, stage: str, size: int | None) -> dict:
    """Run one stage in this process; its result."""
    folder = size_dir(cfg, size)
    fn = STAGES[stage]
    return fn(cfg, folder, size) if stage in SIZED else fn(cfg, folder)


def main(argv: list[str] | None = None) -> None:
    stage, work, size = argv or sys.argv[1:4]
    cfg = ScaleConfig.load(work)
    if stage in TORCH_STAGES:  # the others never import torch (its import alone is ~300 MiB of RSS)
        import torch

        torch.set_num_threads(cfg.threads)
    if stage in FAISS_STAGES:
        import faiss

        faiss.omp_set_num_threads(cfg.threads)
    result = run_scale_stage(cfg, stage, None if size == "-" else int(size))
    print(PREFIX + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
