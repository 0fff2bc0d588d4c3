"""ANN fidelity: does an index's approximate search find, for the *real* query vectors, what exact search finds?

An IVF / HNSW / PQ index is trained and tuned on document vectors. The query vectors of a reasoning-aware
model (long reasoning texts, late-fused vectors) can lie elsewhere, and an index that keeps 95% of the
exact top-k for document-shaped vectors may keep far less for them. This audit measures, per query set,

    recall@k = |ANN top-k  ∩  exact top-k| / k      (exact: inner product over the shards' float16 vectors)

with a 95% t-interval over the queries, on three query sets:

* ``real``: the queries of a queries file encoded as the dense searcher encodes them
  (:meth:`~hopscotch.retriever.searchers.dense.DenseSearcher.query_embeddings`: the model's query input variant,
  instruction, reasoning cut from the left, the query mix), reasoning-aware with ``reasoning=True``;
* ``documents``: the stored vectors of a seeded sample of the indexed documents, each used as a query with the
  document itself removed from both lists (the vectors the index was trained on: the control);
* ``random``: seeded random unit vectors (no structure at all: context, never the control).

A hit is an ANN row whose exact score reaches the exact k-th score (ties at the cut count as hits, so an exact
index scores 1.0 whatever order it breaks ties in; FAISS's ``-1`` padding is never a hit): the tie-aware rule of
:mod:`hopscotch.retriever.evaluation.ann_recall`, the one recall@k of the code base. Rule: a ``warning`` (``fail`` with ``strict``) when, at any
k, the real queries' recall is below the documents' by more than ``max_gap``, or below ``min_recall``.

Only the index's main rows are audited; the extra passage windows of an index built with ``--windows`` are
left out (their FAISS index is trained the same way).

Example (not run: it needs a dense index)::

    report = audit_ann_fidelity("idx", "queries.jsonl", reasoning=True, faiss_name="IVF256_Flat.shards", nprobe=1)
    print(report.summary_text())
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from hopscotch.retriever.audit.report import AuditReport
from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.evaluation.ann_recall import recall_per_query
from hopscotch.retriever.evaluation.metrics import _ci95
from hopscotch.retriever.index.faiss_index import merge_topk
from hopscotch.retriever.index.faiss_spec import ivf_or_none
from hopscotch.retriever.index.layout import IndexMeta, embedding_rows, load_shard_embeddings
from hopscotch.retriever.io.queries import read_queries
from hopscotch.retriever.searchers.dense import DenseOptions, DenseSearcher


@dataclass
class AnnOptions:
    """:param faiss_name: the FAISS index of the folder to audit (None: its default); :param nprobe, ef_search,
    refine: its query-time parameters; :param ks: the cutoffs; :param max_gap: the largest recall shortfall of
    the real queries below the documents' that passes; :param min_recall: the lowest real-query recall that
    passes; :param strict: fail instead of warn; :param max_queries: real queries sampled (seeded) when the
    file holds more; :param controls: vectors per control set (None: as many as real queries); :param seed"""

    faiss_name: str | None = None
    nprobe: int | None = None
    ef_search: int | None = None
    refine: int | None = None  # None: the index's recorded default (--spec auto), else 1
    ks: tuple[int, ...] = (10, 100)
    max_gap: float = 0.05
    min_recall: float = 0.9
    strict: bool = False
    max_queries: int = 1000
    controls: int | None = None
    seed: int = 0


def exact_topk_over_shards(index_dir, meta, queries: np.ndarray, k: int, exclude: np.ndarray | None = None,
                           chunk: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-``k`` ``(scores, global rows)`` by inner product over an index folder's stored float16 shards
    (as float32, one shard in memory at a time), ordered by score desc then row asc; ``exclude[i]`` (a global row,
    -1 none) is never returned for query ``i``. Not :func:`hopscotch.retriever.model.dense_encoder.exact_search`
    (FAISS over one matrix in memory): the audit's reference streams the shards, masks a row before the cut and
    breaks ties by row, and its numpy scores sit beside :func:`recalls`' numpy rescoring of the ANN rows."""
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    n = len(queries)
    best_s = np.full((n, 0), -np.inf, np.float32)
    best_r = np.full((n, 0), -1, np.int64)
    for shard in range(meta.num_shards):
        emb = np.asarray(load_shard_embeddings(index_dir, shard), dtype=np.float32)
        offset = shard * meta.shard_size
        kk = min(k, len(emb))
        for start in range(0, n, chunk):
            q = slice(start, start + chunk)
            scores = queries[q] @ emb.T
            if exclude is not None:
                local = exclude[q] - offset
                hit = (local >= 0) & (local < len(emb))
                scores[np.flatnonzero(hit), local[hit]] = -np.inf
            top = np.argpartition(-scores, kk - 1, axis=1)[:, :kk]
            s = np.take_along_axis(scores, top, axis=1)
            merged = merge_topk(np.concatenate([best_s[q], s], axis=1),
                                np.concatenate([best_r[q], top + offset], axis=1), k)
            if start == 0:
                new_s = np.full((n, merged[0].shape[1]), -np.inf, np.float32)
                new_r = np.full((n, merged[0].shape[1]), -1, np.int64)
            new_s[q], new_r[q] = merged
        best_s, best_r = new_s, new_r
    return best_s, best_r


