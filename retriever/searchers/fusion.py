"""Fusing ranked lists with Pyserini's semantics: reciprocal rank fusion and score interpolation.

* :func:`reciprocal_rank_fusion` follows ``pyserini.fusion.reciprocal_rank_fusion``: each list is cut to
  ``depth``, a document scores ``sum(1 / (rrf_k + rank))`` over the lists it appears in (ranks from 1),
  and the fused list is ordered by (score desc, docid asc) and cut to ``k``. With ``weights`` (weighted
  RRF) list ``i`` adds ``weights[i] / (rrf_k + rank)``; weights of 1 give plain RRF exactly.
* :func:`interpolate` follows ``pyserini.search.hybrid.HybridSearcher``: a document missing from one list
  takes that list's minimum score; with ``normalization="minmax"`` (Pyserini's) each list's scores are
  centred on the midpoint of their range and divided by the range, with ``"zscore"`` they are standardised
  (minus the list's mean, over its standard deviation: OpenSearch's ``z_score`` technique), so a list's
  scale is set by all of its scores rather than by its two extremes; the fused score is ``alpha * sparse + dense`` (or
  ``sparse + alpha * dense`` with ``weight_on_dense``).

A ranked list is a sequence of ``(docid, score)`` pairs, best first. :class:`FusionSettings` holds one
fusion's method and parameters (what ``hopscotch tune-fusion`` writes and ``--fusion-config`` reads);
:meth:`FusionSettings.convex` turns a convex weight ``w * bm25 + (1 - w) * dense`` into Pyserini's
``alpha`` / ``weight_on_dense`` (the same ranking).

Example::

    fused = reciprocal_rank_fusion([bm25_hits, dense_hits], rrf_k=60, k=100)
    fused = interpolate(bm25_hits, dense_hits, alpha=1.0, k=100)     # [(docid, score), ...], Pyserini min-max
    settings = read_fusion_config("tuned.json")                        # or FusionSettings.convex(0.3, "zscore")
    fused = settings.apply(bm25_hits, dense_hits, k=100)
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace

from hopscotch.retriever.errors import FormatError, UsageError
from hopscotch.retriever.searchers.arg_types import finite_float, non_negative_float, positive_int, unit_interval
from hopscotch.retriever.io.common import read_json
from hopscotch.retriever.io.validate import json_number
from hopscotch.retriever.searchers.adaptive_fusion import adaptive_weight

Hits = Sequence[tuple[str, float]]
FUSION_METHODS = ("rrf", "interp", "adaptive")
NORMALIZATIONS = ("minmax", "zscore")   # interpolation's score normalisations; minmax is Pyserini's


def _ordered(scores: dict[str, float], k: int | None) -> list[tuple[str, float]]:
    out = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
    return out if k is None else out[:k]


def reciprocal_rank_fusion(runs: Sequence[Hits], rrf_k: float = 60, depth: int | None = None,
                           k: int | None = None, weights: Sequence[float] | None = None) -> list[tuple[str, float]]:
    """RRF over any number of ranked lists (Cormack et al., 2009; Pyserini's implementation), optionally
    weighted: list ``i`` adds ``weights[i] / (rrf_k + rank)``."""
    if rrf_k < 0:
        raise UsageError(f"--rrf-k must be non-negative, got {rrf_k}")
    if weights is not None and len(weights) != len(runs):
        raise UsageError(f"RRF: {len(weights)} weights for {len(runs)} ranked lists")
    fused: dict[str, float] = {}
    for i, hits in enumerate(runs):
        w = 1.0 if weights is None else weights[i]
        for rank, (docid, _) in enumerate(list(hits)[:depth], start=1):
            fused[docid] = fused.get(docid, 0.0) + w * (1.0 / (rrf_k + rank))  # 1.0 * x == x: plain RRF
    return _ordered(fused, k)


def _normaliser(scores: Sequence[float], normalization: bool | str | None):
    """``score -> normalised score`` for one list: Pyserini's min-max (``True`` / ``"minmax"``: centred on the
    range's midpoint, over the range), ``"zscore"`` (minus the mean, over the population standard deviation)
    or the identity (``False`` / ``None``); a list whose scores are all equal maps to 0."""
    if normalization in (False, None):
        return lambda x: x
    if normalization is True or normalization == "minmax":
        lo, hi = (min(scores), max(scores)) if scores else (0.0, 1.0)
        return lambda x: (x - (lo + hi) / 2) / (hi - lo) if hi > lo else 0.0
    if normalization == "zscore":
        mean = math.fsum(scores) / len(scores) if scores else 0.0
        sd = math.sqrt(math.fsum((x - mean) ** 2 for x in scores) / len(scores)) if scores else 0.0
        return lambda x: (x - mean) / sd if sd > 0 else 0.0
    raise UsageError(f"unknown score normalisation {normalization!r}: use one of {', '.join(NORMALIZATIONS)}")


def interpolate(sparse: Hits, dense: Hits, alpha: float = 1.0, k: int | None = None,
                normalization: bool | str = True, weight_on_dense: bool = False,
                depth: int | None = None) -> list[tuple[str, float]]:
    """Pyserini's hybrid interpolation of a sparse (BM25) and a dense list; ``normalization``: ``True`` or
    ``"minmax"`` (Pyserini's), ``"zscore"``, or ``False`` (raw scores)."""
    sparse_hits = dict(list(sparse)[:depth])
    dense_hits = dict(list(dense)[:depth])
    lo_s = min(sparse_hits.values()) if sparse_hits else 0.0
    lo_d = min(dense_hits.values()) if dense_hits else 0.0
    norm_s = _normaliser(list(sparse_hits.values()), normalization)
    norm_d = _normaliser(list(dense_hits.values()), normalization)
    fused: dict[str, float] = {}
    for docid in set(sparse_hits) | set(dense_hits):
        s = norm_s(sparse_hits.get(docid, lo_s))
        d = norm_d(dense_hits.get(docid, lo_d))
        fused[docid] = s + alpha * d if weight_on_dense else alpha * s + d
    return _ordered(fused, k)


def fuse(method: str, sparse: Hits, dense: Hits, k: int, alpha: float = 1.0, rrf_k: float = 60,
         depth: int | None = None, weights: Sequence[float] | None = None) -> list[tuple[str, float]]:
    """Dispatch on ``method`` (``rrf``, ``interp`` or ``adaptive``) for one query's BM25 and dense lists;
    ``weights`` (``w_bm25, w_dense``) make RRF weighted; ``adaptive`` is :data:`DEFAULT_ADAPTIVE` with
    ``alpha`` as its base weight."""
    if method == "rrf":
        return reciprocal_rank_fusion([sparse, dense], rrf_k=rrf_k, depth=depth, k=k, weights=weights)
    if method == "interp":
        return interpolate(sparse, dense, alpha=alpha, k=k, depth=depth)
    if method == "adaptive":
        return replace(DEFAULT_ADAPTIVE, alpha=alpha, weight_on_dense=False).apply(sparse, dense, k=k, depth=depth)
    raise UsageError(f"unknown fusion {method!r}: use one of {', '.join(FUSION_METHODS)}")


@dataclass(frozen=True)
class FusionSettings:
    """One fusion of a BM25 and a dense list: ``method`` and its parameters.

    :param method: ``rrf`` or ``interp``
    :param alpha: interp: Pyserini's weight, ``alpha * bm25 + dense`` (``bm25 + alpha * dense`` with
        ``weight_on_dense``), on normalised scores
    :param weight_on_dense: interp: put ``alpha`` on the dense score
    :param rrf_k: rrf: the constant in ``1 / (rrf_k + rank)``
    :param weights: rrf: ``(w_bm25, w_dense)`` for weighted RRF; None is plain RRF
    :param normalization: interp and adaptive: ``minmax`` (Pyserini's) or ``zscore``
    :param adapt: adaptive: how strongly each query's own lists move the BM25 weight away from the base weight
        that ``alpha`` / ``weight_on_dense`` give (:mod:`~hopscotch.retriever.searchers.adaptive_fusion`; 0 is
        the fixed interpolation)
    :param shift: adaptive: the standout difference (BM25 minus dense) at which neither list is favoured
    :param agreement_k: adaptive: the top ranks whose overlap measures the two lists' agreement
    """

    method: str = "rrf"
    alpha: float = 1.0
    weight_on_dense: bool = False
    rrf_k: float = 60.0
    weights: tuple[float, float] | None = None
    normalization: str = "minmax"
    adapt: float = 0.0
    shift: float = 0.0
    agreement_k: int = 10

    def __post_init__(self) -> None:
        if self.method not in FUSION_METHODS:
            raise UsageError(f"unknown fusion {self.method!r}: use one of {', '.join(FUSION_METHODS)}")
        if self.rrf_k < 0:
            raise UsageError(f"--rrf-k must be non-negative, got {self.rrf_k}")
        if not math.isfinite(self.alpha):
            raise UsageError(f"--alpha must be a finite number, got {self.alpha}")
        if self.normalization not in NORMALIZATIONS:
            raise UsageError(f"unknown score normalisation {self.normalization!r}: use one of {', '.join(NORMALIZATIONS)}")
        for name in ("adapt", "shift"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
                raise UsageError(f"adaptive fusion: {name} must be a finite number, got {value!r}")
        if self.adapt < 0:
            raise UsageError(f"adaptive fusion: adapt must be >= 0, got {self.adapt}")
        if isinstance(self.agreement_k, bool) or not isinstance(self.agreement_k, int) or self.agreement_k < 1:
            raise UsageError(f"adaptive fusion: agreement_k must be a positive integer, got {self.agreement_k!r}")
        if self.alpha < 0:
            raise UsageError(f"--alpha must be non-negative, got {self.alpha}")
        if self.weights is not None:
            weights = tuple(float(w) for w in self.weights)
            if len(weights) != 2 or min(weights) < 0 or max(weights) <= 0:
                raise UsageError(f"RRF weights must be two non-negative numbers, not both 0 (got {self.weights})")
            object.__setattr__(self, "weights", weights)

    @classmethod
    def convex(cls, sparse_weight: float, normalization: str = "minmax") -> FusionSettings:
        """Interpolation ranking like ``w * bm25 + (1 - w) * dense`` (normalised scores), as Pyserini's
        ``alpha``: ``w / (1 - w)`` on BM25 for ``w <= 0.5``, else ``(1 - w) / w`` on dense.
        ``w = 0`` is the dense list alone, ``w = 1`` BM25 alone, ``w = 0.5`` Pyserini's default."""
        w = float(sparse_weight)
        if not 0.0 <= w <= 1.0:
            raise UsageError(f"interpolation weight must lie in [0, 1], got {w}")
        if w <= 0.5:
            return cls("interp", alpha=w / (1.0 - w), normalization=normalization)
        return cls("interp", alpha=(1.0 - w) / w, weight_on_dense=True, normalization=normalization)

    @classmethod
    def adaptive(cls, sparse_weight: float, adapt: float, shift: float = 0.0, normalization: str = "zscore",
                 agreement_k: int = 10) -> FusionSettings:
        """Adaptive fusion around the base convex BM25 weight ``sparse_weight`` (as :meth:`convex`)."""
        base = cls.convex(sparse_weight, normalization)
        return cls("adaptive", alpha=base.alpha, weight_on_dense=base.weight_on_dense, normalization=normalization,
                   adapt=float(adapt), shift=float(shift), agreement_k=agreement_k)

    @property
    def sparse_weight(self) -> float | None:
        """interp and adaptive: the (base) convex weight on BM25 (inverse of :meth:`convex`); None for RRF."""
        if self.method == "rrf":
            return None
        return 1.0 / (1.0 + self.alpha) if self.weight_on_dense else self.alpha / (1.0 + self.alpha)

    def apply(self, sparse: Hits, dense: Hits, k: int | None = None, depth: int | None = None) -> list[tuple[str, float]]:
        """Fuse one query's BM25 and dense lists, each cut to ``depth``; the result cut to ``k``."""
        if self.method == "rrf":
            return reciprocal_rank_fusion([sparse, dense], rrf_k=self.rrf_k, depth=depth, k=k, weights=self.weights)
        if self.method == "adaptive":
            sparse, dense = list(sparse)[:depth], list(dense)[:depth]
            w = adaptive_weight(sparse, dense, self.sparse_weight, self.adapt, self.shift, self.agreement_k)
            return FusionSettings.convex(w, self.normalization).apply(sparse, dense, k=k)
        return interpolate(sparse, dense, alpha=self.alpha, k=k, depth=depth, weight_on_dense=self.weight_on_dense,
                           normalization=self.normalization)

    def describe(self) -> str:
        """A short label: ``interp w=0.30`` (min-max), ``interp zscore w=0.40``, ``rrf k=60 w=1:0.5`` or
        ``adaptive zscore w=0.30 a=1 s=0.5``."""
        if self.method == "adaptive":
            k = "" if self.agreement_k == 10 else f" k={self.agreement_k}"
            return (f"adaptive {self.normalization} w={self.sparse_weight:.2f} a={self.adapt:g} "
                    f"s={self.shift:g}{k}")
        if self.method == "interp":
            norm = "" if self.normalization == "minmax" else f" {self.normalization}"
            return f"interp{norm} w={self.sparse_weight:.2f}"
        weights = "" if self.weights is None else f" w={self.weights[0]:g}:{self.weights[1]:g}"
        return f"rrf k={self.rrf_k:g}{weights}"

    def to_json(self) -> dict:
        """``{method, ...parameters}``: interp writes ``alpha``, ``weight_on_dense``, ``sparse_weight``,
        ``normalization`` (``minmax`` or ``zscore``); rrf writes ``rrf_k`` and ``weights`` (``[w_bm25, w_dense]``
        or null)."""
        if self.method in ("interp", "adaptive"):
            out = {"method": self.method, "alpha": self.alpha, "weight_on_dense": self.weight_on_dense,
                   "sparse_weight": self.sparse_weight, "normalization": self.normalization}
            if self.method == "adaptive":
                out.update(adapt=self.adapt, shift=self.shift, agreement_k=self.agreement_k)
            return out
        return {"method": "rrf", "rrf_k": self.rrf_k, "weights": None if self.weights is None else list(self.weights)}

    @classmethod
    def from_json(cls, obj: dict, path: str | os.PathLike = "fusion config") -> FusionSettings:
        """The settings a config file names (what :meth:`to_json` wrote, or a hand-written subset): the one reader
        of fusion configs. A parameter the file leaves out takes the default ``--fusion METHOD`` takes on the command
        line (:func:`default_settings`), so ``{"method": "adaptive"}`` is exactly ``--fusion adaptive``; ``"weights":
        null`` is plain RRF. interp / adaptive: ``alpha`` [+ ``weight_on_dense``], or ``sparse_weight``, or both
        when they agree; ``normalization`` ``minmax``, ``zscore`` or ``true`` (older files' min-max). Refused, with
        one line naming ``path`` and the key: an unknown method, a parameter of another method, ``alpha`` and
        ``sparse_weight`` that disagree, ``weight_on_dense`` without ``alpha``. Every number goes through the
        ``type=`` function of the flag that sets it (:data:`JSON_CHECKS`). Other keys (``metric``, ``grid``, ...)
        are ignored."""
        method = obj.get("method")
        if method not in FUSION_METHODS:
            raise UsageError(f"{path}: 'method': unknown method {method!r}: use one of {', '.join(FUSION_METHODS)}")
        values = {key: json_number(obj[key], check, path, None, f"'{key}'")
                  for key, check in JSON_CHECKS.items() if obj.get(key) is not None}
        if obj.get("weight_on_dense") is not None and not isinstance(obj["weight_on_dense"], bool):
            raise FormatError(path, None, "'weight_on_dense' as true or false", repr(obj["weight_on_dense"])[:80])
        foreign = [k for k in _OTHER_METHODS_KEYS[method] if obj.get(k) is not None]
        if foreign:
            raise UsageError(f"{path}: '{foreign[0]}' does not apply to method {method!r} (it contradicts the method: "
                             "drop it, or change 'method')")
        default = default_settings(method)
        if method == "rrf":
            weights = obj.get("weights", default.weights) if "weights" in obj else default.weights
            if weights is not None:
                if not isinstance(weights, (list, tuple)) or len(weights) != 2:
                    raise FormatError(path, None, "'weights' as [W_BM25, W_DENSE] (as --rrf-weights takes)",
                                      repr(weights)[:80])
                weights = tuple(json_number(w, non_negative_float, path, None, "'weights' entries") for w in weights)
                if max(weights) <= 0:
                    raise FormatError(path, None, "'weights' not both 0", repr(obj["weights"])[:80])
                weights = None if weights == (1.0, 1.0) else weights
            return cls("rrf", rrf_k=values.get("rrf_k", default.rrf_k), weights=weights)
        norm = obj.get("normalization", default.normalization)
        if norm is False or norm is None:
            raise UsageError(f"{path}: interpolation without normalisation is not supported")
        norm = "minmax" if norm is True else norm
        if norm not in NORMALIZATIONS:
            raise UsageError(f"{path}: 'normalization': unknown score normalisation {norm!r}: use one of "
                             f"{', '.join(NORMALIZATIONS)}")
        if "alpha" in values:
            base = cls("interp", alpha=values["alpha"], weight_on_dense=bool(obj.get("weight_on_dense")),
                       normalization=norm)
            if "sparse_weight" in values and abs(base.sparse_weight - values["sparse_weight"]) > 1e-6:
                raise UsageError(f"{path}: 'sparse_weight' {values['sparse_weight']:g} contradicts 'alpha' "
                                 f"{values['alpha']:g} (BM25 weight {base.sparse_weight:.6g}): give one of them")
        elif obj.get("weight_on_dense") is not None and "sparse_weight" not in values:
            raise UsageError(f"{path}: 'weight_on_dense' needs 'alpha' (the weight it moves): give 'alpha', or "
                             "'sparse_weight' alone")
        elif "sparse_weight" in values:
            base = cls.convex(values["sparse_weight"], normalization=norm)
            if obj.get("weight_on_dense") is not None and obj["weight_on_dense"] != base.weight_on_dense:
                raise UsageError(f"{path}: 'weight_on_dense' contradicts 'sparse_weight' "
                                 f"{values['sparse_weight']:g}: give one of them")
        else:
            base = cls("interp", alpha=default.alpha, weight_on_dense=default.weight_on_dense, normalization=norm)
        if method == "interp":
            return base
        return cls("adaptive", alpha=base.alpha, weight_on_dense=base.weight_on_dense, normalization=norm,
                   adapt=values.get("adapt", default.adapt), shift=values.get("shift", default.shift),
                   agreement_k=values.get("agreement_k", default.agreement_k))


#: the parameters that belong to other methods (a config naming one of them contradicts its own method)
_OTHER_METHODS_KEYS = {
    "interp": ("rrf_k", "weights", "adapt", "shift", "agreement_k"),
    "adaptive": ("rrf_k", "weights"),
    "rrf": ("alpha", "sparse_weight", "weight_on_dense", "normalization", "adapt", "shift", "agreement_k"),
}


#: each number a fusion config may hold and the ``type=`` function of the flag that sets it (``sparse_weight``:
#: tune-fusion's convex weights, ``agreement_k``: a rank count)
JSON_CHECKS = {"alpha": non_negative_float, "sparse_weight": unit_interval, "rrf_k": non_negative_float,
               "adapt": non_negative_float, "shift": finite_float, "agreement_k": positive_int}


#: the fusion ``hopscotch search --bm25 --index`` applies without ``--fusion``: chosen again on 2026-12-03
#: for what ``--reasoning`` now fuses, reasoning-aware BM25 and the trained model's reasoning-aware dense list, by
#: the maximin rule (the setting whose worst per-set delta against that set's better component is largest) over the
#: voting dev sets' tune questions (HotpotQA, MuSiQue, world, world_long, Tongyi question-level chunks and pages;
#: the call-level Tongyi sets vote on nothing): min-max interpolation with BM25 weight 0.3, worst tune delta +0.0055,
#: never below the better list on any set (``scripts/agent_fusion_defaults.py --reasoning``; docs/benchmarks.md).
#: The adaptive default it replaces lost 0.032 to BM25 on the world and 0.019 to dense on MuSiQue there.
#: Not yet re-chosen by today's rule (hopscotch.retriever.evaluation.selection) for the 2026-12-06 halves: on the
#: Tongyi test calls it is above both halves on turn-shaped thinking but below reasoning-aware BM25 alone on the
#: accumulated thinking (docs/benchmarks.md, "The retrained agent model under the rule").
DEFAULT_FUSION = "interp"
DEFAULT_INTERP = FusionSettings.convex(0.3)
DEFAULT_RRF = FusionSettings("rrf", rrf_k=5.0, weights=(0.5, 1.0))
DEFAULT_ADAPTIVE = FusionSettings.adaptive(0.2, adapt=1.0, shift=1.0)


def default_settings(method: str | None = None) -> FusionSettings:
    """The defaults of ``--fusion METHOD``; None: of the default method (``--fusion`` not given)."""
    method = DEFAULT_FUSION if method is None else method
    defaults = {"interp": DEFAULT_INTERP, "rrf": DEFAULT_RRF, "adaptive": DEFAULT_ADAPTIVE}
    if method not in defaults:
        raise UsageError(f"unknown fusion {method!r}: use one of {', '.join(FUSION_METHODS)}")
    return defaults[method]


def parse_rrf_weights(value) -> tuple[float, float] | None:
    """``--rrf-weights W_BM25,W_DENSE`` (a string or a pair) as two floats; None stays None."""
    if value is None:
        return None
    parts = value.split(",") if isinstance(value, str) else list(value)
    try:
        weights = tuple(float(p) for p in parts)
    except (TypeError, ValueError):
        raise UsageError(f"--rrf-weights: expected two numbers 'W_BM25,W_DENSE', got {value!r}") from None
    if len(weights) != 2 or not all(math.isfinite(w) and w >= 0 for w in weights) or max(weights) <= 0:
        raise UsageError(f"--rrf-weights: expected two finite non-negative numbers, not both 0, got {value!r}")
    return weights


def read_fusion_config(path: str | os.PathLike) -> FusionSettings:
    """The fusion a JSON file names (``hopscotch tune-fusion --out``): ``{"method": ..., parameters}``."""
    obj = read_json(path, "a JSON object {method, parameters}")  # bad bytes, invalid or too deep JSON: FormatError
    if not isinstance(obj, dict):
        raise FormatError(path, None, "a JSON object {method, parameters}", type(obj).__name__)
    return FusionSettings.from_json(obj, path)
