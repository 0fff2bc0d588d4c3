"""The checks every command applies to its flags before any work starts.

* ``type=`` functions for argparse (a bad value is one stderr line naming the flag, exit code 2):
  :func:`positive_int`, :func:`non_negative_int`, :func:`seed_int`, :func:`int_range` (bounded counts),
  :func:`finite_float`, :func:`positive_float`, :func:`non_negative_float`, :func:`unit_interval`
  (defined in :mod:`hopscotch.retriever.searchers.arg_types`, where the searchers' flags use them too);
  :func:`permutations_int` and :func:`cutoff_int` (a ``k`` that is also a metric cutoff); :func:`metric_name`
  and :func:`metric_list` (``ndcg@k``, ``recall@k``, ``mrr@k``, ``map@k``, ``p@k`` with ``1 <= k <=
  MAX_CUTOFF``, through :func:`hopscotch.retriever.evaluation.metrics.parse_metric`);
* clamps, each with a one-line note on stderr: ``k`` to the documents a searcher holds
  (:func:`clamp_k`: ``--k 1000000000 > 3,000 documents: using 3,000``) and an encoder's max length to the
  positions of the model (:func:`clamp_max_length`: ``--max-length 100000 > the model's 512 positions:
  using 512``; the limit is :func:`hopscotch.retriever.model.position_limit.model_position_limit`);
* :func:`check_device`: ``--device cuda`` on a machine without CUDA (or a device that does not parse, or
  ``cuda:N`` past the last GPU) is a :class:`~hopscotch.retriever.errors.UsageError`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.evaluation.metrics import MAX_CUTOFF, parse_metric, parse_metric_list
from hopscotch.retriever.model.loading import resolve_model_path
from hopscotch.retriever.model.position_limit import model_position_limit, read_json_dict
from hopscotch.retriever.searchers.arg_types import (
    SEED_MAX,
    finite_float,
    float_range,
    int_range,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
    seed_int,
    unit_interval,
)

__all__ = [
    "MAX_PERMUTATIONS", "SEED_MAX", "check_device", "clamp", "clamp_k", "clamp_max_length", "cutoff_int",
    "finite_float", "float_range", "int_range", "metric_list", "metric_name", "model_position_limit",
    "non_negative_float", "non_negative_int", "permutations_int", "positive_float", "positive_int",
    "searcher_size", "seed_int", "unit_interval",
]

#: the most permutations a randomisation test may draw (each is a row of signs over the queries, held in memory)
MAX_PERMUTATIONS = 1_000_000
#: ``type=`` of ``--permutations``: 1 .. MAX_PERMUTATIONS
permutations_int = int_range(1, MAX_PERMUTATIONS)
#: ``type=`` of a ``k`` that also names a metric cutoff (``recall@k``): 1 .. trec_eval's MAX_CUTOFF
cutoff_int = int_range(1, MAX_CUTOFF)


def metric_name(text: str) -> str:
    """``type=`` for one metric (``ndcg@10``): the lower-case name."""
    try:
        parse_metric(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text.strip().lower()


def metric_list(text: str) -> list[str]:
    """``type=`` for a comma-separated list of metrics (``ndcg@10,recall@100``): the lower-case names, at
    least one, repeats dropped."""
    try:
        return parse_metric_list(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def clamp(command: str, flag: str, value: int, limit: int | None, what: str) -> int:
    """``min(value, limit)``; when it cuts, print ``hopscotch COMMAND: note: FLAG VALUE > WHAT: using LIMIT``
    on stderr. ``limit`` None: no limit known, ``value`` unchanged."""
    if limit is None or value <= limit:
        return value
    print(f"hopscotch {command}: note: {flag} {value} > {what}: using {limit:,}", file=sys.stderr)
    return limit


def searcher_size(searcher) -> int | None:
    """The documents a searcher can return: a dense index's count, a BM25 index's, the larger of a hybrid's
    two, a reranked searcher's first stage's; None when unknown (a remote service)."""
    if getattr(searcher, "first", None) is not None:
        return searcher_size(searcher.first)
    parts = [p for p in (getattr(searcher, "bm25", None), getattr(searcher, "dense", None)) if p is not None]
    if parts:
        sizes = [searcher_size(p) for p in parts]
        return None if None in sizes else max(sizes)
    meta = getattr(searcher, "meta", None)
    if getattr(meta, "num_docs", None) is not None:
        return int(meta.num_docs)
    docids = getattr(getattr(searcher, "index", None), "docids", None)
    return None if docids is None else len(docids)


def clamp_k(command: str, k: int, searcher, flag: str = "--k") -> int:
    """``k`` cut to :func:`searcher_size` (with the note of :func:`clamp`), and a note for each candidate pool of
    the searcher that ``k`` widens (:func:`pool_notes`)."""
    size = searcher_size(searcher)
    k = clamp(command, flag, k, size, f"{size:,} documents" if size is not None else "")
    for note in pool_notes(k, searcher):
        print(f"hopscotch {command}: note: {note}", file=sys.stderr)
    return k


def pool_notes(k: int, searcher) -> list[str]:
    """What a ``k`` above a searcher's candidate pools changes: a pool is never smaller than ``k`` (the reranker's
    ``--rerank-depth``, a hybrid's ``--depth`` per list, the multi-vector index's ``--mv-candidates``), so with a
    larger ``k`` more candidates are scored and the top of the list (what nDCG@10 reads) may differ from a
    search with a smaller ``k``; the documented behaviour, said once per search."""
    notes = []
    reranker = getattr(searcher, "rerank_stage", None)
    if reranker is not None and k > reranker.depth and reranker.widens_with_k:
        notes.append(f"--k {k:,} > --rerank-depth {reranker.depth:,}: the top {k:,} first-stage candidates are "
                     f"reranked (a smaller --k reranks {reranker.depth:,}, and its top 10 may differ)")
    elif reranker is not None and k > reranker.depth:
        notes.append(f"--k {k:,} > --rerank-depth {reranker.depth:,}: the top {reranker.depth:,} are reranked "
                     f"{reranker.describe()}, the first stage's next {k - reranker.depth:,} follow in its order")
    first = getattr(searcher, "first", searcher)
    depth = getattr(first, "depth", None)
    if getattr(first, "bm25", None) is not None and getattr(first, "dense", None) is not None and depth and k > depth:
        notes.append(f"--k {k:,} > --depth {depth:,}: each list gives {k:,} candidates to the fusion (a smaller "
                     f"--k fuses {depth:,}, and its top 10 may differ)")
    vector = getattr(first, "dense", first)
    candidates = getattr(vector, "candidates", None) if getattr(vector, "store", None) is not None else None
    if candidates and k > candidates:
        notes.append(f"--k {k:,} > --mv-candidates {candidates:,}: {k:,} documents are scored by exact MaxSim (a "
                     f"smaller --k scores {candidates:,}, and its top 10 may differ)")
    return notes


def configured_dim(model: str | os.PathLike) -> int | None:
    """A sentence-transformers model's embedding dimension as its module configs state it, without loading its
    weights: the last Dense layer's ``out_features``, else a one-mode Pooling's dimension; None when they do not
    say plainly (several pooling modes, an unknown module: load the model to know)."""
    path = Path(resolve_model_path(model))
    try:
        modules = json.loads((path / "modules.json").read_text(encoding="utf-8"))
        for module in reversed(modules):
            kind, config = str(module.get("type", "")), read_json_dict(path / module.get("path", "") / "config.json")
            if kind.endswith("Dense"):
                return int(config["out_features"])
            if kind.endswith("Pooling"):
                modes = config.get("pooling_mode")
                if modes is None:  # the older config: one boolean per mode
                    modes = [k for k, v in config.items() if k.startswith("pooling_mode_") and v is True]
                single = (isinstance(modes, str) and modes.isidentifier()
                          or isinstance(modes, list) and len(modes) == 1)
                dim = config.get("embedding_dimension", config.get("word_embedding_dimension"))
                return int(dim) if single and isinstance(dim, int) and not isinstance(dim, bool) else None
            if not kind.endswith(("Normalize", "MultiVectorMask")):  # neither changes the dimension
                return None
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None
    return None


def clamp_max_length(command: str, max_length: int | None, model: str | os.PathLike,
                     flag: str = "--max-length") -> int | None:
    """``max_length`` cut to :func:`model_position_limit` of ``model`` (with the note of :func:`clamp`);
    None stays None (the command's default applies)."""
    if max_length is None:
        return None
    limit = model_position_limit(model)
    return clamp(command, flag, max_length, limit, f"the model's {limit} positions")


def check_device(device: str | None, flag: str = "--device") -> str | None:
    """``device`` when this machine has it (None: the command picks one); otherwise a UsageError: not a torch
    device, ``cuda`` without CUDA, ``cuda:N`` past the last GPU, ``mps`` without Metal."""
    if device is None:
        return None
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise UsageError(f"{flag} {device!r}: not a torch device (cpu, cuda, cuda:N, mps)") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise UsageError(f"{flag} {device}: CUDA is not available on this machine (use {flag} cpu)")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise UsageError(f"{flag} {device}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    elif dev.type == "mps" and not torch.backends.mps.is_available():
        raise UsageError(f"{flag} {device}: MPS is not available on this machine (use {flag} cpu)")
    elif dev.type not in ("cpu", "cuda", "mps"):
        raise UsageError(f"{flag} {device}: unsupported device type {dev.type!r} (cpu, cuda, cuda:N, mps)")
    return device
