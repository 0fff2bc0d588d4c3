"""The agent-retrieval ablation (issue 9): query input variants x models, late fusion, BM25 and the tuned
hybrid, on the dev sets of held-out questions (:mod:`hopscotch_experiments.agent_data.eval_sets`).

Everything runs through the CLI in-process (:mod:`.ablation_runs`), cached under a work folder. Tuned on the
``tune`` questions only: each model's default variant (the reasoning variant with the best mean nDCG@10 over
the voting sets' tune slices), the late-fusion weight ``w`` (one per model, same criterion) and the BM25 +
dense fusion (``hopscotch tune-fusion --dev-qids``, per set and model). Cells: nDCG@10 on test with its 95%
CI, and the paired randomisation p against the same model's query-only row (BM25: against base query-only).
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

from hopscotch_experiments.ablations.ablation_runs import (
    K,
    build_indexes,
    evaluate_ndcg,
    file_safe,
    fused,
    fusion_settings,
    run_cli,
    search,
    settings_tag,
)
from hopscotch_experiments.agent_data.eval_sets import BOUNDS, TITLES, build_sets

from hopscotch.retriever.evaluation.metrics import compare_runs, evaluate
from hopscotch.retriever.io.common import write_json, write_jsonl
from hopscotch.retriever.io.runs import read_run
from hopscotch.retriever.model.config import model_settings
from hopscotch.retriever.searchers.bm25_expansion import DEFAULT_BM25_EXPANSION
from hopscotch.retriever.searchers.fusion import read_fusion_config

TAIL = 128  # half of MiniLM's 256-token query budget: the latest reasoning, with room for the query
VARIANTS = ("query", "prior_queries", "reasoning", "current_reasoning", f"reasoning_tail:{TAIL}", "with_documents",
            f"reasoning_focus:{TAIL}")
HYBRIDS = ("interp", "rrf", "adaptive")   # `--fusion METHOD` rows, each at its defaults, beside `--fusion` alone


def run_ablation(work: Path, names: list[str], models: dict[str, str], full_base: bool = True) -> dict:
    """Every run, the tuned settings, the table's rows and the acceptance checks of the dev sets ``names`` for
    ``models`` (``{"base": "minilm"[, "trained": DIR]}``); with ``full_base`` False and a trained model, the
    base model gets its query-only and ``--reasoning`` default rows only."""
    timings, clock = {}, time.perf_counter()

    def lap(stage: str) -> None:
        nonlocal clock
        timings[stage] = round(time.perf_counter() - clock, 1)
        clock = time.perf_counter()

    sets = build_sets(work, names)
    paths = {n: es.write(work / "sets" / n) for n, es in sets.items()}
    # sets over one corpus (the Tongyi calls under three label levels) share their searches: one run of the union
    # of their queries per index, scored per set (each call's list does not depend on its labels)
    rn, spaths = shared_runs(work, sets, paths)
    lap("sets_s")
    idx = {n: build_indexes(work, es.index_name or n, es.corpus, models) for n, es in sets.items()}
    lap("index_s")
    runs, test, tune = {}, {}, {}
    short = {m for m in models if m == "base" and not full_base and len(models) > 1}  # query + defaults only

    def variants_of(m: str) -> tuple[str, ...]:
        return ("query",) if m in short else VARIANTS

    bm25_tag = expansion_tag()
    for n, es in sets.items():
        runs[n, "bm25"] = search(work / "runs" / f"{rn[n]}.bm25.trec", spaths[n], "--bm25", idx[n]["bm25"])
        # reasoning-aware BM25 at its defaults (`hopscotch search --bm25 --reasoning`)
        runs[n, "bm25-reasoning"] = search(work / "runs" / f"{rn[n]}.bm25r.{bm25_tag}.trec", spaths[n], "--bm25",
                                           idx[n]["bm25"], "--reasoning")
        for m, model in models.items():
            for v in variants_of(m):
                runs[n, m, v] = search(work / "runs" / f"{rn[n]}.{m}.{file_safe(v)}.trec", spaths[n], "--index",
                                       idx[n][m], "--model", model, "--query-input", v)
            # what `hopscotch search --reasoning` does with the model's recorded defaults (variant, late
            # fusion, word gate); and the two hybrid defaults over it
            runs[n, m, "default"] = search(work / "runs" / f"{rn[n]}.{m}.default.{defaults_tag(model)}.trec", spaths[n],
                                           "--index", idx[n][m], "--model", model, "--reasoning")
            # the same, scoring each document by its first window only (an index without windows: identical)
            if m not in short:
                runs[n, m, "first-window"] = search(
                    work / "runs" / f"{rn[n]}.{m}.default.{defaults_tag(model)}.first-window.trec",
                    spaths[n], "--index", idx[n][m], "--model", model, "--reasoning",
                                                    "--first-windows-only")
            # the hybrids over it: fused in-process from the two cached runs (`hopscotch search --bm25 --index
            # --fusion ... --reasoning` fuses the same two depth-K lists: tests/retriever/searchers/test_searchers.py):
            # reasoning-aware BM25 and the dense `--reasoning` run when the model reads reasoning (a plain model's
            # dense half searches with the query alone); `hybrid-query`: the same fusion of plain BM25 and the
            # query-only dense run (the hybrid without --reasoning); `hybrid-plain-bm25`: the hybrid before BM25
            # read the reasoning
            reads = model_reads_reasoning(model)
            dense_half = runs[n, m, "default" if reads else "query"]
            tag = f"{bm25_tag}.{defaults_tag(model)}"
            for method in (*HYBRIDS, None):
                label = method or "default"
                runs[n, m, f"hybrid-{label}"] = fused(
                    work / "runs" / f"{n}.{m}.hybrid-{label}.{settings_tag(method)}.{tag}.trec",
                    runs[n, "bm25-reasoning"], dense_half, fusion_settings(method), es.tune + es.test)
            runs[n, m, "hybrid-query"] = fused(work / "runs" / f"{n}.{m}.hybrid-query.{settings_tag(None)}.trec",
                                               runs[n, "bm25"], runs[n, m, "query"], fusion_settings(None),
                                               es.tune + es.test)
            runs[n, m, "hybrid-plain-bm25"] = fused(
                work / "runs" / f"{n}.{m}.hybrid-plain-bm25.{settings_tag(None)}.{defaults_tag(model)}.trec",
                runs[n, "bm25"], dense_half, fusion_settings(None), es.tune + es.test)
        for key in [k for k in runs if k[0] == n]:
            run = read_run(runs[key])
            test[key], tune[key] = evaluate_ndcg(run, es.qrels, es.test), evaluate_ndcg(run, es.qrels, es.tune)
    lap("search_s")
    # the defaults are chosen elsewhere, by maximin over the voting sets (scripts/agent_reasoning_defaults.py records
    # them in the model; scripts/bm25_expansion_grid.py and scripts/agent_fusion_defaults.py set the CLI's): the
    # table reports them, it does not choose
    tuned = {}
    voters = [n for n, es in sets.items() if es.votes] or list(sets)

    for m, model in models.items():
        s = model_settings(model)
        tuned[m] = {"variant": "default" if m in short else str(s.query_input), "w": s.late_fusion,
                    "gate": s.late_fusion_max_words, "w_long": s.late_fusion_long, "voters": voters, "reads_reasoning": model_reads_reasoning(model),
                    "tune_ndcg@10_by_variant": {v: [round(tune[n, m, v].mean["ndcg@10"], 4) for n in sets]
                                                for v in variants_of(m)}}
    lap("late_fusion_s")
    fusion = {}
    for n, es in sets.items():
        for m, model in models.items():
            dense_half = runs[n, m, "default" if model_reads_reasoning(model) else "query"]
            config = work / "fusion" / f"{n}.{m}.{bm25_tag}.{defaults_tag(model)}.json"
            if not config.exists():
                config.parent.mkdir(parents=True, exist_ok=True)
                run_cli("tune-fusion", "--sparse", runs[n, "bm25-reasoning"], "--dense", dense_half,
                        "--qrels", paths[n]["qrels"], "--dev-qids", paths[n]["tune"], "--k", K, "--depth", K,
                        "--out", config)
            fusion[n, m] = json.loads(config.read_text())
            key = (n, m, "hybrid")

            runs[key] = fused(work / "runs" / f"{n}.{m}.hybrid-tuned.{bm25_tag}.{defaults_tag(model)}.trec",
                              runs[n, "bm25-reasoning"], dense_half, read_fusion_config(config), es.tune + es.test)
            test[key] = evaluate_ndcg(read_run(runs[key]), es.qrels, es.test)
    lap("hybrid_s")

    def row(label: str, model: str, key_of, against_of) -> dict:
        cells = {}
        for n in sets:
            r, a = test[key_of(n)], test[against_of(n)] if against_of else None
            p = None if a is None or key_of(n) == against_of(n) else \
                compare_runs(a, r, "ndcg@10").p_randomization
            cells[n] = {"mean": r.mean["ndcg@10"], "ci95": r.ci95["ndcg@10"], "p": p}
        return {"label": label, "model": model, "cells": cells}

    rows = []
    for m, model in models.items():
        t = tuned[m]
        for v in variants_of(m):
            label = f"{m}: {v}" + (" (default)" if v == t["variant"] else "")
            rows.append(row(label, m, lambda n, v=v, m=m: (n, m, v), lambda n, m=m: (n, m, "query")))
        rows.append(row(f"{m}: `search --reasoning` defaults ({_recorded(model)})", m,
                        lambda n, m=m: (n, m, "default"), lambda n, m=m: (n, m, "query")))
        if m not in short:
            rows.append(row(f"{m}: the same defaults, first window only (`--first-windows-only`)", m,
                            lambda n, m=m: (n, m, "first-window"), lambda n, m=m: (n, m, "query")))
    rows.append(row("BM25", "-", lambda n: (n, "bm25"), lambda n: (n, "base", "query")))
    rows.append(row(f"BM25 `--reasoning` ({_expansion_label()})", "-", lambda n: (n, "bm25-reasoning"),
                    lambda n: (n, "bm25")))
    for m, model in models.items():
        dense = f"{m} `--reasoning` defaults" if model_reads_reasoning(model) else f"{m} query (a plain model)"
        rows.append(row(f"hybrid, no `--reasoning`: BM25 + {m} query, `--fusion` not given", m,
                        lambda n, m=m: (n, m, "hybrid-query"), lambda n, m=m: (n, m, "query")))
        rows.append(row(f"hybrid, before BM25 read the reasoning: BM25 + {dense}, `--fusion` not given", m,
                        lambda n, m=m: (n, m, "hybrid-plain-bm25"), lambda n, m=m: (n, m, "hybrid-query")))
        rows.append(row(f"hybrid `--reasoning`: BM25 `--reasoning` + {dense}, `--fusion` not given "
                        f"({_default_label()}; p against the hybrid without --reasoning)", m,
                        lambda n, m=m: (n, m, "hybrid-default"), lambda n, m=m: (n, m, "hybrid-query")))
        for method in HYBRIDS:
            rows.append(row(f"hybrid `--reasoning`: BM25 `--reasoning` + {dense}, `--fusion {method}` defaults", m,
                            lambda n, m=m, method=method: (n, m, f"hybrid-{method}"),
                            lambda n, m=m: (n, m, "hybrid-query")))
        rows.append(row(f"hybrid `--reasoning`: BM25 `--reasoning` + {dense} (fusion tuned per set)", m,
                        lambda n, m=m: (n, m, "hybrid"), lambda n, m=m: (n, m, "hybrid-query")))
    checks = {n: acceptance(n, test, tuned, models) for n in sets}
    for n, c in checks.items():
        print(f"acceptance {n}: " + "; ".join(c))
    bias = label_bias(sets, runs, models)
    recall = first_stage_recall(sets, runs, models)
    lap("report_s")

    return {"sets": {n: {"title": TITLES[n], "note": es.note, "labels": es.labels, "votes": es.votes,
                         "bounds": BOUNDS.get(n, ""), **es.counts} for n, es in sets.items()},
            "rows": rows, "tuned": tuned, "checks": checks, "timings": timings, "bias": bias,
            "first_stage_recall": recall,
            "fusion": {f"{n}/{m}": {k: v for k, v in f.items() if k not in ("grid", "test")}
                       for (n, m), f in fusion.items()},
            "runs": {"/".join(map(str, k)): str(v) for k, v in runs.items()}}


#: the label sets of the same Tongyi calls, call level first: (set, what its labels are)
BIAS_LEVELS = (("tongyi", "pseudo-qrels: what the call's retriever returned"),
               ("tongyi_utility", "call-level: returned by this call AND used later"),
               ("tongyi_question", "question-level: used anywhere in the question's runs"))


def label_bias(sets: dict, runs: dict, models: dict) -> dict:
    """The call-level bias in numbers: the same test calls (those of ``tongyi_utility``, which have a used
    document) scored by each systems's run under each label level of :data:`BIAS_LEVELS`. ``{}`` unless the
    three sets ran (they share the corpus, the index and the call ids, so one run serves all three)."""
    names = [n for n, _ in BIAS_LEVELS]
    if not all(n in sets for n in names):
        return {}
    calls = sets["tongyi_utility"].test
    m = "trained" if "trained" in models else "base"
    systems = {"BM25": ("tongyi_question", "bm25"), "BM25 --reasoning": ("tongyi_question", "bm25-reasoning"),
               f"{m} dense, query": ("tongyi_question", m, "query"),
               f"{m} dense, --reasoning defaults": ("tongyi_question", m, "default"),
               f"hybrid without --reasoning ({m})": ("tongyi_question", m, "hybrid-query"),
               f"hybrid --reasoning ({m})": ("tongyi_question", m, "hybrid-default")}
    out = {"calls": len(calls), "levels": dict(BIAS_LEVELS), "rows": {}}
    for label, key in systems.items():
        run = read_run(runs[key])
        out["rows"][label] = {n: round(evaluate_ndcg(run, sets[n].qrels, calls).mean["ndcg@10"], 4) for n in names}
    return out


def shared_runs(work: Path, sets: dict, paths: dict) -> tuple[dict[str, str], dict[str, dict]]:
    """``({set: run-file prefix}, {set: {"queries": file}})``: sets over one index search the union of their queries
    once (written to ``work/sets/<prefix>/queries.jsonl``); the prefix names the index and the query ids, so a cached
    run always holds every query it is scored on. ``work/runs/names.json`` records the prefixes (other experiments
    read it)."""
    groups: dict[tuple[str, int], list[str]] = {}
    for n, es in sets.items():   # one group: sets over one index whose shared calls carry the same records
        index = es.index_name or n
        rows = {r["_id"]: r for r in es.queries}
        for (g, i), members in groups.items():
            if g == index and all(rows.get(r["_id"], r) == r for m in members for r in sets[m].queries):
                members.append(n)
                break
        else:
            groups[index, sum(1 for g, _ in groups if g == index)] = [n]
    prefix, spaths = {}, {}
    for (g, _), members in groups.items():
        if len(members) == 1 and members[0] == g:
            prefix[g], spaths[g] = g, paths[g]
            continue
        rows = list({r["_id"]: r for n in members for r in sets[n].queries}.values())
        tag = hashlib.sha256("\n".join(sorted(json.dumps(r, sort_keys=True) for r in rows)).encode()).hexdigest()[:8]
        folder = work / "sets" / f"{g}.{tag}"
        if not (folder / "queries.jsonl").is_file():
            folder.mkdir(parents=True, exist_ok=True)
            write_jsonl(folder / "queries.jsonl", rows)
        for n in members:
            prefix[n], spaths[n] = f"{g}.{tag}", {"queries": folder / "queries.jsonl"}
    (work / "runs").mkdir(parents=True, exist_ok=True)
    names = work / "runs" / "names.json"
    known = json.loads(names.read_text()) if names.is_file() else {}
    write_json(names, {**known, **prefix})
    return prefix, spaths


def first_stage_recall(sets: dict, runs: dict, models: dict) -> dict:
    """Recall@100 on test of the first stages a reranker can take (what the reranker can reach): ``{system: {set:
    recall}}`` for BM25, BM25 --reasoning, the dense --reasoning defaults and the default hybrid over both."""
    m = "trained" if "trained" in models else "base"
    systems = {"BM25": ("bm25",), "BM25 --reasoning": ("bm25-reasoning",), f"{m} dense --reasoning": (m, "default"),
               f"hybrid --reasoning ({m})": (m, "hybrid-default")}
    out = {}
    for label, key in systems.items():
        for n, es in sets.items():
            run = read_run(runs[(n, *key)])
            result = evaluate({q: run.get(q, {}) for q in es.test}, {q: es.qrels[q] for q in es.test}, ["recall@100"])
            out.setdefault(label, {})[n] = round(result.mean["recall@100"], 4)
    return out


def _default_label() -> str:
    return fusion_settings(None).describe()


def _expansion_label() -> str:
    return DEFAULT_BM25_EXPANSION.describe()


def expansion_tag() -> str:
    """A file-name tag of reasoning-aware BM25's defaults (a cached run is redone when they move)."""
    return _tag(_expansion_label())


