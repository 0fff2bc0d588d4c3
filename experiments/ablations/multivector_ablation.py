"""Late interaction on the agent dev sets (issue 23): multi-vector rows beside BM25 and the single-vector model.

Reuses the agent ablation's cache folder (:mod:`.agent_ablation`: its dev sets, BM25 indexes and single-vector
runs, built when missing). Rows, each through the CLI in-process (``hopscotch index`` / ``search``):

* the multi-vector model (``mv``): its full index (PLAID-style) searched query-only and with ``--reasoning``;
  reranking BM25's top 100 (``--rerank-model``) query-only, with ``--reasoning`` and with late fusion of the
  two (``--rerank-query-mix w``, w tuned on the tune questions); reranking the single-vector default
  hybrid's top 100; and its full index fused with BM25 (``--fusion`` not given);
* the untrained multi-vector MiniLM (``mv_base``, random 384->128 projection) reranking BM25's top 100;
* the sentence-transformers peer (``peer``, :mod:`.st_peer`) reranking BM25's top 100.

Runs cover the test questions (late fusion also the tune ones). Rerank caches are seeded from each model's
full index (``MultiVectorReranker.seed_cache``: the same vectors), so no document is encoded twice. Cells:
nDCG@10 on test with its 95% CI and the paired randomisation p against the single-vector model's
``--reasoning`` defaults. Index and search wall times are recorded.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from hopscotch_experiments.ablations.ablation_report import cell
from hopscotch_experiments.ablations.ablation_runs import (
    K,
    build_indexes,
    evaluate_ndcg,
    fused,
    fusion_settings,
    run_cli,
    search,
    settings_tag,
)
from hopscotch_experiments.agent_data.eval_sets import TITLES, build_sets

from hopscotch.retriever.evaluation.metrics import compare_runs
from hopscotch.retriever.io.common import write_jsonl
from hopscotch.retriever.io.runs import read_run
from hopscotch.retriever.searchers.rerank import MultiVectorReranker

START, END = "<!-- mv-ablation:start -->", "<!-- mv-ablation:end -->"
WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0)


def timed(times: dict[str, float], key: str, fn, *args):
    """``fn(*args)``, its wall time added to ``times[key]``."""
    t0 = time.perf_counter()
    out = fn(*args)
    times[key] = times.get(key, 0.0) + time.perf_counter() - t0
    return out


def base_model(work: Path) -> str:
    """The untrained multi-vector MiniLM (seeded projection), saved once under ``work/models``."""
    from hopscotch.retriever.model.multi_vector import build_multi_vector_model

    folder = work / "models" / "mv_base"
    if not (folder / "hopscotch_config.json").is_file():
        build_multi_vector_model("minilm", dim=128, query_max_len=256, passage_max_len=160, seed=0,
                                 device="cpu").save(folder)
    return str(folder)


def mv_index(work: Path, name: str, corpus: Path, model: str) -> Path:
    """The multi-vector index of ``corpus`` (``hopscotch index`` resumes it, and refuses another model's folder;
    never overwritten: a rerun after a kill keeps its shards)."""
    out = work / "idx" / f"{name}.mv"
    run_cli("index", "--corpus", corpus, "--model", model, "--out", out, "--batch-size", 32, "--shard-size", 5000)
    return out


def seeded_cache(work: Path, name: str, label: str, model: str, index: Path) -> Path:
    """A rerank cache for ``model`` filled from its full index (once)."""
    cache = work / "rerank_cache" / f"{name}.{label}"
    marker = cache / ".seeded"
    if not marker.exists() or marker.read_text() != str(index):
        MultiVectorReranker(model, cache_dir=cache).seed_cache(index)
        marker.write_text(str(index))
    return cache


def split_queries(es, paths: dict, split: str) -> dict:
    """``paths`` with ``queries`` cut to one split's qids (``test`` or ``tune``)."""
    keep = set(getattr(es, split))
    file = Path(paths["queries"]).with_name(f"queries_{split}.jsonl")
    if not file.exists():
        write_jsonl(file, [q for q in es.queries if q["_id"] in keep])
    return {**paths, "queries": file}


