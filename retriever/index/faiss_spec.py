"""FAISS ``index_factory`` specs: making an empty index and the one check of a spec against what it is built over.

:func:`check_spec` is the rule every path that plans or builds a FAISS index goes through (``index --plan``,
``index`` before encoding, :func:`~hopscotch.retriever.index.faiss_index.build_faiss_index` once the documents
are counted): the spec must parse, an IVF must have at least one list, and the vectors it is trained on
must be enough for its k-means: one per IVF list and ``2**nbits`` (256) per PQ codebook at the very least;
FAISS wants :data:`POINTS_PER_CENTROID` a centroid for good centroids (fewer is allowed, with a note).

>>> check_spec("IVF4096,PQ64", dim=384, num_docs=100)
Traceback (most recent call last):
    ...
hopscotch.retriever.errors.UsageError: FAISS spec 'IVF4096,PQ64' needs at least 4096 training vectors (one per IVF
list; FAISS recommends 39 a list: 159,744); the corpus has 100 documents: use fewer lists, e.g. IVF2
"""

from __future__ import annotations

import math

from hopscotch.retriever.errors import UsageError

#: training vectors a k-means centroid should get (FAISS warns below it)
POINTS_PER_CENTROID = 39
_SYNTAX_DIMS = (384, 768, 1024, 3840, 4096, 1000, 1536)


def _faiss():
    import faiss

    return faiss


def make_index(spec: str, dim: int):
    """``faiss.index_factory`` with inner-product metric; a bad spec raises :class:`UsageError`."""
    faiss = _faiss()
    try:
        index = faiss.index_factory(dim, spec, faiss.METRIC_INNER_PRODUCT)
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()[-1] if str(exc).strip() else ""
        raise UsageError(f"FAISS index spec {spec!r} is not valid for dimension {dim} ({first}); examples: "
                         "Flat, IVF4096,PQ64, OPQ64,IVF4096,PQ64, HNSW32, IVF4096,SQ8") from None
    # the factory turns on polysemous training for PQ codes; it is only useful for Hamming-filtered search
    # (which is not used here) and costs ~20 s per index even on a few hundred vectors
    inner = faiss.downcast_index(index)
    if isinstance(inner, faiss.IndexPreTransform):
        inner = faiss.downcast_index(inner.index)
    for candidate in (inner, ivf_or_none(index)):
        if candidate is not None and hasattr(candidate, "do_polysemous_training"):
            candidate.do_polysemous_training = False
    return index


def ivf_or_none(index):
    """The IVF index inside ``index`` (downcast), or None."""
    faiss = _faiss()
    try:
        return faiss.downcast_index(faiss.extract_index_ivf(index))
    except RuntimeError:
        return None


def check_spec_syntax(spec: str):
    """An empty index of ``spec`` for the first common dimension ``index_factory`` accepts it at (before the
    dimension is known); a spec it parses for none is a :class:`UsageError`."""
    for dim in _SYNTAX_DIMS:
        try:
            return make_index(spec, dim)
        except UsageError as exc:
            error = exc
    raise error


def is_flat(spec: str) -> bool:
    return spec.replace(" ", "") in ("Flat", "IDMap,Flat")


#: ``--spec auto``: exact ``Flat`` up to this many vectors (above ~1,000 queries/s on 2 cores at d=384)
AUTO_FLAT_MAX = 250_000
#: ``--spec auto`` above :data:`AUTO_FLAT_MAX`: refine depth and the fraction of lists probed (at least 8),
#: chosen for recall on real encoded text, where the coarse lists, not the codes, lose neighbours: 1M documents
#: of real sentences, question queries (scripts/bench_scale.py), ``IVF2048,PQ384x4fsr`` reached recall@100
#: 0.668 at nprobe 8, 0.900 at 64 and 0.933 at 128 (refine barely mattered); on the clustered 1M benchmark
#: (scripts/bench_index.py) nprobe 8 / refine 2 already gives 0.968 at 26.5x Flat. Lower nprobe after
#: measuring your queries with ``hopscotch audit ann-fidelity`` (docs/benchmarks.md).
AUTO_REFINE, AUTO_PROBE_FRACTION, AUTO_MIN_NPROBE = 4, 1 / 16, 8


def is_auto(spec: str) -> bool:
    return spec.strip().lower() == "auto"


def auto_layout(spec: str) -> str:
    """``--layout auto`` for a resolved spec: one FAISS index per shard for Flat (nothing to train or merge),
    one merged index otherwise (one set of centroids, one nprobe)."""
    return "shards" if is_flat(spec) else "merged"


def auto_spec(num_docs: int, dim: int) -> tuple[str, dict]:
    """What ``--spec auto`` builds over ``num_docs`` ``dim``-d vectors, and the search defaults it records.

    Up to :data:`AUTO_FLAT_MAX` vectors: ``Flat`` (exact, nothing to train). Above: an IVF with about
    2 sqrt(N) lists (a power of two, at most N / 39 so k-means has its points) over 4-bit fast-scan PQ
    codes of each vector's residual to its list centre, one dimension a code (``PQ{d}x4fsr``: d/2 bytes a
    vector), searched with ``nprobe`` = 1/16 of the lists (at least 8) and ``refine`` 4 (the top k x 4
    re-scored against the float16 vectors).

        auto_spec(1_000_000, 384) == ("IVF2048,PQ384x4fsr", {"nprobe": 128, "refine": 4})
    """
    if num_docs <= AUTO_FLAT_MAX:
        return "Flat", {}
    return auto_ivf(num_docs, dim)