def ann_search(index, queries: np.ndarray, k: int, opts: AnnOptions, exclude: np.ndarray | None = None
               ) -> np.ndarray:
    """The ANN index's top-``k`` global rows per query (``-1`` padded), ``exclude[i]`` dropped from row ``i``."""
    depth = k + (1 if exclude is not None else 0)
    _, rows = index.search(queries, depth, nprobe=opts.nprobe, ef_search=opts.ef_search, refine=opts.refine)
    if exclude is None:
        return rows[:, :k]
    out = np.full((len(rows), k), -1, np.int64)
    for i, row in enumerate(rows):
        kept = row[row != exclude[i]][:k]
        out[i, :len(kept)] = kept
    return out


def recalls(index_dir, meta, queries: np.ndarray, ann_rows: np.ndarray, exact_rows: np.ndarray,
            exact_scores: np.ndarray, ks: tuple[int, ...]) -> dict[int, np.ndarray]:
    """Per-query recall@k for each k: the share of the exact top-k that the ANN top-k holds, a tie at the exact
    k-th score counting as a hit (:func:`hopscotch.retriever.evaluation.ann_recall.recall_per_query` with the
    ANN rows' exact scores)."""
    depth = ann_rows.shape[1]
    vecs = embedding_rows(index_dir, meta, ann_rows).reshape(len(ann_rows), depth, -1)
    ann_exact = np.einsum("nkd,nd->nk", vecs, np.asarray(queries, np.float32))
    return {k: recall_per_query(ann_rows, exact_rows, k, ann_scores=ann_exact, truth_scores=exact_scores)
            for k in ks}


def summarize(values: np.ndarray) -> dict:
    """Mean and 95% t-interval (clipped to [0, 1]) of per-query recalls."""
    mean = float(values.mean()) if len(values) else float("nan")
    half = _ci95(np.asarray(values, float)) if len(values) else float("nan")
    return {"mean": mean, "ci95": [max(0.0, mean - half), min(1.0, mean + half)], "half_width": half,
            "queries": int(len(values))}


def measure(index_dir, meta, index, queries: np.ndarray, opts: AnnOptions, exclude: np.ndarray | None = None
            ) -> dict[int, dict]:
    """Recall@k (each of ``opts.ks``) of ``index`` against exact search for one set of query vectors."""
    top = max(opts.ks)
    exact_scores, exact_rows = exact_topk_over_shards(index_dir, meta, queries, top, exclude)
    ann_rows = ann_search(index, queries, top, opts, exclude)
    per_k = recalls(index_dir, meta, queries, ann_rows, exact_rows, exact_scores, opts.ks)
    return {k: summarize(v) for k, v in per_k.items()}