def run_set(work: Path, n: str, es, paths: dict, models: dict, trained: str, times: dict[str, float]) -> dict:
    """Every run of one dev set: ``{row key: run path}`` (test questions; late fusion also on tune); the index,
    rerank and full-index search wall times are added to ``times``."""
    runs = work / "runs"
    corpus_name = es.index_name or n
    test, tune = split_queries(es, paths, "test"), split_queries(es, paths, "tune")
    idx = build_indexes(work, corpus_name, es.corpus, {"trained": trained})
    out = {"bm25": search(runs / f"{n}.bm25.trec", paths, "--bm25", idx["bm25"])}
    out["sv"] = search(runs / f"{n}.trained.default.trec", paths, "--index", idx["trained"], "--model", trained,
                       "--reasoning")
    out["sv-hybrid"] = fused(runs / f"{n}.trained.default.hybrid-default.{settings_tag(None)}.trec", out["bm25"],
                             out["sv"], fusion_settings(None), es.tune + es.test)
    first_bm25 = ("--bm25", idx["bm25"], "--corpus", es.corpus)
    first_hybrid = ("--bm25", idx["bm25"], "--index", idx["trained"], "--model", trained, "--reasoning")
    for label, model in models.items():
        index = None
        if label == "mv":  # the others rerank only: their caches fill with BM25's candidates
            index = timed(times, f"index {label}", mv_index, work, corpus_name, es.corpus, model)
        cache = seeded_cache(work, corpus_name, label, model, index) if index else work / "rerank_cache" / \
            f"{corpus_name}.{label}"
        rr = ("--rerank-model", model, "--rerank-depth", K, "--rerank-cache", cache)
        out[f"{label}-bm25rr-query"] = timed(times, f"rerank {label}", search,
                                            runs / f"{n}.{label}.bm25rr.query.test.trec", test, *first_bm25, *rr)
        if label != "mv":
            continue
        for key, flags in (("mv-full-query", ()), ("mv-full-reasoning", ("--reasoning",))):
            out[key] = timed(times, "search mv full index", search, runs / f"{n}.{key}.test.trec", test, "--index",
                             index, *flags)
        out["mv-bm25rr-reasoning"] = search(runs / f"{n}.mv.bm25rr.reasoning.test.trec", test, *first_bm25, *rr,
                                            "--reasoning")
        for w in WEIGHTS[1:-1]:
            for split, where in (("tune", tune), ("test", test)):
                out[f"mv-bm25rr-late{w:g}" + ("-tune" if split == "tune" else "")] = search(
                    runs / f"{n}.mv.bm25rr.late{w:g}.{split}.trec", where, *first_bm25, *rr, "--reasoning",
                    "--rerank-query-mix", w)
        out["mv-bm25rr-query-tune"] = search(runs / f"{n}.mv.bm25rr.query.tune.trec", tune, *first_bm25, *rr)
        out["mv-bm25rr-reasoning-tune"] = search(runs / f"{n}.mv.bm25rr.reasoning.tune.trec", tune, *first_bm25,
                                                 *rr, "--reasoning")
        out["mv-hybridrr-reasoning"] = search(runs / f"{n}.mv.hybridrr.reasoning.test.trec", test, *first_hybrid, *rr)
        out["mv-hybrid"] = fused(runs / f"{n}.mv.full.reasoning.hybrid-default.{settings_tag(None)}.test.trec",
                                 out["bm25"], out["mv-full-reasoning"], fusion_settings(None), es.test)
    return out


ROWS = [("BM25", "bm25"), ("single-vector trained: `search --reasoning` defaults", "sv"),
        ("single-vector trained + BM25, `--fusion` not given", "sv-hybrid"),
        ("multi-vector untrained (random projection): rerank BM25 top 100, query", "mv_base-bm25rr-query"),
        ("ST peer (MultiVectorEncoder, their trainer + MNRL): rerank BM25 top 100, query", "peer-bm25rr-query"),
        ("multi-vector trained: full index, query", "mv-full-query"),
        ("multi-vector trained: full index, `--reasoning`", "mv-full-reasoning"),
        ("multi-vector trained: rerank BM25 top 100, query", "mv-bm25rr-query"),
        ("multi-vector trained: rerank BM25 top 100, `--reasoning`", "mv-bm25rr-reasoning"),
        *((f"multi-vector trained: rerank BM25 top 100, `--reasoning --rerank-query-mix {w:g}`",
           f"mv-bm25rr-late{w:g}") for w in WEIGHTS[1:-1]),
        ("multi-vector trained: rerank the single-vector hybrid's top 100, `--reasoning`", "mv-hybridrr-reasoning"),
        ("multi-vector trained full index `--reasoning` + BM25, `--fusion` not given", "mv-hybrid")]


