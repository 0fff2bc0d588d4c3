"""GPU check, section 3: IVF-PQ built and searched with faiss-gpu against faiss-cpu in the same run.

The vectors are ``scripts/bench_index.py``'s clustered unit vectors
(:func:`hopscotch_experiments.benchmarks.vectors.clustered_vectors`) (Zipf cluster sizes, power-law
spectrum; 1,000,000 x 384 by default); the queries fresh draws from the same process. The index is
made by :func:`hopscotch.retriever.index.faiss_index.make_index` (inner product, no polysemous
training), trained on a sample, filled, then searched at ``k = 100``. The exact top-100 comes from a
torch matmul on the device. Rows: build seconds, queries/s and recall@100 of each side; the section
passes when the GPU index's recall is within 0.05 of the CPU index's.

Skipped with ``skipped: faiss-gpu not importable`` when ``faiss`` has no GPU support or sees no GPU.
On CPU (``--cpu-smoke``) the "gpu" side is a second CPU index, to exercise the code, and faiss runs one
OpenMP thread (``threads``; default: every core): at tiny sizes more threads only wait on each other
(on two busy cores the 5,000-vector build took 5.5 s on two threads, 0.6 s on one).
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

from hopscotch_experiments.benchmarks.gpu_check import Deadline, section_main
from hopscotch_experiments.benchmarks.vectors import clustered_vectors
from hopscotch.retriever.evaluation.ann_recall import recall_at

SIZES = {
    "full": {"vectors": 1_000_000, "dim": 384, "clusters": 4096, "queries": 1000, "spec": "IVF2048,PQ64",
             "train_size": 131072, "nprobe": 16, "threads": None},
    "tiny": {"vectors": 5000, "dim": 32, "clusters": 32, "queries": 50, "spec": "IVF16,PQ8", "train_size": 4096,
             "nprobe": 4, "threads": 1},
}


def faiss_gpu_status(faiss) -> str | None:
    """``None`` when faiss-gpu can be used; else why not."""
    if not hasattr(faiss, "StandardGpuResources"):
        return "skipped: faiss-gpu not importable (this faiss has no GPU support)"
    if faiss.get_num_gpus() < 1:
        return "skipped: faiss-gpu not importable (faiss sees no GPU)"
    return None


def make_data(vectors: int, dim: int, clusters: int, queries: int) -> tuple[np.ndarray, np.ndarray]:
    base = np.concatenate(list(clustered_vectors(vectors, dim, clusters, seed=0)))
    query = next(clustered_vectors(queries, dim, clusters, seed=1, chunk=queries))
    return np.ascontiguousarray(base), np.ascontiguousarray(query)


def exact_topk(base: np.ndarray, query: np.ndarray, k: int, device: str, chunk: int = 200_000) -> np.ndarray:
    """Row ids of the exact inner-product top-``k`` of every query (torch on ``device``)."""
    import torch

    q = torch.from_numpy(query).to(device)
    best_s, best_i = None, None
    for start in range(0, len(base), chunk):
        x = torch.from_numpy(base[start:start + chunk]).to(device)
        s, i = torch.topk(q @ x.T, min(k, len(x)), dim=1)
        i = i + start
        if best_s is not None:
            s, pick = torch.topk(torch.cat([best_s, s], 1), k, dim=1)
            i = torch.gather(torch.cat([best_i, i], 1), 1, pick)
        best_s, best_i = s, i
    return best_i.cpu().numpy()


def build_and_search(faiss, side: str, base, query, truth, spec: str, train_size: int, nprobe: int, k: int) -> dict:
    """Train, add and search one index; ``side`` is ``cpu`` or ``gpu`` (``gpu-standin``: CPU, smoke)."""
    from hopscotch.retriever.index.faiss_index import make_index

    index = make_index(spec, base.shape[1])
    if side == "gpu":
        options = faiss.GpuClonerOptions()
        options.useFloat16 = True  # float16 lookup tables: needed for many PQ sub-quantizers on GPU
        resources = faiss.StandardGpuResources()
        index = faiss.index_cpu_to_gpu(resources, 0, index, options)
    sample = np.random.default_rng(0).choice(len(base), size=min(train_size, len(base)), replace=False)
    start = time.perf_counter()
    index.train(np.ascontiguousarray(base[np.sort(sample)]))
    index.add(base)
    build = time.perf_counter() - start
    params = faiss.GpuParameterSpace() if side == "gpu" else faiss.ParameterSpace()
    params.set_index_parameter(index, "nprobe", nprobe)
    index.search(query[: min(10, len(query))], k)  # warm-up
    times, rows = [], None
    for _ in range(3):
        start = time.perf_counter()
        _, rows = index.search(query, k)
        times.append(time.perf_counter() - start)
    return {"build": build, "qps": len(query) / float(np.median(times)), "recall": recall_at(rows, truth)}


def run_faiss(rec, device: str = "cuda", deadline: Deadline | None = None, vectors: int = 1_000_000, dim: int = 384,
              clusters: int = 4096, queries: int = 1000, spec: str = "IVF2048,PQ64", train_size: int = 131072,
              nprobe: int = 16, k: int = 100, threads: int | None = None) -> None:
    """Section 3 (see the module docstring)."""
    deadline = deadline or Deadline()
    try:
        import faiss
    except ImportError as exc:
        rec.row("faiss-gpu IVF-PQ", f"skipped: faiss-gpu not importable ({exc})", "SKIP")
        return
    on_gpu = device.startswith("cuda")
    if on_gpu and (why := faiss_gpu_status(faiss)) is not None:
        rec.row("faiss-gpu IVF-PQ", why, "SKIP")
        return
    faiss.omp_set_num_threads(threads or os.cpu_count() or 1)
    base, query = make_data(vectors, dim, clusters, queries)
    truth = exact_topk(base, query, k, device)
    setting = f"{spec}, {len(base):,} x {dim}, nprobe {nprobe}, {len(query)} queries, k {k}"
    results = {}
    for side in ("gpu" if on_gpu else "gpu-standin", "cpu"):
        if results and deadline.passed():
            rec.row(f"faiss {side}", "skipped: the section's time budget is spent", "INFO")
            continue
        r = build_and_search(faiss, "gpu" if side == "gpu" else "cpu", base, query, truth, spec, train_size, nprobe, k)
        results[side] = r
        label = f"faiss {side}" + (" (CPU stand-in: no CUDA)" if side == "gpu-standin" else "")
        rec.row(f"{label} IVF-PQ", f"build {r['build']:.1f} s, {r['qps']:,.0f} q/s, recall@100 {r['recall']:.3f} "
                f"({setting})")
    gpu, cpu = results.get("gpu") or results.get("gpu-standin"), results.get("cpu")
    if gpu and cpu:
        ok = gpu["recall"] >= cpu["recall"] - 0.05
        rec.row("faiss gpu vs cpu", f"build {cpu['build'] / gpu['build']:.1f}x faster, search "
                f"{gpu['qps'] / cpu['qps']:.1f}x q/s, recall@100 {gpu['recall']:.3f} vs {cpu['recall']:.3f}",
                "PASS" if ok else "FAIL")


if __name__ == "__main__":
    sys.exit(section_main('faiss', run_faiss, SIZES))
