"""Choosing the dense model's reasoning defaults again, by maximin over the dev sets no retriever bounded (issue 33).

The knobs, chosen jointly: the query input variant ``V``, the late-fusion weight ``w`` of contexts up to ``G`` words,
the word gate ``G`` and the weight ``w_long`` of contexts over it (``hopscotch search --query-input V --late-fusion w
--late-fusion-max-words G --late-fusion-long w_long``; no gate: every context at ``w``). A query's search vector is
``W * q_V + (1 - W) * q_query`` with ``W`` its context's weight (:meth:`DenseSearcher.query_embeddings`), so each
query's list depends only on ``(V, W)``: every set's queries are searched once per variant and weight (top 10,
what nDCG@10 reads), and a setting's per-query scores are picked from those by each context's length.

The rule is the one the hybrid's fusion default follows (:func:`~hopscotch.retriever.searchers.fusion_tuning.
maximin`): late fusion mixes two inputs, the query alone and the reasoning-aware input, as fusion mixes two lists,
so a setting's gain on a set is its tune nDCG@10 minus the better input's there (the query alone, or the best
variant alone at ``W = 1``), and the default is the setting whose worst gain over the voting sets is largest (ties:
the larger mean). Judged against the query alone only, the smallest set where the query already says everything
(MuSiQue hops, ``#k`` resolved) would veto any use of the reasoning and HotpotQA would lose 0.16; judged against
the better input, no set's own strength is thrown away. Call-level sets never vote. Test questions only report.
"""

from __future__ import annotations

import json
from pathlib import Path

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
        from hopscotch_experiments.ablations.ablation_runs import evaluate_ndcg

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
    import numpy as np

    from hopscotch_experiments.agent_data.eval_sets import build_sets
    from hopscotch_experiments.ablations.ablation_runs import build_indexes
    from hopscotch.retriever.io.queries import read_queries
    from hopscotch.retriever.model.query_input import ReasoningContext
    from hopscotch.retriever.searchers import build_searcher

    out, encoder = {}, None
    for n, es in build_sets(work, names).items():
        paths = es.write(work / "sets" / n)
        index = build_indexes(work, es.index_name or n, es.corpus, {"trained": model})["trained"]
        keep = set(es.tune) | set(es.test)
        queries = [q for q in read_queries(paths["queries"]) if q.qid in keep]
        texts, contexts = [q.text for q in queries], [ReasoningContext.of(q) for q in queries]
        words = {q.qid: len(str(c or "").split()) for q, c in zip(queries, contexts)}
        runs = out[n] = SetRuns(es, queries, words)
        plain = None
        for variant in variants:
            searcher = build_searcher("dense", index=index, model=model, query_input=variant, late_fusion=1.0,
                                      encoder=encoder)
            encoder = searcher.encoder
            full = searcher.query_embeddings(texts, contexts, True)
            if plain is None:
                plain = build_searcher("dense", index=index, model=model, query_input=variant, late_fusion=0.0,
                                       encoder=encoder).query_embeddings(texts, contexts, True)
            for w in weights:
                vectors = (w * full + (1 - w) * plain).astype(np.float32)
                ranked = searcher.search_embeddings(vectors, 10)   # nDCG@10 reads the top 10 only
                runs.add(variant, w, {q.qid: dict(hits) for q, hits in zip(queries, ranked)})
    return out


def choose(sets: dict[str, SetRuns], variants=VARIANTS, weights=WEIGHTS, gates=GATES) -> tuple[list[str], dict]:
    """The printed lines (the top settings by worst tune gain over each set's better input, the pick against the
    query alone on test with paired tests) and the pick."""
    from hopscotch.retriever.evaluation.metrics import compare_runs
    from hopscotch_experiments.ablations.ablation_runs import evaluate_ndcg
    from hopscotch.retriever.searchers.fusion_tuning import maximin

    voters = [n for n, r in sets.items() if r.es.votes]
    query = {n: r.mean(r.scores(variants[0], 0.0, None, 0.0), "tune") for n, r in sets.items()}
    alone = {n: max(r.mean(r.scores(v, 1.0, None, 1.0), "tune") for v in variants) for n, r in sets.items()}
    better = {n: max(query[n], alone[n]) for n in sets}
    tune, settings = {}, {}
    for v in variants:
        for w in weights:
            for gate in gates:
                for w_long in (weights if gate is not None else (w,)):
                    label = _label(v, w, gate, w_long)
                    if label in settings:
                        continue
                    settings[label] = (v, w, gate, w_long)
                    tune[label] = {n: r.mean(r.scores(v, w, gate, w_long), "tune") for n, r in sets.items()}
    gains = {label: {n: t[n] - better[n] for n in voters} for label, t in tune.items()}
    worst = {label: min(g.values()) for label, g in gains.items()}
    mean = {label: sum(g.values()) / len(g) for label, g in gains.items()}
    pick, _ = maximin(gains)
    out = [f"dense defaults: voting sets {', '.join(voters)} (tune questions); gain = nDCG@10 minus the better input "
           "on that set (the query alone, or the best variant alone)",
           "| setting | worst tune gain | mean tune gain | " + " | ".join(voters) + " |",
           "|---" * (len(voters) + 3) + "|",
           "| query alone | | | " + " | ".join(f"{query[n]:.3f}" for n in voters) + " |",
           "| best variant alone (w = 1) | | | " + " | ".join(f"{alone[n]:.3f}" for n in voters) + " |"]
    for label in sorted(gains, key=lambda label: (-worst[label], -mean[label]))[:20]:
        out.append(f"| {label}{' (pick)' if label == pick else ''} | {worst[label]:+.4f} | {mean[label]:+.4f} | "
                   + " | ".join(f"{tune[label][n]:.3f} ({gains[label][n]:+.3f})" for n in voters) + " |")
    out.append(f"maximin pick: {pick} (worst tune gain over the better input {worst[pick]:+.4f}, mean {mean[pick]:+.4f})")
    out.append("test questions (held out): the query alone -> the pick, paired randomisation test:")
    v, w, gate, w_long = settings[pick]
    for n, r in sets.items():
        base = evaluate_ndcg(r.run(v, 0.0, None, 0.0), r.es.qrels, r.es.test)
        chosen = evaluate_ndcg(r.run(v, w, gate, w_long), r.es.qrels, r.es.test)
        c = compare_runs(base, chosen, "ndcg@10")
        out.append(f"  {n}{'' if n in voters else ' (call-level, no vote)'}: {c.mean_a:.4f} -> {c.mean_b:.4f} "
                   f"(delta {c.delta:+.4f}, p = {c.p_randomization:.3f})")
    return out, {"query_input": v, "late_fusion": w, "late_fusion_max_words": gate,
                 "late_fusion_long": None if gate is None else w_long,
                 "worst_tune_gain": worst[pick], "mean_tune_gain": mean[pick]}


def record(model: str, pick: dict) -> None:
    """Write the picked defaults into the model folder's ``hopscotch_config.json`` (what ``search --reasoning``
    and ``serve`` read; the weights do not depend on them)."""
    path = Path(model) / "hopscotch_config.json"
    config = json.loads(path.read_text())
    for key in ("query_input", "late_fusion", "late_fusion_max_words", "late_fusion_long"):
        config[key] = pick[key]
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(config, indent=2) + "\n")
    tmp.replace(path)
