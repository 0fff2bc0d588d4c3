"""Tuning the fusion of a BM25 run and a dense run: a hybrid that never loses to its better half.

:func:`tune_fusion` grid-searches normalised interpolation (convex weight ``w`` on BM25,
``w * bm25 + (1 - w) * dense``, z-score and Pyserini's min-max normalisation) and (weighted) RRF on the dev queries,
picks the best by one metric, and evaluates on the held-out queries both components, the best
interpolation, the best RRF and the chosen setting, with a paired test of the chosen setting against the
component that was better on dev. The guard: when no fusion beats the better component on dev (by more
than ``min_gain``), the chosen setting is that component alone, as interpolation with ``w = 1`` (BM25) or
``w = 0`` (dense), which ``hopscotch search --fusion-config`` reproduces.

Splits are of whole queries (:func:`split_qids`); a run is ``{qid: {docid: score}}`` as
:func:`hopscotch.retriever.io.runs.read_run` returns it.

Example::

    dev, test = split_qids(judged_qids(qrels), dev_fraction=0.5, seed=13)
    result = tune_fusion(read_run("bm25.trec"), read_run("dense.trec"), qrels, dev, test,
                         options=TuningOptions(metric="ndcg@10", depth=1000))
    print(format_report(result)); write_json("tuned.json", result.to_json())
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.evaluation.metrics import EvalResult, PairedComparison, compare_runs, evaluate, format_table
from hopscotch.retriever.io.common import iter_lines
from hopscotch.retriever.io.runs import Run, ranked
from hopscotch.retriever.searchers.fusion import NORMALIZATIONS, FusionSettings

COMPONENTS = ("bm25", "dense")
DEFAULT_SPARSE_WEIGHTS = tuple(i / 10 for i in range(11))
DEFAULT_RRF_KS = (10.0, 20.0, 40.0, 60.0, 100.0)
DEFAULT_ADAPTS = (0.5, 1.0, 2.0)       # adaptive fusion: strengths tried (0 is the fixed interpolation)
DEFAULT_SHIFTS = (0.0, 1.0, 2.0)       # adaptive fusion: standout differences at which neither list is favoured

Qrels = dict[str, dict[str, int]]


def read_qid_list(path: str | os.PathLike) -> list[str]:
    """Query ids from a file: the first whitespace-separated field of each line (a qid list, a TREC qrels
    or run file), in first-seen order; a BEIR TSV header (``query-id``) is skipped."""
    seen: dict[str, None] = {}
    for _, line in iter_lines(path):
        qid = line.split()[0]
        if qid not in ("query-id", "query_id", "qid"):
            seen.setdefault(qid, None)
    return list(seen)


def judged_qids(qrels: Qrels, relevance_level: int = 1) -> list[str]:
    """The queries with at least one relevant document (the ones evaluation counts), sorted."""
    return sorted(q for q, docs in qrels.items() if any(g >= relevance_level for g in docs.values()))


def split_qids(qids: Iterable[str], dev_fraction: float, seed: int = 13) -> tuple[list[str], list[str]]:
    """Whole queries, shuffled with ``seed``: ``round(dev_fraction * n)`` to dev (at least one, and at
    least one left for test), the rest to test; both sorted."""
    pool = sorted(set(qids))
    if not 0.0 < dev_fraction < 1.0:
        raise UsageError(f"--dev-fraction must lie strictly between 0 and 1, got {dev_fraction}")
    if len(pool) < 2:
        raise UsageError(f"{len(pool)} judged queries: a dev/test split needs at least 2")
    random.Random(seed).shuffle(pool)
    n_dev = min(max(1, round(dev_fraction * len(pool))), len(pool) - 1)
    return sorted(pool[:n_dev]), sorted(pool[n_dev:])


def fusion_grid(sparse_weights: Sequence[float] = DEFAULT_SPARSE_WEIGHTS, rrf_ks: Sequence[float] = DEFAULT_RRF_KS,
                rrf_weights: Sequence[tuple[float, float]] = ((1.0, 1.0),),
                normalizations: Sequence[str] = NORMALIZATIONS, adapts: Sequence[float] = (),
                shifts: Sequence[float] = DEFAULT_SHIFTS) -> list[FusionSettings]:
    """Interpolation at each normalisation and convex BM25 weight (0 and 1, the components alone, always
    included, once), then RRF at each constant and weight pair (``1:1`` is plain RRF), then adaptive fusion
    (z-score) at each base weight strictly inside (0, 1), each strength in ``adapts`` above 0 and each shift."""
    if not normalizations:
        raise UsageError("the fusion grid needs at least one score normalisation")
    weights = sorted(set(sparse_weights) | {0.0, 1.0})
    grid = [FusionSettings.convex(w, normalizations[0]) for w in weights]
    grid += [FusionSettings.convex(w, n) for n in dict.fromkeys(normalizations[1:]) for w in weights if 0 < w < 1]
    for rrf_k in rrf_ks:
        for pair in rrf_weights:
            pair = tuple(float(x) for x in pair)
            grid.append(FusionSettings("rrf", rrf_k=float(rrf_k), weights=None if pair == (1.0, 1.0) else pair))
    grid += [FusionSettings.adaptive(w, a, shift) for w in weights if 0 < w < 1 for a in dict.fromkeys(adapts)
             if a > 0 for shift in dict.fromkeys(shifts)]
    return grid


def maximin(deltas: Mapping[str, Mapping[str, float]]) -> tuple[str, float]:
    """The maximin rule for a default that never loses: ``deltas`` maps each setting to ``{set: its score
    minus the better component's score on that set}``; the setting whose *worst* set delta is largest wins
    (ties: the larger mean delta, then the first given). Returns ``(setting, its worst delta)``. A mean over
    sets can hide a loss on the one set whose better list the setting distrusts; this cannot."""
    if not deltas:
        raise UsageError("maximin: no setting to choose from")
    sizes = {len(d) for d in deltas.values()}
    if 0 in sizes or len(sizes) != 1:
        raise UsageError("maximin: every setting needs a delta on the same, non-empty sets")

    def key(item):
        values = list(item[1].values())
        return (min(values), sum(values) / len(values))

    best = max(deltas.items(), key=key)  # max keeps the first of equal keys
    return best[0], min(best[1].values())


def component_of(settings: FusionSettings) -> str | None:
    """``bm25`` or ``dense`` when ``settings`` keeps one list alone (interpolation weight 1 or 0, an RRF
    weight 0), else None."""
    if settings.method == "interp" and settings.alpha == 0:
        return "bm25" if settings.weight_on_dense else "dense"
    if settings.method == "rrf" and settings.weights is not None and 0.0 in settings.weights:
        return "bm25" if settings.weights[1] == 0 else "dense"
    return None


def fuse_runs(sparse: Run, dense: Run, settings: FusionSettings, qids: Iterable[str], k: int | None = None,
              depth: int | None = None) -> Run:
    """``settings`` applied query by query (each run ranked by score, ties by docid, cut to ``depth``)."""
    return _fuse(_ranked_lists(sparse, dense, qids, depth), settings, k)


def _ranked_lists(sparse: Run, dense: Run, qids: Iterable[str], depth: int | None) -> dict[str, tuple[list, list]]:
    return {q: (ranked(sparse.get(q, {}))[:depth], ranked(dense.get(q, {}))[:depth]) for q in qids}


def _fuse(lists: dict[str, tuple[list, list]], settings: FusionSettings, k: int | None) -> Run:
    out: Run = {}
    for qid, (s, d) in lists.items():
        fused = settings.apply(s, d, k=k)
        if fused:
            out[qid] = dict(fused)
    return out


def _alone(lists: dict[str, tuple[list, list]], which: int, k: int | None) -> Run:
    return {q: dict(pair[which][:k]) for q, pair in lists.items() if pair[which]}


@dataclass(frozen=True)
class TuningOptions:
    """:param metric: what the dev grid is ranked by (``ndcg@10``, ``recall@100``, ...)
    :param k: fused lists (and the components) are cut to ``k`` before scoring
    :param depth: each run is cut to ``depth`` before fusing (as ``hopscotch search --depth``); None: all
    :param min_gain: a fusion must beat the better component on dev by more than this
    """

    metric: str = "ndcg@10"
    k: int | None = 1000
    depth: int | None = None
    min_gain: float = 0.0


@dataclass
class TuningResult:
    """What :func:`tune_fusion` found: the dev grid, the choice (and whether the guard made it), the
    held-out evaluations (``test``: label -> result, components first) and the paired test."""

    metric: str
    grid: list[tuple[FusionSettings, float]]
    components_dev: dict[str, float]
    better: str
    chosen: FusionSettings
    chosen_dev: float
    guard: str | None
    test: dict[str, EvalResult]
    chosen_label: str
    comparison: PairedComparison
    dev_qids: list[str] = field(default_factory=list)
    test_qids: list[str] = field(default_factory=list)
    min_gain: float = 0.0

    @property
    def note(self) -> str:
        """The choice in one line; each comparison it states is that of the two numbers it prints (as printed)."""
        best = max((s for s in self.grid if component_of(s[0]) is None), key=lambda s: s[1], default=None)
        gain = "" if self.min_gain == 0 else f" (--min-gain {self.min_gain:g})"
        if self.guard is None:
            fused, alone = f"{self.chosen_dev:.4f}", f"{self.components_dev[self.better]:.4f}"
            verb = {1: "beats", 0: "ties with", -1: "is below"}[_order(fused, alone)]
            sign = {1: ">", 0: "=", -1: "<"}[_order(fused, alone)]
            within = "" if verb == "beats" else f", within the margin{gain}"
            return (f"{self.chosen.describe()} {verb} the better component ({self.better}) on dev: {fused} {sign} "
                    f"{alone}{within}; the tuned setting is {self.chosen.describe()}")
        alone = f"{self.components_dev[self.guard]:.4f}"
        if best is None:
            return f"guard: no fusion tried; the tuned setting is {self.guard} alone ({alone} on dev)"
        fused = f"{best[1]:.4f}"
        sign = {1: ">", 0: "=", -1: "<"}[_order(fused, alone)]
        short = (f"does not beat {self.guard} alone on dev" if sign != ">" else
                 f"beats {self.guard} alone on dev by no more than the margin{gain}")
        return (f"guard: the best fusion ({best[0].describe()}) {short}: {fused} {sign} {alone}; the tuned setting is "
                f"{self.guard} alone")

    def to_json(self) -> dict:
        """The chosen settings (:meth:`FusionSettings.to_json`) plus metric, scores, components, guard and test."""
        test = {label: {m: {"mean": r.mean[m], "ci95": r.ci95[m]} for m in r.metrics} for label, r in self.test.items()}
        c = self.comparison
        return {**self.chosen.to_json(), "metric": self.metric, "dev_score": self.chosen_dev,
                "test_score": self.test[self.chosen_label].mean[self.metric], "guard": self.guard, "note": self.note,
                "components": {name: {"dev": self.components_dev[name], "test": self.test[name].mean[self.metric]}
                               for name in COMPONENTS},
                "better_component": self.better,
                "paired_test": {"against": self.better, "metric": c.metric, "delta": c.delta,
                                "p_randomization": c.p_randomization, "p_ttest": c.p_ttest},
                "test": test, "dev_queries": len(self.dev_qids), "test_queries": len(self.test_qids),
                "grid": [{**s.to_json(), "label": s.describe(), "dev": score} for s, score in self.grid]}


def _order(a: str, b: str) -> int:
    """1, 0 or -1 as the number printed ``a`` is above, equal to or below the number printed ``b``."""
    return (float(a) > float(b)) - (float(a) < float(b))


def _score(run: Run, qrels: Qrels, metric: str) -> float:
    return evaluate(run, qrels, [metric]).mean[metric]


def _choose(grid: list[tuple[FusionSettings, float]], components_dev: dict[str, float],
            min_gain: float) -> tuple[FusionSettings, str, str | None]:
    """(chosen settings, better component, guard): the best fusion, or the better component alone."""
    better = "bm25" if components_dev["bm25"] > components_dev["dense"] else "dense"
    fusions = [(s, score) for s, score in grid if component_of(s) is None]
    best = max(fusions, key=lambda s: s[1], default=None)  # first of equals: grid order
    if best is not None and best[1] > components_dev[better] + min_gain:
        return best[0], better, None
    return FusionSettings.convex(1.0 if better == "bm25" else 0.0), better, better


def _held_out_rows(grid, chosen: FusionSettings) -> list[FusionSettings]:
    """The settings evaluated on test: the best interpolation and the best RRF on dev, and the chosen one."""
    rows: list[FusionSettings] = []
    for method in ("interp", "rrf", "adaptive"):
        fusions = [(s, score) for s, score in grid if s.method == method and component_of(s) is None]
        if fusions:
            rows.append(max(fusions, key=lambda s: s[1])[0])
    return rows + ([chosen] if chosen not in rows else [])


def tune_fusion(sparse: Run, dense: Run, qrels: Qrels, dev_qids: Sequence[str], test_qids: Sequence[str],
                grid: Sequence[FusionSettings] | None = None, options: TuningOptions | None = None) -> TuningResult:
    """Pick the fusion of ``sparse`` (BM25) and ``dense`` that scores best by ``options.metric`` on
    ``dev_qids`` (guarded: never below the better component on dev), and evaluate it on ``test_qids``
    (the metric and nDCG@10, with 95% CIs) beside both components, the best interpolation and the best RRF.
    """
    opts = options or TuningOptions()
    metric = opts.metric.strip().lower()
    grid = list(grid) if grid is not None else fusion_grid()
    if not grid:
        raise UsageError("the fusion grid is empty")
    dev_qrels = {q: qrels[q] for q in dev_qids if q in qrels}
    dev = _ranked_lists(sparse, dense, dev_qids, opts.depth)
    components_dev = {name: _score(_alone(dev, i, opts.k), dev_qrels, metric) for i, name in enumerate(COMPONENTS)}
    scored = [(s, _score(_fuse(dev, s, opts.k), dev_qrels, metric)) for s in grid]
    chosen, better, guard = _choose(scored, components_dev, opts.min_gain)
    chosen_dev = next((score for s, score in scored if s == chosen), None)
    if chosen_dev is None:
        chosen_dev = _score(_fuse(dev, chosen, opts.k), dev_qrels, metric)
    report = list(dict.fromkeys([metric, "ndcg@10"]))
    test_qrels = {q: qrels[q] for q in test_qids if q in qrels}
    held_out = _ranked_lists(sparse, dense, test_qids, opts.depth)
    test = {name: evaluate(_alone(held_out, i, opts.k), test_qrels, report) for i, name in enumerate(COMPONENTS)}
    chosen_label = ""
    for settings in _held_out_rows(scored, chosen):
        label = settings.describe() + (" (chosen)" if settings == chosen else "")
        test[label] = evaluate(_fuse(held_out, settings, opts.k), test_qrels, report)
        chosen_label = label if settings == chosen else chosen_label
    comparison = compare_runs(test[better], test[chosen_label], metric)
    return TuningResult(metric, scored, components_dev, better, chosen, chosen_dev, guard, test, chosen_label,
                        comparison, list(dev_qids), list(test_qids), opts.min_gain)


def format_report(result: TuningResult, top: int = 10) -> str:
    """The dev grid (best ``top`` by the metric), the held-out table beside both components, the paired test."""
    m = result.metric
    ordered = sorted(result.grid, key=lambda s: -s[1])[:top]
    lines = [(f"dev: {len(result.dev_qids)} queries, {m}: bm25 {result.components_dev['bm25']:.4f}, "
              f"dense {result.components_dev['dense']:.4f}; best of {len(result.grid)} settings:")]
    lines += [f"  {s.describe():<24} {score:.4f}" for s, score in ordered]
    lines += [result.note, "", f"held-out: {len(result.test_qids)} queries"]
    lines.append(format_table(list(result.test.items()), next(iter(result.test.values())).metrics))
    c = result.comparison
    lines += ["", (f"paired test, {result.chosen_label} - {result.better} ({m}): delta {c.delta:+.4f}  "
                   f"p(randomisation) {c.p_randomization:.4f}  p(t-test) {c.p_ttest:.4f}")]
    return "\n".join(lines)
