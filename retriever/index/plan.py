"""How much memory and disk a sharded build and a search need, before running anything.

The per-vector cost of a FAISS spec is read from an empty ``faiss.index_factory`` index (code size, IVF
list count, OPQ matrix, HNSW links), so any spec FAISS accepts can be planned.

>>> plan = plan_index(553_000_000, 384, "OPQ64,IVF262144,PQ64", PlanOptions(shard_size=1_000_000))
>>> print(plan.format())
plan: 553,000,000 documents, dim 384, spec 'OPQ64,IVF262144,PQ64', 553 shards of 1,000,000 (shards layout)
disk: 661.1 GiB
  float16 shard embeddings                           395.5 GiB
...
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from hopscotch.retriever.index.faiss_spec import (POINTS_PER_CENTROID, check_spec, default_train_size, is_flat,
                                                   make_index)

GIB = 1024 ** 3


def human(n: float) -> str:
    for unit, size in (("TiB", 1024 ** 4), ("GiB", GIB), ("MiB", 1024 ** 2), ("KiB", 1024)):
        if n >= size:
            return f"{n / size:,.1f} {unit}"
    return f"{n:,.0f} B"


@dataclass
class SpecCost:
    """Bytes per indexed vector and fixed bytes (centroids, codebooks, transforms) of a spec."""

    per_vector: float
    fixed: float
    nlist: int = 0
    notes: list[str] = field(default_factory=list)


def spec_cost(spec: str, dim: int) -> SpecCost:
    import faiss

    if is_flat(spec):
        return SpecCost(4.0 * dim, 0.0, notes=["Flat: float32 vectors loaded from the float16 shards"])
    index = make_index(spec, dim)
    fixed, notes = 0.0, []
    inner = faiss.downcast_index(index)
    if isinstance(inner, faiss.IndexPreTransform):
        for i in range(inner.chain.size()):
            vt = faiss.downcast_VectorTransform(inner.chain.at(i))
            fixed += 4.0 * vt.d_in * vt.d_out
        notes.append("pre-transform matrix")
        inner = faiss.downcast_index(inner.index)
    try:
        ivf = faiss.extract_index_ivf(index)
    except RuntimeError:
        ivf = None
    if ivf is not None:
        quant = faiss.downcast_index(ivf.quantizer)
        fixed += 4.0 * ivf.nlist * ivf.d * (1.2 if isinstance(quant, faiss.IndexHNSW) else 1.0)
        per_vec = ivf.code_size + 8.0  # codes + int64 ids in the inverted lists
        pq = getattr(faiss.downcast_index(ivf), "pq", None)
        if pq is not None:
            fixed += 4.0 * pq.M * pq.ksub * pq.dsub
        bbs = getattr(faiss.downcast_index(ivf), "bbs", 0)
        if bbs:  # fast-scan lists hold codes in blocks of bbs vectors: half a block of padding a list on average
            fixed += ivf.nlist * bbs / 2 * ivf.code_size
            notes.append(f"fast-scan codes in blocks of {bbs} a list")
        return SpecCost(per_vec, fixed, ivf.nlist, notes + [f"IVF with {ivf.nlist:,} lists, {ivf.code_size} B codes"])
    if isinstance(inner, faiss.IndexHNSW):
        links = inner.hnsw.nb_neighbors(0) * 4 * 1.07  # level-0 links plus ~7% for the upper levels
        storage = faiss.downcast_index(inner.storage).sa_code_size()
        return SpecCost(storage + links + 12.0, fixed, notes=notes + ["HNSW graph links"])
    return SpecCost(float(inner.sa_code_size()), fixed, notes=notes)


@dataclass
class IndexPlan:
    docs: int
    dim: int
    spec: str
    shard_size: int
    layout: str
    rows: list[tuple[str, str, float]]   # (section, item, bytes)
    notes: list[str]
    encode_hours: float | None = None

    def total(self, section: str) -> float:
        return sum(b for s, _, b in self.rows if s == section)

    def format(self) -> str:
        lines = [(f"plan: {self.docs:,} documents, dim {self.dim}, spec {self.spec!r}, "
                  f"{-(-self.docs // self.shard_size):,} shards of {self.shard_size:,} ({self.layout} layout)")]
        phases = ("encode memory", "finalize memory", "windows finalize memory", "faiss training memory",
                  "faiss adding memory")
        peak = max(self.total(p) for p in phases)
        for section in ("disk", *phases, "search memory"):
            if not any(s == section for s, _, _ in self.rows):
                continue
            label = f"{section} (one process)" if section == "encode memory" else section
            lines.append(f"{label}: {human(self.total(section))}")
            lines += [f"  {item:<48} {human(b):>11}" for s, item, b in self.rows if s == section]
        lines.append(f"build memory peak (phases run one after another): {human(peak)} plus the encoder model")
        if self.encode_hours is not None:
            lines.append(f"encode time: {self.encode_hours:,.1f} h")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


@dataclass
class PlanOptions:
    """How the index of :func:`plan_index` is built and used.

    :param docid_bytes: bytes per stored docid (fixed-width per shard)
    :param avg_doc_bytes: average JSON size of a document for the docstore (0: no docstore counted)
    :param docs_per_second: measured encoder throughput of one GPU/process, to estimate encode time
    :param gpus: processes encoding at that rate
    :param windows_per_doc: passage windows per document beyond its first (``--windows``; mean over the
        corpus): they form a second index, ``windows/``; each process encodes the windows of its own document
        shards after them, so the windows' time is divided across ``gpus`` like the documents'
    """

    shard_size: int = 1_000_000
    layout: str = "shards"
    train_size: int | None = None
    docid_bytes: int = 24
    avg_doc_bytes: int = 0
    docs_per_second: float | None = None
    gpus: int = 1
    windows_per_doc: float = 0.0

    def index_parts(self, docs: int) -> int:
        """FAISS indexes the layout builds: one per shard, or one merged."""
        return -(-docs // self.shard_size) if self.layout == "shards" else 1


#: bytes a document of encode-time working set beyond its text: Python objects, token ids, the length order
#: (measured by scripts/bench_scale.py: 616 and 656 MiB for 100,000-document shards at 588 B a document)
ENCODE_DOC_OVERHEAD = 2_500


def plan_index(docs: int, dim: int, spec: str = "Flat", options: PlanOptions | None = None) -> IndexPlan:
    """Memory and disk of encoding ``docs`` documents into shards and building/searching ``spec`` over them."""
    o = options or PlanOptions()
    check_spec(spec, dim, docs, o.train_size)  # the build's own rule: a plan of what cannot be built is refused
    cost = spec_cost(spec, dim)
    parts = o.index_parts(docs)
    rows = _storage_rows(docs, dim, o)
    notes = list(cost.notes)
    if not o.avg_doc_bytes:
        notes.append("docstore text not counted: pass --avg-doc-bytes (or build with --no-docstore)")
    if not is_flat(spec):
        rows += _faiss_build_rows(docs, dim, spec, cost, o)
        notes += _faiss_layout_notes(docs, cost, parts, o.layout)
    if cost.nlist and min(docs, o.train_size or docs) < POINTS_PER_CENTROID * cost.nlist:
        notes.append(f"fewer than {POINTS_PER_CENTROID} training vectors a list ({POINTS_PER_CENTROID * cost.nlist:,} "
                     "for this IVF): FAISS trains it with a warning, and the lists are poor: use fewer")
    shard = min(o.shard_size, docs)
    rows += [
        ("encode memory", "one shard's embeddings (float32 batches and their concatenation)", 8.0 * dim * shard),
        ("encode memory", f"one shard's documents in Python (text + ~{ENCODE_DOC_OVERHEAD:,} B a document: objects, "
         "token ids, length order)", (float(o.avg_doc_bytes or 1000) + ENCODE_DOC_OVERHEAD) * shard),
        ("finalize memory", "docid lookup sort (hash + row + order)", 24.0 * docs),
        ("search memory", f"index in RAM ({spec})", cost.per_vector * docs + cost.fixed * parts),
        ("search memory", "per-shard top-k buffers (1,000 queries, k=100)", 12.0 * 1000 * 100 * parts),
    ]
    notes.append("docids, docstore and lookup table are memory-mapped at search time (page cache, not RAM)")
    if not is_flat(spec):
        notes.append(f"search --refine R re-scores candidates against a float16 copy held in RAM: "
                     f"{human(2.0 * dim * docs)} more")
    windows = math.ceil(docs * o.windows_per_doc)
    if windows:
        rows += _window_rows(windows, dim, spec, cost, o)
        notes.append(f"{windows:,} passage windows ({o.windows_per_doc:.2f} a document) in windows/: a second index "
                     "with the same spec, searched beside the documents; each process encodes the windows of its "
                     "own document shards after them, rank 0 gathers them into windows/ shards (a float16 copy, "
                     "each part deleted once gathered)")
    hours = None
    if o.docs_per_second:
        hours = (docs + windows) / (o.docs_per_second * max(o.gpus, 1)) / 3600
    return IndexPlan(docs, dim, spec, o.shard_size, o.layout, rows, notes, hours)


def _window_rows(windows: int, dim: int, spec: str, cost: SpecCost, o: PlanOptions) -> list[tuple[str, str, float]]:
    """The windows index: its shards on disk (no docstore; ids ``<docid>#w<i>``), its FAISS files and its
    search memory."""
    parts = o.index_parts(windows)
    index_bytes = cost.per_vector * windows + cost.fixed * parts
    rows = [("disk", "windows: float16 shard embeddings", 2.0 * dim * windows),
            ("disk", "windows: docids and lookup table", (o.docid_bytes + 4 + 16.0) * windows),
            ("windows finalize memory", "windows: docid lookup sort (after the documents')", 24.0 * windows),
            ("search memory", f"windows: index in RAM ({spec})", index_bytes)]
    if not is_flat(spec):
        rows.insert(2, ("disk", f"windows: FAISS index files ({spec})", index_bytes))
    return rows


def _storage_rows(docs: int, dim: int, o: PlanOptions) -> list[tuple[str, str, float]]:
    """Disk of the shards: embeddings, docids, the docid lookup and (when sized) the docstore."""
    rows = [
        ("disk", "float16 shard embeddings", 2.0 * dim * docs),
        ("disk", "docids", float(o.docid_bytes) * docs),
        ("disk", "docid lookup table (hash + row)", 16.0 * docs),
    ]
    if o.avg_doc_bytes:
        rows.append(("disk", "docstore (document text)", float(o.avg_doc_bytes) * docs))
        rows.append(("disk", "docstore line offsets", 8.0 * docs))
    return rows


def _faiss_build_rows(docs: int, dim: int, spec: str, cost: SpecCost, o: PlanOptions
                      ) -> list[tuple[str, str, float]]:
    """Disk of a trained FAISS index and the memory of training it and adding the shards to it."""
    shard, parts = min(o.shard_size, docs), o.index_parts(docs)
    size = o.train_size or default_train_size(make_index(spec, dim), docs)
    rows = [("disk", f"FAISS index files ({spec})", cost.per_vector * docs + cost.fixed * parts),
            ("faiss training memory", f"training sample ({size:,} x float32)", 4.0 * dim * size)]
    if cost.nlist:
        rows.append(("faiss training memory", "k-means centroids and assignments", 4.0 * dim * cost.nlist + 8.0 * size))
    held = cost.per_vector * (shard if o.layout == "shards" else docs) + cost.fixed
    rows += [("faiss adding memory", "one shard as float32 while adding", 4.0 * dim * shard),
             ("faiss adding memory", "float16 shards read while adding (page cache, counted in RSS)",
              2.0 * dim * (shard if o.layout == "shards" else docs)),
             ("faiss adding memory", "index under construction", held)]
    return rows


def _faiss_layout_notes(docs: int, cost: SpecCost, parts: int, layout: str) -> list[str]:
    notes = []
    if layout == "merged" and cost.nlist:
        notes.append("a merged IVF index is built from per-shard parts: they take about the index's size on "
                     "disk until the merged file is written")
    if parts > 1 and cost.fixed * parts > 0.1 * cost.per_vector * docs:
        notes.append(f"the shards layout repeats the {human(cost.fixed)} of centroids/codebooks in each of "
                     f"{parts:,} shard indexes (and searches each with its own nprobe): use --layout merged")
    return notes