def auto_nlist(num_docs: int) -> int:
    """IVF lists for ``num_docs`` vectors: the power of two nearest 2 sqrt(N), halved until each list has
    :data:`POINTS_PER_CENTROID` training vectors (at least 1): 10k -> 256, 100k -> 512, 1M -> 2,048."""
    nlist = 2 ** round(math.log2(2 * math.sqrt(max(num_docs, 1))))
    while nlist > 1 and nlist * POINTS_PER_CENTROID > num_docs:
        nlist //= 2
    return nlist


def auto_ivf(num_docs: int, dim: int) -> tuple[str, dict]:
    """:func:`auto_spec`'s IVF fast-scan PQ and search defaults at any size (the Flat cut-off aside)."""
    nlist = auto_nlist(num_docs)
    nprobe = max(AUTO_MIN_NPROBE, int(nlist * AUTO_PROBE_FRACTION))
    return f"IVF{nlist},PQ{dim}x4fsr", {"nprobe": min(nprobe, nlist), "refine": AUTO_REFINE}


def default_train_size(index, num_docs: int) -> int:
    """Enough vectors for k-means: 40 per IVF list (FAISS asks for 39), and 10,000 for PQ codebooks."""
    ivf = ivf_or_none(index)
    return min(num_docs, 10_000 if ivf is None else max(10_000, 40 * ivf.nlist))


def _codebooks(index) -> list[int]:
    """Centroids of each k-means ``index`` trains besides the IVF lists: its PQ / OPQ codebooks."""
    faiss = _faiss()
    sizes, inner = [], faiss.downcast_index(index)
    if isinstance(inner, faiss.IndexPreTransform):
        for i in range(inner.chain.size()):
            if isinstance(faiss.downcast_VectorTransform(inner.chain.at(i)), faiss.OPQMatrix):
                sizes.append(256)  # OPQ rotates against an 8-bit PQ it trains itself
        inner = faiss.downcast_index(inner.index)
    storage = getattr(inner, "storage", None)  # HNSW over PQ codes
    for part in (inner, ivf_or_none(index), faiss.downcast_index(storage) if storage is not None else None):
        pq = getattr(part, "pq", None)
        if pq is not None and getattr(pq, "ksub", 0) > 1:
            sizes.append(int(pq.ksub))
    return sizes


def training_minimum(index) -> tuple[int, str]:
    """The fewest training vectors FAISS can train ``index`` on, and why (0 and '' when it needs none)."""
    ivf = ivf_or_none(index)
    needs = [(ivf.nlist, "one per IVF list")] if ivf is not None else []
    needs += [(size, f"{size} per PQ codebook") for size in _codebooks(index)]
    return max(needs, default=(0, ""))


def check_spec(spec: str, dim: int | None = None, num_docs: int | None = None, train_size: int | None = None):
    """The empty index of ``spec`` once it is checked against what it is built over (module doc).

    :param dim: the vectors' dimension (None: any common one, before the model is loaded)
    :param num_docs: the documents the index is trained on (None: not counted yet)
    :param train_size: ``--train-size``, the vectors sampled to train it (None: the default)
    Raises a one-line :class:`UsageError` naming the spec (or ``--train-size``) and the minimum.
    """
    index = make_index(spec, dim) if dim else check_spec_syntax(spec)
    ivf = ivf_or_none(index)
    if ivf is not None and ivf.nlist < 1:
        example = max(1, num_docs // POINTS_PER_CENTROID) if num_docs else 1024
        raise UsageError(f"FAISS spec {spec!r}: an IVF index needs at least 1 list (IVF0 has none); use e.g. "
                         f"IVF{example} (~{POINTS_PER_CENTROID} training vectors a list)")
    need, why = training_minimum(index)
    if not need:
        return index
    nlist = ivf.nlist if ivf is not None else 0
    hint = (f"; FAISS recommends {POINTS_PER_CENTROID} a list: {POINTS_PER_CENTROID * nlist:,}" if nlist == need
            else "")
    if num_docs is not None and num_docs < need:
        fewer = (f"use fewer lists, e.g. IVF{max(1, num_docs // POINTS_PER_CENTROID)}" if nlist >= need
                 else "use Flat or HNSW32 for so few documents")
        raise UsageError(f"FAISS spec {spec!r} needs at least {need} training vectors ({why}{hint}); the corpus "
                         f"has {num_docs:,} documents: {fewer}")
    if train_size is not None and train_size < need:
        raise UsageError(f"--train-size {train_size}: FAISS spec {spec!r} needs at least {need} training "
                         f"vectors ({why}{hint})")
    return index
