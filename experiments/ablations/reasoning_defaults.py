"""Choosing the dense model's reasoning defaults by the selection rule (real agent calls decide, every other set
guards: :func:`hopscotch.retriever.evaluation.selection.select_default`).

The knobs, chosen jointly: the query input variant ``V``, the late-fusion weight ``w`` of contexts up to ``G`` words,
the word gate ``G`` and the weight ``w_long`` of contexts over it (``hopscotch search --query-input V --query-mix w
--query-mix-max-words G --query-mix-long w_long``; no gate: every context at ``w``). A query's search vector is
``W * q_V + (1 - W) * q_query`` with ``W`` its context's weight (:meth:`DenseSearcher.query_embeddings`), so each
query's list depends only on ``(V, W)``: every set's queries are searched once per variant and weight (top 10,
what nDCG@10 reads), and a setting's per-query scores are picked from those by each context's length.

The rule: :mod:`hopscotch.retriever.evaluation.selection`: the objective is the mean tune nDCG@10 over the real agent
sets in the harness's shape (:data:`~hopscotch_experiments.agent_data.eval_sets.OBJECTIVE`); every other voting set
guards against a significant loss (p < 0.05 and delta < -0.01) against the query alone, the baseline a user gets
without ``--reasoning``. Call-level sets never vote. Test questions only report.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from hopscotch_experiments.ablations.ablation_runs import build_indexes, evaluate_ndcg
from hopscotch_experiments.agent_data.eval_sets import GUARDS, OBJECTIVE, build_sets

from hopscotch.retriever.evaluation.metrics import compare_runs
from hopscotch.retriever.evaluation.selection import select_default
from hopscotch.retriever.io.queries import read_queries
from hopscotch.retriever.searchers import build_searcher

VARIANTS = ("reasoning_tail:64", "reasoning_tail:128", "current_reasoning", "reasoning_focus:128", "reasoning")
WEIGHTS = tuple(i / 10 for i in range(11))
GATES = (None, 100, 200, 500, 1000, 2000)


def _label(variant: str, w: float, gate, w_long: float) -> str:
    if w == 0 and (gate is None or w_long == 0):
        return "query"
    return f"{variant} w={w:g}" + ("" if gate is None else f" over {gate} words w={w_long:g}")


class SetRuns:
    """One set's top-10 lists per (variant, weight), its queries' context lengths, and nDCG@10 per query."""

    def __init__(self, es, queries, words):
        self.es, self.queries, self.words = es, queries, words
        self.runs: dict[tuple[str, float], dict] = {}
        self.ndcg: dict[tuple[str, float], dict[str, float]] = {}

    def add(self, variant: str, w: float, run: dict) -> None:
        qids = self.es.tune + self.es.test
        self.runs[variant, w] = run
        per = evaluate_ndcg(run, self.es.qrels, qids).per_query
        self.ndcg[variant, w] = {q: per[q]["ndcg@10"] for q in qids}

    def _key(self, qid: str, variant: str, w: float, gate, w_long: float) -> tuple[str, float]:
        """Which (variant, weight) list a setting gives the query ``qid``: its context's weight."""
        return variant, (w if gate is None or self.words[qid] <= gate else w_long)

    def scores(self, variant: str, w: float, gate, w_long: float) -> dict[str, float]:
        """A setting's nDCG@10 per query (what the grid compares; no run is built)."""
        return {q: self.ndcg[self._key(q, variant, w, gate, w_long)][q] for q in self.es.tune + self.es.test}

    def run(self, variant: str, w: float, gate, w_long: float) -> dict:
        """A setting's run: each query's top-10 list at its context's weight (for the paired tests)."""
        return {q.qid: self.runs[self._key(q.qid, variant, w, gate, w_long)].get(q.qid, {}) for q in self.queries}

    def mean(self, per: dict, split: str) -> float:
        qids = self.es.tune if split == "tune" else self.es.test
        return sum(per[q] for q in qids) / len(qids)


def dense_runs(work: Path, names: list[str], model: str, variants=VARIANTS, weights=WEIGHTS) -> dict[str, SetRuns]:
    """Every set's :class:`SetRuns` (the ablation's indexes under ``work``, built when missing)."""
    out, encoder, memo = {}, None, {}
    for n, es in build_sets(work, names).items():
        paths = es.write(work / "sets" / n)
        index = build_indexes(work, es.index_name or n, es.corpus, {"trained": model})["trained"]
        keep = set(es.tune) | set(es.test)
        queries = [q for q in read_queries(paths["queries"]) if q.qid in keep]
        aware = [q.with_reasoning() for q in queries]
        words = {q.qid: len((q.reasoning or "").split()) for q in queries}
        runs = out[n] = SetRuns(es, queries, words)
        keys = [json.dumps([q.text, q.reasoning, q.current_reasoning, q.prior_queries, q.prior_results], default=str)
                for q in queries]
        plain = None
        for variant in variants:
            searcher = build_searcher("dense", index=index, model=model, query_input=variant, late_fusion=1.0,
                                      encoder=encoder)
            encoder = searcher.encoder
            # the Tongyi label variants of one shape carry the same calls: each distinct call is encoded once
            full = _encoded(memo, variant, keys, lambda i: searcher.query_embeddings([aware[j] for j in i]))
            if plain is None:
                plain_searcher = build_searcher("dense", index=index, model=model, query_input=variant,
                                                late_fusion=0.0, encoder=encoder)
                plain = _encoded(memo, "query", keys, lambda i: plain_searcher.query_embeddings([aware[j] for j in i]))
            for w in weights:
                vectors = (w * full + (1 - w) * plain).astype(np.float32)
                ranked = searcher.search_embeddings(vectors, 10)   # nDCG@10 reads the top 10 only
                runs.add(variant, w, {q.qid: dict(hits) for q, hits in zip(queries, ranked)})
    return out