def real_query_vectors(index_dir, queries_path, model, reasoning: bool, opts: AnnOptions, query_input=None):
    """``(searcher, vectors, note)``: the dense searcher of ``index_dir`` (its FAISS index: ``opts``) and the
    search vectors of the queries file (a seeded sample of ``opts.max_queries`` when it holds more)."""
    queries = list(read_queries(queries_path))
    if not queries:
        raise UsageError(f"{queries_path}: no queries")
    note = f"{len(queries)} queries"
    if len(queries) > opts.max_queries:
        rng = np.random.default_rng(opts.seed)
        keep = np.sort(rng.choice(len(queries), opts.max_queries, replace=False))
        queries = [queries[i] for i in keep]
        note = f"{opts.max_queries} of {note} (seed {opts.seed})"
    options = DenseOptions(faiss_name=opts.faiss_name, nprobe=opts.nprobe, ef_search=opts.ef_search,
                           refine=opts.refine, query_input=query_input, first_windows_only=True)
    searcher = DenseSearcher(index_dir, model=model, options=options)
    reasoning = reasoning or query_input is not None
    vectors = searcher.query_embeddings([q.with_reasoning(reasoning) for q in queries])
    return searcher, vectors, note


def control_vectors(index_dir, meta, n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(document rows, their stored vectors, random unit vectors)``: ``n`` documents sampled without
    replacement (all when the index holds fewer) and ``n`` Gaussian directions, both seeded."""
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(meta.num_docs, size=min(n, meta.num_docs), replace=False)).astype(np.int64)
    docs = embedding_rows(index_dir, meta, rows)
    rand = rng.standard_normal((n, meta.dim)).astype(np.float32)
    rand /= np.linalg.norm(rand, axis=1, keepdims=True)
    return rows, docs, rand


def audit_ann_fidelity(index_dir: str | os.PathLike, queries_path: str | os.PathLike, model=None,
                       reasoning: bool = False, options: AnnOptions | None = None, query_input: str | None = None,
                       **settings) -> AuditReport:
    """Recall@k of the index's ANN against exact search on the real queries, the documents and random vectors
    (module doc); ``options`` or its fields as keywords."""
    opts = options or AnnOptions(**settings)
    meta = IndexMeta.load(index_dir)
    if meta.multi_vector:
        raise UsageError(f"{index_dir}: a multi-vector index; ann-fidelity audits single-vector FAISS indexes")
    if meta.num_docs < 2:
        raise UsageError(f"{index_dir}: {meta.num_docs} document(s): too few to audit")
    ks = tuple(sorted({min(int(k), meta.num_docs - 1) for k in opts.ks}))
    if any(k < 1 for k in ks):
        raise UsageError("--k: cutoffs must be >= 1")
    opts = AnnOptions(**{**opts.__dict__, "ks": ks})
    searcher, real, note = real_query_vectors(index_dir, queries_path, model, reasoning, opts, query_input)
    index = searcher.index
    if opts.nprobe is None:  # report what FAISS probes by default
        opts = AnnOptions(**{**opts.__dict__, "nprobe": _default_nprobe(index)})
    rows, docs, rand = control_vectors(index_dir, meta, opts.controls or len(real), opts.seed)
    sets = {"real": measure(index_dir, meta, index, real, opts),
            "documents": measure(index_dir, meta, index, docs, opts, exclude=rows),
            "random": measure(index_dir, meta, index, rand, opts)}
    return _report(index_dir, meta, index, searcher, sets, opts, reasoning or query_input is not None, note)


def _default_nprobe(index) -> int | None:
    """The nprobe an IVF index searches with when none is set (FAISS: 1), None for other indexes."""
    try:
        ivf = ivf_or_none(index.parts[0]) if index.parts else None
        return None if ivf is None else int(ivf.nprobe)
    except Exception:  # noqa: BLE001 - a GPU clone FAISS cannot downcast: the default goes unreported
        return None


def judge(sets: dict, opts: AnnOptions) -> tuple[str, list[str], dict]:
    """``(verdict, problems, gaps)`` of measured query sets (``{"real": {k: summary}, "documents": ...}``) under
    the rule of the module doc; a gap's CI is the two independent intervals combined."""
    problems, gaps = [], {}
    for k in opts.ks:
        real, docs = sets["real"][k], sets["documents"][k]
        gap = docs["mean"] - real["mean"]
        half = float(np.hypot(real["half_width"], docs["half_width"]))
        gaps[k] = {"gap": gap, "ci95": [gap - half, gap + half]}
        if gap > opts.max_gap:
            problems.append(f"recall@{k} of the real queries is {gap:.3f} below the documents' "
                            f"(> --max-gap {opts.max_gap:g})")
        if real["mean"] < opts.min_recall:
            problems.append(f"recall@{k} of the real queries is {real['mean']:.3f} "
                            f"(< --min-recall {opts.min_recall:g})")
    verdict = "ok" if not problems else ("fail" if opts.strict else "warning")
    return verdict, problems, gaps


def _report(index_dir, meta, index, searcher, sets: dict, opts: AnnOptions, reasoning: bool, note: str
            ) -> AuditReport:
    verdict, problems, gaps = judge(sets, opts)
    nprobe, refine = index.search_params(opts.nprobe, opts.refine)
    params = ", ".join(f"{n} {v}" for n, v in (("nprobe", nprobe), ("efSearch", opts.ef_search),
                                               ("refine", refine if refine > 1 else None)) if v is not None)
    summary = [f"index {index_dir}: FAISS {index.spec} ({index.layout}{', ' + params if params else ''}) over "
               f"{meta.num_docs:,} documents; model {searcher.settings.path}",
               f"real queries: {note}, " + (f"reasoning-aware ({searcher.query_input})" if reasoning else "plain"),
               f"{'query set':<11}" + "".join(f"{'recall@' + str(k) + ' [95% CI]':>26}" for k in opts.ks)]
    for name, per_k in sets.items():
        cells = "".join(f"{per_k[k]['mean']:>10.3f} [{per_k[k]['ci95'][0]:.3f}, {per_k[k]['ci95'][1]:.3f}]"
                        for k in opts.ks)
        summary.append(f"{name:<11}{cells}   (n={per_k[opts.ks[0]]['queries']})")
    summary.append("gap (documents - real): " + ", ".join(
        f"@{k} {g['gap']:+.3f} [{g['ci95'][0]:+.3f}, {g['ci95'][1]:+.3f}]" for k, g in gaps.items()))
    summary += problems or [f"real-query recall is within {opts.max_gap:g} of the documents' and >= "
                            f"{opts.min_recall:g} at every k"]
    details = {"index": str(index_dir), "faiss": {"spec": index.spec, "layout": index.layout},
               "params": {"nprobe": nprobe, "ef_search": opts.ef_search, "refine": refine},
               "model": str(searcher.settings.path), "reasoning": reasoning,
               "query_input": str(searcher.query_input) if reasoning else "query", "queries": note,
               "ks": list(opts.ks), "max_gap": opts.max_gap, "min_recall": opts.min_recall, "seed": opts.seed,
               "recall": {name: {str(k): v for k, v in per_k.items()} for name, per_k in sets.items()},
               "gap": {str(k): v for k, v in gaps.items()}, "problems": problems,
               "rule": "warning (fail with --strict) when real-query recall@k < documents' - max_gap or < min_recall"}
    return AuditReport("ann-fidelity", verdict, summary, details)