def run_ablation(work: Path, names: list[str], models: dict[str, str], trained: str) -> dict:
    """The rows of :data:`ROWS` on the dev sets ``names`` for ``models`` (``{"mv": DIR[, "mv_base": DIR][,
    "peer": DIR]}``) beside the single-vector model ``trained``: ``{"section": markdown, "table": {row key:
    {set: cell}}, "by_w": {w: tune mean}, "best_w": w, "times": {step: seconds}}``."""
    times: dict[str, float] = {}
    sets = build_sets(work, names)
    test, tune = {}, {}
    for n, es in sets.items():
        paths = es.write(work / "sets" / n)
        for key, path in run_set(work, n, es, paths, models, trained, times).items():
            run = read_run(path)
            test[n, key], tune[n, key] = evaluate_ndcg(run, es.qrels, es.test), evaluate_ndcg(run, es.qrels, es.tune)
    voters = [n for n, es in sets.items() if es.votes]
    by_w = {w: sum(tune[n, k].mean["ndcg@10"] for n in voters) / len(voters)
            for w, k in [(0.0, "mv-bm25rr-query-tune"), (1.0, "mv-bm25rr-reasoning-tune"),
                         *((w, f"mv-bm25rr-late{w:g}-tune") for w in WEIGHTS[1:-1])]}
    best_w = max(by_w, key=by_w.get)
    lines = ["| system | " + " | ".join(f"{TITLES[n]} ({len(es.test)})" for n, es in sets.items()) + " |",
             "|---" * (len(sets) + 1) + "|"]
    table = {}
    for label, key in ROWS:
        if not all((n, key) in test for n in sets):
            continue
        cells = []
        for n in sets:
            r, ref = test[n, key], test[n, "sv"]
            p = None if key == "sv" else compare_runs(ref, r, "ndcg@10").p_randomization
            c = {"mean": r.mean["ndcg@10"], "ci95": r.ci95["ndcg@10"], "p": p}
            table.setdefault(key, {})[n] = c
            cells.append(cell(c))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    checks = []
    for n in sets:
        best = max(("bm25", "mv-full-reasoning"), key=lambda k: test[n, k].mean["ndcg@10"])
        line = [f"{TITLES[n]}:"]
        for what, a, b in (("mv --reasoning vs mv query-only", "mv-full-query", "mv-full-reasoning"),
                           ("mv --reasoning vs single-vector defaults", "sv", "mv-full-reasoning"),
                           ("mv rerank query vs ST peer rerank query", "peer-bm25rr-query", "mv-bm25rr-query"),
                           ("mv rerank --reasoning vs BM25", "bm25", "mv-bm25rr-reasoning"),
                           (f"mv hybrid vs the better component ({best})", best, "mv-hybrid")):
            if (n, a) in test and (n, b) in test:
                c = compare_runs(test[n, a], test[n, b], "ndcg@10")
                line.append(f"{what}: {c.delta:+.3f} (p={c.p_randomization:.3f})")
        checks.append("* " + " ".join(line[:1]) + " " + "; ".join(line[1:]))
    section = "\n".join([
        "### Late interaction on the agent dev sets (issue 23)", "",
        "Generated by `python scripts/agent_multivector_ablation.py --trained DIR --mv DIR --peer DIR`. nDCG@10 on "
        "test questions with its 95% CI; `p`: paired randomisation test against the single-vector trained model's "
        "`--reasoning` defaults. Tuned on tune questions only (voting sets: " + ", ".join(voters) + "): late-fusion "
        f"w by mean nDCG@10 = {json.dumps({f'{k:g}': round(v, 4) for k, v in by_w.items()})}, best w = {best_w:g}.",
        "", *lines, "", "Paired differences on test:", *checks, "",
        "Wall times on 2 CPU cores (seconds, summed over the sets; cached steps count 0): "
        + json.dumps({k: round(v, 1) for k, v in times.items()}), ""])
    return {"section": section, "table": table, "by_w": by_w, "best_w": best_w, "times": times}