def defaults_tag(model: str) -> str:
    """A file-name tag of the model's recorded `search --reasoning` defaults (redone when they move)."""
    s = model_settings(model)
    return _tag(f"{s.trained} {s.query_input} {s.late_fusion} {s.late_fusion_max_words} {s.late_fusion_long}")


def _tag(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def model_reads_reasoning(model: str) -> bool:
    """Whether `search --reasoning` on a hybrid gives the model's dense half the reasoning (a trained
    reasoning-aware model; a plain one searches with the query alone: :class:`HybridSearcher`)."""
    s = model_settings(model)
    return bool(s.trained and s.reasoning_aware)


def _recorded(model: str) -> str:
    """The model's recorded `search --reasoning` defaults, in words."""
    s = model_settings(model)
    if not s.trained:
        return "an untrained model: `reasoning`"
    out = f"`{s.query_input}`"
    if s.late_fusion is not None:
        out += f", late fusion w={s.late_fusion:g}"
    if s.late_fusion_max_words is not None:
        out += (f", w={s.late_fusion_long:g} over {s.late_fusion_max_words} words" if s.late_fusion_long
                else f", query alone over {s.late_fusion_max_words} words")
    if s.passage_windows and s.passage_windows > 1:
        out += f", pages as up to {s.passage_windows} windows"
    return out


def _verdict(a, b, metric: str = "ndcg@10") -> str:
    """``>=`` holds when the mean is not lower (equal means tie); the paired test says whether it is significant."""
    c = compare_runs(a, b, metric)
    holds = "YES" if c.delta >= 0 else "no"
    sig = "significant" if c.p_randomization < 0.05 else "not significant"
    return (f"{holds} ({c.mean_b:.3f} vs {c.mean_a:.3f}, delta {c.delta:+.3f}, p={c.p_randomization:.3f}, "
            f"{sig})")


def acceptance(n: str, test: dict, tuned: dict, models: dict) -> list[str]:
    """The checks on one dev set (issues 9, 22, 33): `--reasoning` >= query-only for BM25, the (trained) dense
    defaults and the default hybrid; the dense default beats base; each hybrid beats the better (on test) of its
    two components (reasoning-aware BM25 and the dense half it fuses)."""
    m = "trained" if "trained" in models else "base"
    out = [f"BM25 --reasoning >= BM25: {_verdict(test[n, 'bm25'], test[n, 'bm25-reasoning'])}",
           f"{m} defaults >= {m} query-only: {_verdict(test[n, m, 'query'], test[n, m, 'default'])}",
           f"default hybrid --reasoning >= the same hybrid without it: "
           f"{_verdict(test[n, m, 'hybrid-query'], test[n, m, 'hybrid-default'])}",
           (f"{m} defaults >= the same, first window only: "
            f"{_verdict(test[n, m, 'first-window'], test[n, m, 'default'])}")]
    if m == "trained":
        out.append(f"trained defaults >= base `{tuned['base']['variant']}`: "
                   f"{_verdict(test[n, 'base', tuned['base']['variant']], test[n, m, 'default'])}"
                   if tuned["base"]["variant"] != "default" else
                   f"trained defaults >= base defaults: {_verdict(test[n, 'base', 'default'], test[n, m, 'default'])}")
        out.append(f"trained defaults >= base query-only: {_verdict(test[n, 'base', 'query'], test[n, m, 'default'])}")
    dense_key = "default" if tuned.get(m, {}).get("reads_reasoning", True) else "query"
    dense, bm25 = test[n, m, dense_key], test[n, "bm25-reasoning"]
    better, label = (bm25, "BM25 --reasoning") if bm25.mean["ndcg@10"] >= dense.mean["ndcg@10"] else \
        (dense, f"{m} dense")
    for key, what in (("hybrid-default", "--fusion not given"), ("hybrid", "tuned"),
                      *((f"hybrid-{h}", f"--fusion {h} defaults") for h in HYBRIDS)):
        out.append(f"hybrid ({m}, {what}) >= the better of BM25 and dense ({label}): {_verdict(better, test[n, m, key])}")
    return out
