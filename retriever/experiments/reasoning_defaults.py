"""Choosing every reasoning default again, by maximin over the dev sets no retriever bounded (issue 33).

Dense: the query input variant, the late-fusion weight ``w`` and the word gate (contexts over N words searched
with the query alone; ``None``: no gate), jointly. For each set the trained model encodes every query twice per
variant (the variant's template and the query alone), once; a setting's search vectors are then
``W_i * q_variant + (1 - W_i) * q_query`` with ``W_i = w`` (0 over the gate), exactly what ``hopscotch search
--query-input V --late-fusion w --late-fusion-max-words N`` searches with (:meth:`DenseSearcher.query_embeddings`).
The criterion: each setting's tune nDCG@10 minus the query-only row's (``w = 0``), per voting set; the default is
the setting with the best worst gain (:func:`~hopscotch.retriever.searchers.fusion_tuning.maximin`, ties by
the mean). Call-level sets are reported and never vote.

Hybrid: :mod:`.fusion_defaults`'s grid over reasoning-aware BM25 (its chosen defaults) and the chosen dense
defaults, maximin against each set's better component.
"""

from __future__ import annotations

import json
from pathlib import Path

VARIANTS = ("reasoning_tail:64", "reasoning_tail:128", "current_reasoning", "reasoning_focus:128", "reasoning")
WEIGHTS = tuple(i / 10 for i in range(11))
GATES = (None, 200, 1000, 5000)
K = 100


def _label(variant: str, w: float, gate) -> str:
    return "query" if w == 0 else f"{variant} w={w:g} gate={gate if gate is not None else 'none'}"


def dense_grid(work: Path, names: list[str], model: str, variants=VARIANTS, weights=WEIGHTS, gates=GATES):
    """``(sets, {set: {label: (tune result, test result)}}, {label: (variant, w, gate)})`` for every setting."""
    import numpy as np

    from hopscotch.data_synth.agent.eval_sets import build_sets
    from hopscotch.retriever.experiments.ablation_runs import build_indexes
    from hopscotch.retriever.io.queries import read_queries
    from hopscotch.retriever.model.query_input import ReasoningContext
    from hopscotch.retriever.searchers import build_searcher

    sets = build_sets(work, names)
    results, settings, encoder = {}, {}, None
    for n, es in sets.items():
        paths = es.write(work / "sets" / n)
        index = build_indexes(work, es.index_name or n, es.corpus, {"trained": model})["trained"]
        keep = set(es.tune) | set(es.test)
        queries = [q for q in read_queries(paths["queries"]) if q.qid in keep]
        texts, contexts = [q.text for q in queries], [ReasoningContext.of(q) for q in queries]
        words = np.array([len(str(c or "").split()) for c in contexts])
        results[n] = {}
        plain = None
        for variant in variants:
            emb = {}
            for w in (1.0, 0.0):
                searcher = build_searcher("dense", index=index, model=model, query_input=variant, late_fusion=w,
                                          encoder=encoder)
                encoder = searcher.encoder
                if w == 0.0 and plain is not None:
                    emb[w] = plain
                    continue
                emb[w] = searcher.query_embeddings(texts, contexts, True)
            plain = emb[0.0]
            for w in weights:
                for gate in gates if 0 < w else (None,):
                    label = _label(variant, w, gate)
                    if label in results[n]:
                        continue
                    mix = np.where((words <= gate) if gate is not None else np.ones(len(words), bool), w, 0.0)
                    vectors = (mix[:, None] * emb[1.0] + (1 - mix[:, None]) * emb[0.0]).astype(np.float32)
                    ranked = searcher.search_embeddings(vectors, 10)   # nDCG@10 reads the top 10 only
                    run = {q.qid: dict(hits) for q, hits in zip(queries, ranked)}
                    results[n][label] = _Scored(run, es)
                    settings[label] = (variant, w, gate)
    return sets, results, settings


class _Scored:
    """A setting's top-10 run on one set: nDCG@10 on tune at once, on test when asked (``[0]`` / ``[1]``)."""

    def __init__(self, run: dict, es):
        from hopscotch.retriever.experiments.ablation_runs import evaluate_ndcg

        self.run, self.es = run, es
        self.tune = evaluate_ndcg(run, es.qrels, es.tune)
        self._test = None

    def __getitem__(self, i: int):
        from hopscotch.retriever.experiments.ablation_runs import evaluate_ndcg

        if i == 0:
            return self.tune
        if self._test is None:
            self._test = evaluate_ndcg(self.run, self.es.qrels, self.es.test)
        return self._test


def choose(sets, results, settings) -> tuple[list[str], dict]:
    """The printed lines (the top settings by worst tune gain over the query alone, the pick on test with paired
    tests) and the pick ``{"query_input", "late_fusion", "late_fusion_max_words"}``."""
    from hopscotch.retriever.evaluation.metrics import compare_runs
    from hopscotch.retriever.searchers.fusion_tuning import maximin

    voters = [n for n, es in sets.items() if es.votes]
    tune = {n: {label: r[0].mean["ndcg@10"] for label, r in by.items()} for n, by in results.items()}
    gains = {label: {n: tune[n][label] - tune[n]["query"] for n in voters} for label in settings if label != "query"}
    worst = {label: min(g.values()) for label, g in gains.items()}
    mean = {label: sum(g.values()) / len(g) for label, g in gains.items()}
    pick, _ = maximin(gains)
    out = [f"dense defaults: voting sets {', '.join(voters)} (tune questions); gain = nDCG@10 minus the query-only row",
           "| setting | worst tune gain | mean tune gain | " + " | ".join(voters) + " |",
           "|---" * (len(voters) + 3) + "|",
           "| query only | | | " + " | ".join(f"{tune[n]['query']:.3f}" for n in voters) + " |"]
    for label in sorted(gains, key=lambda label: (-worst[label], -mean[label]))[:25]:
        out.append(f"| {label}{' (pick)' if label == pick else ''} | {worst[label]:+.4f} | {mean[label]:+.4f} | "
                   + " | ".join(f"{tune[n][label]:.3f} ({gains[label][n]:+.3f})" for n in voters) + " |")
    out.append(f"maximin pick: {pick} (worst tune gain {worst[pick]:+.4f}, mean {mean[pick]:+.4f})")
    out.append("test questions (held out), query only vs pick, paired randomisation test:")
    for n in sets:
        c = compare_runs(results[n]["query"][1], results[n][pick][1], "ndcg@10")
        out.append(f"  {n}{'' if n in voters else ' (call-level, no vote)'}: {c.mean_a:.4f} -> {c.mean_b:.4f} "
                   f"(delta {c.delta:+.4f}, p = {c.p_randomization:.3f})")
    variant, w, gate = settings[pick]
    return out, {"query_input": variant, "late_fusion": w, "late_fusion_max_words": gate,
                 "worst_tune_gain": worst[pick], "mean_tune_gain": mean[pick]}


def record(model: str, pick: dict) -> None:
    """Write the picked defaults into the model folder's ``hopscotch_config.json`` (what ``search --reasoning``
    and ``serve`` read; the weights do not depend on them)."""
    path = Path(model) / "hopscotch_config.json"
    config = json.loads(path.read_text())
    for key in ("query_input", "late_fusion", "late_fusion_max_words"):
        config[key] = pick[key]
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(config, indent=2) + "\n")
    tmp.replace(path)
