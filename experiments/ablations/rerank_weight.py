"""A reranker's first-stage weight (``--rerank-first-weight W``) chosen by the selection rule
(:func:`hopscotch.retriever.evaluation.selection.select_default`), and the reranked pipeline's depth/quality table:
the multi-vector reranker's or a cross-encoder's (the kind of ``--model``'s folder).

The first stage is reasoning-aware BM25's top 100 (``hopscotch search --bm25 IDX --reasoning``, its default
expansion). The reranker's score of each of a query's top ``depth`` candidates comes from one search at W = 0 (``...
--rerank-model M --rerank-depth DEPTH --rerank-first-weight 0``: the pure reorder, whose list holds every reranked
candidate's score; a pair's score does not depend on the other candidates), cached under WORK; every (depth N <=
DEPTH, weight W) run is then derived from the two lists exactly as ``hopscotch search ... --rerank-depth N
--rerank-first-weight W`` ranks them (:func:`derived_run`: the top N by ``W * minmax(first stage) + (1 - W) *
minmax(reranker)``, the first stage's next candidates below; a test checks it against the CLI).

The rule: the objective is the mean tune nDCG@10 over the real agent calls in a harness's shape, every other set
guards against a significant loss to the first stage (the list the reranker replaces). Sets whose calls carry the
same records share their searches (:func:`~hopscotch_experiments.ablations.agent_ablation.shared_runs`).
"""

from __future__ import annotations

from pathlib import Path

from hopscotch_experiments.ablations.ablation_runs import K, build_indexes, evaluate_ndcg, search
from hopscotch_experiments.ablations.agent_ablation import expansion_tag, shared_runs
from hopscotch_experiments.agent_data.eval_sets import GUARDS, OBJECTIVE, TITLES, build_sets
from hopscotch.retriever.evaluation.metrics import compare_runs
from hopscotch.retriever.evaluation.selection import select_default
from hopscotch.retriever.io.runs import ranked, read_run
from hopscotch.retriever.searchers.rerank_stage import sorted_by_score, with_first_stage, with_tail

START, END = "<!-- rerank-weight:start -->", "<!-- rerank-weight:end -->"
#: the docs section of a cross-encoder's selection (the multi-vector one keeps START / END)
CE_START, CE_END = "<!-- rerank-weight-ce:start -->", "<!-- rerank-weight-ce:end -->"
SETS = OBJECTIVE + GUARDS
WEIGHTS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7)
DEPTHS = (10, 20, 50, 100)


def markers(kind: str) -> tuple[str, str]:
    """The docs section's markers of a reranker ``kind``."""
    return (CE_START, CE_END) if kind == "cross_encoder" else (START, END)


def derived_run(first: dict, scores: dict, depth: int, weight: float, k: int = K) -> dict:
    """``{qid: {docid: score}}``: each query's first-stage top ``depth`` reranked (``scores[qid][docid]``: the
    reranker's) and interpolated with the first stage at ``weight``, the next candidates below, cut to ``k``: what
    :class:`~hopscotch.retriever.searchers.rerank.RerankedSearcher` returns."""
    out = {}
    for qid, run in first.items():
        cands = ranked(run)
        head = cands[:depth]
        ids = [d for d, _ in head]
        own = scores.get(qid, {})
        if any(d not in own for d in ids):
            raise ValueError(f"query {qid}: the reranker's scores miss some of its top {depth} (scored deeper?)")
        reranked = with_first_stage(head, sorted_by_score(ids, [own[d] for d in ids]), weight)
        out[qid] = dict(with_tail(reranked, cands[depth:], k))
    return out


