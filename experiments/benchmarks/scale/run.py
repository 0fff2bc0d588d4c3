"""Measured cost curves: BM25, dense Flat, IVF-PQ and multi-vector indexes built and searched at several corpus
sizes, with ``hopscotch index --plan``'s predictions beside the measurements (``scripts/bench_scale.py``).

Per size, the stages of :mod:`.stages` (each in its own process; corpus and encoders: :mod:`.data`)::

    corpus -> encode -> flat_search -> flat_bare                   (kind dense; sizes up to dense_max)
                     -> ivf_build -> ivf_search
           -> bm25 -> bm25_search                                  (kind bm25s; sizes up to bm25s_max)
           -> bm25_disk -> bm25_disk_search                        (kind disk: :mod:`.bm25`)
           -> mv_build -> mv_search                                (kind mv; sizes up to multivector_max)

Resumable: each stage's result is ``WORK/n<size>/<stage>.json``, keyed by the settings it depends on and the keys
of the stages it reads; a rerun skips a stage whose key is unchanged (and whose inputs were not rebuilt in this
run), so adding a size, or changing ``--nprobe``, redoes only what it must. ``fresh=True`` redoes everything.

The plan (:func:`plan_checks`): :func:`~hopscotch.retriever.index.plan.plan_index` (Flat, shards layout; IVF-PQ,
merged) and :func:`~hopscotch.retriever.index.multi_vector.plan.plan_multi_vector` at the same size, the mean
document bytes of the corpus (docstore) and the first 200 documents' tokens (what ``index --plan --corpus`` reads)
given, compared with: bytes on disk, memory the work added to its process (peak RSS less the peak before it:
imports and the loaded model, which the plan leaves out), and encode time at the rate measured at the smallest size.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import sys
import time
from dataclasses import asdict
from pathlib import Path

from hopscotch_experiments.benchmarks.common import run_json
from hopscotch_experiments.benchmarks.scale.bm25 import bm25_plan_checks
from hopscotch_experiments.benchmarks.scale.stages import PREFIX, ScaleConfig, run_scale_stage, size_dir

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.index.multi_vector.plan import MultiVectorPlanOptions, plan_multi_vector
from hopscotch.retriever.index.plan import PlanOptions, plan_index
from hopscotch.retriever.io.common import read_json, write_json
from hopscotch.retriever.io.fingerprint import digest

#: stage -> (the stages whose outputs it reads, the settings its result depends on)
STAGES = {
    "corpus": ((), ("sources", "seed")),
    "encode": (("setup", "corpus"), ("model", "max_length", "batch_size", "shard_size", "threads")),
    "flat_search": (("encode",), ("k", "repeats", "threads")),
    "flat_bare": (("encode",), ("k", "repeats", "threads")),
    "ivf_build": (("encode",), ("ivf_spec", "threads")),
    "ivf_search": (("ivf_build", "flat_search"), ("nprobe", "refine", "k", "repeats", "threads")),
    "bm25": (("corpus",), ()),
    "bm25_search": (("bm25", "setup"), ("k", "repeats", "threads")),
    "bm25_disk": (("corpus",), ()),
    "bm25_disk_search": (("bm25_disk", "setup"), ("k", "repeats", "threads")),
    "mv_build": (("setup", "corpus"), ("mv_nbits", "batch_size", "shard_size", "threads")),
    "mv_search": (("mv_build",), ("mv_nprobe", "mv_candidates", "mv_exact", "k", "repeats", "threads")),
}
SETUP_FIELDS = ("model", "max_length", "mv_dim", "queries", "query_sources", "seed", "models_needed")
#: stage -> the index kind it belongs to and the config field bounding its sizes (None: the corpus, every size)
STAGE_KINDS = {"encode": ("dense", "dense_max"), "flat_search": ("dense", "dense_max"),
               "flat_bare": ("dense", "dense_max"),
               "ivf_build": ("dense", "dense_max"), "ivf_search": ("dense", "dense_max"),
               "bm25": ("bm25s", "bm25s_max"), "bm25_search": ("bm25s", "bm25s_max"),
               "bm25_disk": ("disk", None), "bm25_disk_search": ("disk", None),
               "mv_build": ("mv", "multivector_max"), "mv_search": ("mv", "multivector_max")}
TOLERANCE = 0.25   # a prediction within 25% of the measurement passes
MIB = 2 ** 20


def _key(cfg: ScaleConfig, names, deps: dict) -> str:
    return digest({"settings": {n: getattr(cfg, n) for n in names}, "inputs": deps})


class _Runner:
    """Runs or skips one stage at a time, keeping keys and results."""

    def __init__(self, cfg: ScaleConfig, log):
        self.cfg, self.log = cfg, log
        self.keys: dict = {}
        self.rebuilt: set = set()

    def run(self, stage: str, size: int | None, deps: tuple, names: tuple) -> dict:
        tag = (stage, size)
        dep_tags = [(d, None if d == "setup" else size) for d in deps]
        key = _key(self.cfg, names, {d: self.keys[t] for d, t in zip(deps, dep_tags)})
        path = size_dir(self.cfg, size) / f"{stage}.json"
        old = read_json(path) if path.is_file() else None
        self.keys[tag] = key
        if old and old.get("key") == key and not any(t in self.rebuilt for t in dep_tags):
            self.log(f"[{stage} {size or ''}] done before, skipped")
            return old
        t0 = time.perf_counter()
        if self.cfg.inline:
            result = run_scale_stage(self.cfg, stage, size)
        else:
            result = _child(self.cfg, stage, size)
        result.update(key=key, process_seconds=time.perf_counter() - t0, when=time.strftime("%Y-%m-%d %H:%M:%S"))
        size_dir(self.cfg, size).mkdir(parents=True, exist_ok=True)
        write_json(path, result)
        self.rebuilt.add(tag)
        self.log(f"[{stage} {size or ''}] {result['process_seconds']:.1f}s")
        return result


def _child(cfg: ScaleConfig, stage: str, size: int | None) -> dict:
    threads = str(cfg.threads)
    env = {**os.environ, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, "OPENBLAS_NUM_THREADS": threads,
           "TOKENIZERS_PARALLELISM": "false"}
    cmd = [sys.executable, "-m", "hopscotch_experiments.benchmarks.scale.stages", stage, cfg.work,
           "-" if size is None else str(size)]
    return run_json(cmd, env=env, prefix=PREFIX, what=f"stage {stage} at {size}")[0]


def clear(cfg: ScaleConfig) -> None:
    """Remove what earlier runs left in ``cfg.work`` (only this benchmark's own files)."""
    work = Path(cfg.work)
    for name in ("setup.json", "queries.jsonl", "models"):
        target = work / name
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
    for folder in work.glob("n[0-9]*"):
        if folder.is_dir():
            shutil.rmtree(folder)


def run_scale(cfg: ScaleConfig, fresh: bool = False, log=print) -> dict:
    """Every stage of every size (skipping finished ones unless ``fresh``); the results and the plan checks. A second
    run on the same ``cfg.work`` while one is going is refused (they would remove each other's files)."""
    Path(cfg.work).mkdir(parents=True, exist_ok=True)
    with open(Path(cfg.work) / ".lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise UsageError(f"{cfg.work}: another bench_scale run is using it") from None
        return _run_all(cfg, fresh, log)


def _run_all(cfg: ScaleConfig, fresh: bool, log) -> dict:
    if fresh:
        clear(cfg)
    cfg.save()
    runner = _Runner(cfg, log)
    setup = runner.run("setup", None, (), SETUP_FIELDS)
    sizes = {}
    for size in sorted(cfg.sizes):
        stages = {}
        for stage, (deps, names) in STAGES.items():
            if not stage_wanted(cfg, stage, size):
                continue
            stages[stage] = runner.run(stage, size, deps, names)
        sizes[str(size)] = stages
    result = {"config": asdict(cfg), "setup": setup, "sizes": sizes}
    result["plan"] = plan_checks(result)
    return result


def stage_wanted(cfg: ScaleConfig, stage: str, size: int) -> bool:
    """Whether ``stage`` runs at ``size``: its kind is one of ``cfg.kinds`` and the size within its bound."""
    kind, bound = STAGE_KINDS.get(stage, (None, None))
    if kind is None:
        return True
    return kind in cfg.kinds and (bound is None or size <= getattr(cfg, bound))


def _check(size: int, what: str, predicted: float, measured: float, unit: str) -> dict:
    ratio = measured / predicted if predicted else float("inf")
    return {"size": size, "what": what, "unit": unit, "predicted": predicted, "measured": measured, "ratio": ratio,
            "within": abs(ratio - 1) <= TOLERANCE}


def _ram(stage: dict) -> float:
    """Bytes a stage's work added to its process's peak RSS."""
    return (stage["peak_rss_mib"] - stage["base_rss_mib"]) * MIB


def plan_checks(result: dict) -> list[dict]:
    """The plan's predictions at each measured size beside the measurements (module doc)."""
    cfg = result["config"]
    out = []
    sizes = sorted(int(s) for s in result["sizes"] if "encode" in result["sizes"][s])
    first_rate = result["sizes"][str(sizes[0])]["encode"]["docs_per_second"] if sizes else None
    for size in sizes:
        st = result["sizes"][str(size)]
        enc, dim = st["encode"], st["encode"]["dim"]
        avg = round(st["corpus"]["avg_doc_bytes"])
        flat = plan_index(size, dim, "Flat", PlanOptions(shard_size=cfg["shard_size"], layout="shards",
                                                         avg_doc_bytes=avg, docs_per_second=first_rate))
        out += [_check(size, "dense index folder (shards, ids, lookup, docstore)", flat.total("disk"),
                       enc["disk"]["total"] - enc["disk"]["faiss"], "bytes"),
                _check(size, "encode RAM beyond the warmed-up model (one shard; docid sort)",
                       max(flat.total("encode memory"), flat.total("finalize memory")),
                       (enc["peak_rss_mib"] - enc["base_rss_mib"]) * MIB, "bytes"),
                _check(size, "Flat search RAM", flat.total("search memory"), _ram(st["flat_search"]), "bytes")]
        if size != sizes[0]:
            out.append(_check(size, f"encode time at the {sizes[0]:,}-document rate", flat.encode_hours * 3600,
                              enc["encode_seconds"], "seconds"))
        spec = st["ivf_build"]["spec"]
        ivf = plan_index(size, dim, spec, PlanOptions(shard_size=cfg["shard_size"], layout="merged", avg_doc_bytes=avg))
        refine_copy = 2.0 * dim * size if st["ivf_search"].get("refine", 1) > 1 else 0.0
        out += [_check(size, f"{spec} index file", _row(ivf, "disk", "FAISS index files"),
                       st["ivf_build"].get("index_file_bytes", st["ivf_build"]["index_bytes"]), "bytes"),
                _check(size, f"{spec} build RAM",
                       max(ivf.total("faiss training memory"), ivf.total("faiss adding memory")),
                       _ram(st["ivf_build"]), "bytes"),
                _check(size, f"{spec} search RAM (with the refine copy)", ivf.total("search memory") + refine_copy,
                       _ram(st["ivf_search"]), "bytes")]
        if "mv_build" in st:
            out += _mv_checks(cfg, size, st, avg)
    return out + bm25_plan_checks(result, _check)


def _row(plan, section: str, prefix: str) -> float:
    return sum(b for s, item, b in plan.rows if s == section and item.startswith(prefix))


def _mv_checks(cfg: dict, size: int, st: dict, avg: int) -> list[dict]:
    mv = st["mv_build"]
    plan = plan_multi_vector(size, mv["dim"], MultiVectorPlanOptions(tokens_per_doc=mv["plan_tokens_per_doc"],
                                                                     nbits=cfg["mv_nbits"]),
                             PlanOptions(shard_size=cfg["shard_size"], avg_doc_bytes=avg))
    build = max(plan.total(p) for p in ("encode memory", "faiss training memory", "faiss adding memory"))
    return [_check(size, "multi-vector index folder", plan.total("disk"), mv["disk"]["total"], "bytes"),
            _check(size, "multi-vector build RAM beyond the warmed-up model", build, _ram(mv), "bytes"),
            _check(size, "multi-vector search RAM", plan.total("search memory"), _ram(st["mv_search"]), "bytes")]