def _encoded(memo: dict, variant: str, keys: list[str], encode):
    """The query vectors of ``keys`` under ``variant``, encoding (``encode(positions)``) only the keys not in
    ``memo`` yet."""
    todo = [i for i, key in enumerate(keys) if (variant, key) not in memo]
    if todo:
        for i, vector in zip(todo, encode(todo)):
            memo[variant, keys[i]] = vector
    return np.stack([memo[variant, key] for key in keys])


def choose(sets: dict[str, SetRuns], variants=VARIANTS, weights=WEIGHTS, gates=GATES) -> tuple[list[str], dict]:
    """The printed lines (the selection rule's report, the leading settings, the pick against the query alone on
    every set's test questions with paired tests) and the pick's record."""
    objective = [n for n in OBJECTIVE if n in sets]
    guards = [n for n in GUARDS if n in sets]
    settings, candidates = {}, {}
    for v in variants:
        for w in weights:
            for gate in gates:
                for w_long in (weights if gate is not None else (w,)):
                    label = _label(v, w, gate, w_long)
                    if label in settings:
                        continue
                    settings[label] = (v, w, gate, w_long)
                    candidates[label] = {n: _per_query(r, r.scores(v, w, gate, w_long), "tune")
                                         for n, r in sets.items() if n in objective + guards}
    selection = select_default(candidates, candidates["query"], objective, guards)
    out = [f"dense defaults: objective {', '.join(objective)}; guards {', '.join(guards)} (tune questions); "
           "baseline of every guard: the query alone", *selection.lines(), "",
           "| setting | objective | " + " | ".join(objective + guards) + " |",
           "|---" * (len(objective + guards) + 2) + "|"]
    mean = {label: {n: sum(v["ndcg@10"] for v in t.values()) / len(t) for n, t in by.items()}
            for label, by in candidates.items()}
    for j in list(selection.judged.values())[:20]:
        out.append(f"| {'x ' if j.disqualified else ''}{j.name} | {j.objective:.4f} | "
                   + " | ".join(f"{mean[j.name][n]:.3f} ({mean[j.name][n] - mean['query'][n]:+.3f})"
                                for n in objective + guards) + " |")
    out.append("test questions (held out): the query alone -> the pick, paired randomisation test:")
    v, w, gate, w_long = settings[selection.pick.name]
    for n, r in sets.items():
        base = evaluate_ndcg(r.run(v, 0.0, None, 0.0), r.es.qrels, r.es.test)
        chosen = evaluate_ndcg(r.run(v, w, gate, w_long), r.es.qrels, r.es.test)
        c = compare_runs(base, chosen, "ndcg@10")
        role = "objective" if n in objective else "guard" if n in guards else "reported"
        out.append(f"  {n} ({role}): {c.mean_a:.4f} -> {c.mean_b:.4f} (delta {c.delta:+.4f}, "
                   f"p = {c.p_randomization:.3f})")
    return out, {"query_input": v, "late_fusion": w, "late_fusion_max_words": gate,
                 "late_fusion_long": None if gate is None else w_long,
                 "selection": selection.record()}


def _per_query(runs: SetRuns, scores: dict[str, float], split: str) -> dict[str, dict[str, float]]:
    qids = runs.es.tune if split == "tune" else runs.es.test
    return {q: {"ndcg@10": scores[q]} for q in qids}


def record(model: str, pick: dict) -> None:
    """Write the picked defaults into the model folder's ``hopscotch_config.json`` (what ``search --reasoning``
    and ``serve`` read; the weights do not depend on them)."""
    path = Path(model) / "hopscotch_config.json"
    config = json.loads(path.read_text())
    for key in ("query_input", "late_fusion", "late_fusion_max_words", "late_fusion_long"):
        config[key] = pick[key]
    if "selection" in pick:   # where the defaults came from: the rule, its sets and split
        config["defaults_selection"] = pick["selection"]
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(config, indent=2) + "\n")
    tmp.replace(path)