def measure(model: str, work: Path, names=SETS, label: str = "ce", depth: int = 20) -> dict:
    """``{"sets", "first": {set: run}, "scores": {set: {qid: {docid: score}}}, "kind", "depth"}``: the first stage's
    runs and the reranker's scores of every set's queries' top ``depth``."""
    from hopscotch.retriever.model.cross_encoder import is_cross_encoder_folder

    kind = "cross_encoder" if is_cross_encoder_folder(model) else "multi_vector"
    sets = build_sets(work, list(names))
    paths = {n: es.write(work / "sets" / n) for n, es in sets.items()}
    prefix, spaths = shared_runs(work, sets, paths)
    first, scores = {}, {}
    tag = expansion_tag()
    for n, es in sets.items():
        idx = build_indexes(work, es.index_name or n, es.corpus, {})
        stage = ("--bm25", idx["bm25"], "--reasoning")
        first_run = read_run(search(work / "runs" / f"{prefix[n]}.bm25r.{tag}.trec", spaths[n], *stage))
        cache = ("--rerank-cache", work / "rerank_cache" / f"{es.index_name or n}.{label}") if kind != \
            "cross_encoder" else ()
        rerank = read_run(search(work / "runs" / f"{prefix[n]}.{label}.rr{depth}.w0.{tag}.trec", spaths[n], *stage,
                                 "--corpus", es.corpus, "--rerank-model", model, "--rerank-depth", depth,
                                 "--rerank-first-weight", 0, *cache))
        keep = set(es.tune) | set(es.test)
        first[n] = {q: r for q, r in first_run.items() if q in keep}
        # the reranked head: the first stage's top `depth` of each query, with the reranker's scores
        scores[n] = {q: {d: rerank[q][d] for d, _ in ranked(first[n][q])[:depth]} for q in first[n]}
    return {"sets": sets, "first": first, "scores": scores, "kind": kind, "depth": depth}


def _per_query(measured: dict, n: str, run: dict, split: str):
    es = measured["sets"][n]
    return evaluate_ndcg(run, es.qrels, getattr(es, split))


def choose(measured: dict, weights=WEIGHTS, depth: int | None = None) -> tuple[object, dict]:
    """The selection over the weights at ``depth`` (None: the measured depth), tune questions."""
    depth = depth or measured["depth"]
    names = list(measured["sets"])
    objective = [n for n in OBJECTIVE if n in names]
    guards = [n for n in GUARDS if n in names]
    first = {n: _per_query(measured, n, measured["first"][n], "tune").per_query for n in objective + guards}
    candidates = {}
    for w in weights:
        candidates[f"W={w:g}"] = {n: _per_query(measured, n, derived_run(measured["first"][n], measured["scores"][n],
                                                                         depth, w), "tune").per_query
                                  for n in objective + guards}
    candidates["first stage alone"] = first
    return select_default(candidates, first, objective, guards), candidates


def test_table(measured: dict, weight: float, depths=DEPTHS, names=None) -> list[str]:
    """The held-out rows: the first stage and the reranked pipeline at each depth (at ``weight``), nDCG@10 with the
    paired test against the first stage, for the sets ``names`` (default: every set)."""
    names = names or list(measured["sets"])
    depths = sorted({d for d in depths if d < measured["depth"]} | {measured["depth"]})
    lines = ["| system | " + " | ".join(f"{TITLES.get(n, n)} ({len(measured['sets'][n].test)})" for n in names)
             + " |", "|---|" + "---|" * len(names)]
    base = {n: _per_query(measured, n, measured["first"][n], "test") for n in names}
    lines.append("| reasoning-aware BM25, top 100 (the first stage) | "
                 + " | ".join(f"{base[n].mean['ndcg@10']:.3f}" for n in names) + " |")
    for d in depths:
        cells = []
        for n in names:
            res = _per_query(measured, n, derived_run(measured["first"][n], measured["scores"][n], d, weight), "test")
            c = compare_runs(base[n], res, "ndcg@10")
            cells.append(f"{c.mean_b:.3f} ({c.delta:+.3f}, p={c.p_randomization:.3f})")
        lines.append(f"| reranked top {d}, W = {weight:g} | " + " | ".join(cells) + " |")
    return lines


def render(measured: dict, selection, command: str) -> str:
    kind = "cross-encoder" if measured["kind"] == "cross_encoder" else "multi-vector"
    weight = float(selection.pick.name.split("=")[1]) if selection.pick.name.startswith("W=") else 1.0
    return "\n".join([
        f"Generated by `{command}`: the {kind} reranker over reasoning-aware BM25's top 100, its first-stage weight "
        f"chosen at depth {measured['depth']} by the selection rule (tune questions):", "",
        *[f"    {line}" for line in selection.lines()], "",
        "Held-out test questions, nDCG@10 (delta and paired randomisation p against the first stage):", "",
        *test_table(measured, weight)])
