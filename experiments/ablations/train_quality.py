"""Quality check of the trainer: MiniLM trained on DR-Synth tuples of HotpotQA/IRCoT questions 1-400,
evaluated on questions 401-500 against the full corpus, base vs trained and reasoning-aware vs query-only.

Split (file order of ``hotpotqa_ircot/queries.jsonl``, :func:`hopscotch_experiments.agent_data.splits.splits`):
  * train: DR-Synth tuples (``hopscotch synth``, lexical oracle) from the IRCoT steps of questions 1-380;
  * dev:   the IRCoT steps of questions 381-400 against their 20 x 10 context paragraphs (best checkpoint);
  * test:  questions 401-500 against the full 4,858-paragraph corpus, two query sets:
      - steps: every IRCoT step (query = the step's new sentence, reasoning = the chain of thought
        before it), relevant = the question's two gold paragraphs;
      - questions: the question itself, no reasoning.
Input variants per model: ``reasoning`` (``Reasoning: {cot}\\n\\nQuery: {step}``), ``query-only``
(``Reasoning: Empty\\n\\nQuery: {step}``) and ``plain`` (the step text alone).
Paired randomisation tests and t-tests (``hopscotch.retriever.evaluation.metrics.compare_runs``) on nDCG@10.
"""

from __future__ import annotations

import time
from pathlib import Path

from hopscotch_experiments.agent_data.splits import data_dir, splits

from hopscotch.retriever.cli import main as cli
from hopscotch.retriever.evaluation.metrics import compare_runs, evaluate
from hopscotch.retriever.io.common import atomic_write, read_jsonl, write_jsonl
from hopscotch.retriever.io.corpus import read_corpus
from hopscotch.retriever.io.qrels import read_qrels
from hopscotch.retriever.model.config import EncoderConfig
from hopscotch.retriever.model.dense_encoder import exact_search
from hopscotch.retriever.model.matryoshka import truncate

SOURCE = "hotpotqa_ircot"


def data() -> Path:
    """The shared data's HotpotQA/IRCoT folder (``$HOPSCOTCH_DATA/hotpotqa_ircot``)."""
    return data_dir() / SOURCE


def _rows(path: Path) -> list[dict]:
    return [obj for _, obj in read_jsonl(path)]


def _write_text(path: Path, text: str) -> None:
    with atomic_write(path) as fh:
        fh.write(text)


def split_questions():
    """The train (1-380), dev (381-400) and test (401-500) question ids."""
    s = splits(SOURCE)
    return s["train"], s["dev"], s["test"]


def step_queries(qids: list[str]) -> list[dict]:
    """IRCoT steps as search queries: the new sentence, the chain of thought before it as reasoning."""
    keep, out, previous = set(qids), [], {}
    for step in _rows(data() / "cot_steps.jsonl"):
        qid = step["qid"]
        if qid not in keep:
            continue
        before = previous.get(qid, "")
        previous[qid] = step["cumulative_cot"]
        if step["new_sentence"].strip():
            out.append({"_id": f"{qid}_step{step['step']}", "question": qid, "text": step["new_sentence"].strip(),
                        "reasoning": before.strip() or None})
    return out


def qrels_for(queries: list[dict], gold: dict[str, dict[str, int]]) -> str:
    """A qrels TSV (with header) giving each query its question's gold paragraphs."""
    lines = ["query-id\tcorpus-id\tscore"]
    for q in queries:
        lines += [f"{q['_id']}\t{d}\t{g}" for d, g in gold[q["question"]].items()]
    return "\n".join(lines) + "\n"


def build_tuples(work: Path, train_qids: list[str]) -> Path:
    """DR-Synth tuples for the training questions (``hopscotch synth`` on a filtered QA folder)."""
    src = data()
    out = work / "tuples.jsonl"
    if out.is_file():
        return out
    qa = work / "qa_train"
    qa.mkdir(parents=True, exist_ok=True)
    keep = set(train_qids)
    write_jsonl(qa / "queries.jsonl", [q for q in _rows(src / "queries.jsonl") if q["_id"] in keep])
    qrels = (src / "qrels.tsv").read_text().splitlines()
    _write_text(qa / "qrels.tsv", "\n".join(qrels[:1] + [l for l in qrels[1:] if l.split("\t")[0] in keep]) + "\n")
    write_jsonl(qa / "cot_steps.jsonl", [s for s in _rows(src / "cot_steps.jsonl") if s["qid"] in keep])
    code = cli(["synth", "--qa", str(qa), "--corpus", str(src / "corpus.jsonl"), "--traces",
                str(qa / "cot_steps.jsonl"), "--out", str(out)])
    if code != 0:
        raise SystemExit(f"hopscotch synth failed with exit code {code}")
    return out


def build_eval_sets(work: Path, dev_qids, test_qids) -> dict:
    """Writes the dev queries, qrels and corpus under ``work``; returns the test sets ``{"steps" |
    "questions": (queries, qrels)}``."""
    src = data()
    gold = read_qrels(src / "qrels.tsv")
    sets = {}
    dev = step_queries(dev_qids)
    write_jsonl(work / "dev_queries.jsonl", dev)
    _write_text(work / "dev_qrels.tsv", qrels_for(dev, gold))
    paragraphs = {d for r in _rows(src / "train_with_distractors.jsonl") if r["qid"] in set(dev_qids)
                  for d in r["positives"] + r["distractor_negatives"]}
    write_jsonl(work / "dev_corpus.jsonl", [d for d in _rows(src / "corpus.jsonl") if d["_id"] in paragraphs])
    steps = step_queries(test_qids)
    questions = [{"_id": q["_id"], "question": q["_id"], "text": q["text"], "reasoning": None}
                 for q in _rows(src / "queries.jsonl") if q["_id"] in set(test_qids)]
    for name, queries in (("steps", steps), ("questions", questions)):
        sets[name] = (queries, {q["_id"]: gold[q["question"]] for q in queries})
    return sets


def evaluate_model(model_path: str, sets: dict, lengths: dict, batch_size: int = 64,
                   dims: tuple[int, ...] = ()) -> dict:
    """Runs and metrics of one model on every query set and input variant, keyed ``(set, variant)``; with
    ``dims``, also at each Matryoshka prefix (documents and queries cut and renormalised by
    :func:`hopscotch.retriever.model.matryoshka.truncate`), keyed ``(set, variant, dim)``."""
    from hopscotch.retriever.model.dual_encoder import DualEncoder
    from hopscotch.retriever.training.evaluation import embed_texts

    model = DualEncoder.from_pretrained(model_path, EncoderConfig(**lengths)).eval()
    docs = list(read_corpus(data() / "corpus.jsonl"))
    doc_emb = _prefixes(embed_texts(model, [(d.title, d.text) for d in docs], "passage", batch_size), dims)
    results = {}
    for set_name, (queries, qrels) in sets.items():
        variants = {"reasoning": [(q["text"], q["reasoning"]) for q in queries],
                    "query-only": [(q["text"], None) for q in queries]}
        for variant, items in variants.items():
            q_emb = embed_texts(model, items, "query", batch_size)
            results.update(_at_prefixes((set_name, variant), _prefixes(q_emb, dims), doc_emb, docs, queries, qrels))
        model.config.reasoning_aware = False  # plain text: the step alone, as a non-reasoning retriever sees it
        q_emb = embed_texts(model, [(q["text"], None) for q in queries], "query", batch_size)
        model.config.reasoning_aware = True
        results.update(_at_prefixes((set_name, "plain"), _prefixes(q_emb, dims), doc_emb, docs, queries, qrels))
    return results


def _prefixes(emb, dims) -> dict:
    """``{None: emb, D: emb cut to D and renormalised (matryoshka.truncate) for each D in dims}``."""
    import torch

    return {None: emb, **{dim: truncate(torch.from_numpy(emb), dim).numpy() for dim in dims}}


def _at_prefixes(key: tuple, q_emb: dict, doc_emb: dict, docs, queries, qrels) -> dict:
    """Metrics of the full vectors under ``key`` and of each prefix under ``(*key, dim)``; ``q_emb`` and
    ``doc_emb`` are :func:`_prefixes` of the same dims."""
    return {(key if dim is None else (*key, dim)): _run_and_eval(q_emb[dim], doc_emb[dim], docs, queries, qrels,
                                                                   exact_search, evaluate)
            for dim in q_emb}


def _run_and_eval(q_emb, doc_emb, docs, queries, qrels, exact_search, evaluate):
    scores, rows = exact_search(doc_emb, q_emb, 100)
    run = {q["_id"]: {docs[j].docid: float(s) for s, j in zip(sr, jr) if j >= 0}
           for q, sr, jr in zip(queries, scores, rows)}
    return evaluate(run, qrels, ["ndcg@10", "recall@10", "recall@100"])


def run_quality(work: Path, recipe: str, overrides: list[str], skip_train: bool = False, dims: tuple[int, ...] = (),
                reference: str | None = None) -> dict:
    """Tuples, dev and test sets under ``work``, training (resumed; ``skip_train``: evaluate an existing
    ``work/run``), and the report: every metric of base and trained, and the paired comparisons.

    :param dims: also evaluate every model at these Matryoshka prefixes (``metrics`` keys ``.../@D``) and
        compare trained against base at each
    :param reference: another trained model folder (e.g. the fp32 run of a bf16 one), evaluated alike and
        compared with the trained model on the reasoning steps and the questions"""
    from hopscotch.retriever.training.recipe import load_recipe
    from hopscotch.retriever.training.trainer import train

    work.mkdir(parents=True, exist_ok=True)
    train_qids, dev_qids, test_qids = split_questions()
    tuples = build_tuples(work, train_qids)
    sets = build_eval_sets(work, dev_qids, test_qids)
    overrides = [f"data.train={tuples}", f"eval.queries={work / 'dev_queries.jsonl'}",
                 f"eval.corpus={work / 'dev_corpus.jsonl'}", f"eval.qrels={work / 'dev_qrels.tsv'}", *overrides]
    cfg = load_recipe(recipe, overrides)
    run_dir = work / "run"
    train_seconds = None
    if not skip_train:
        started = time.perf_counter()
        train(recipe, run_dir, overrides, resume=True)
        train_seconds = time.perf_counter() - started
    trained = run_dir / "best" if (run_dir / "best").is_dir() else run_dir / "final"
    lengths = {"query_max_len": cfg.model.query_max_len, "passage_max_len": cfg.model.passage_max_len}
    base = evaluate_model("minilm", sets, lengths, dims=dims)
    ours = evaluate_model(str(trained), sets, lengths, dims=dims)
    models = {"base": base, "trained": ours}
    if reference:
        models["reference"] = evaluate_model(reference, sets, lengths, dims=dims)
    report = {"train_seconds": train_seconds, "trained_model": str(trained), "tuples": str(tuples),
              "num_queries": {k: len(v[0]) for k, v in sets.items()}, "metrics": {}, "paired": {}}
    for model_name, results in models.items():
        for key, result in results.items():
            name = "/".join([model_name, *key[:2]] + [f"@{d}" for d in key[2:]])
            report["metrics"][name] = result.mean | {"ci95_ndcg@10": result.ci95["ndcg@10"]}
    pairs = {
        "trained-reasoning vs base-reasoning (steps)": (base[("steps", "reasoning")], ours[("steps", "reasoning")]),
        "trained-reasoning vs base-plain (steps)": (base[("steps", "plain")], ours[("steps", "reasoning")]),
        "trained: reasoning vs query-only (steps)": (ours[("steps", "query-only")], ours[("steps", "reasoning")]),
        "trained: reasoning vs plain (steps)": (ours[("steps", "plain")], ours[("steps", "reasoning")]),
        "trained vs base, query-only (questions)": (base[("questions", "plain")], ours[("questions", "query-only")]),
    }
    for dim in dims:
        pairs[f"trained vs base, reasoning (steps) @{dim}"] = (base[("steps", "reasoning", dim)],
                                                               ours[("steps", "reasoning", dim)])
        pairs[f"trained @{dim} vs trained full, reasoning (steps)"] = (ours[("steps", "reasoning")],
                                                                      ours[("steps", "reasoning", dim)])
    if reference:
        ref = models["reference"]
        pairs["trained vs reference, reasoning (steps)"] = (ref[("steps", "reasoning")], ours[("steps", "reasoning")])
        pairs["trained vs reference, query-only (questions)"] = (ref[("questions", "query-only")],
                                                                ours[("questions", "query-only")])
        for dim in dims:
            pairs[f"trained vs reference, reasoning (steps) @{dim}"] = (ref[("steps", "reasoning", dim)],
                                                                        ours[("steps", "reasoning", dim)])
    for name, (a, b) in pairs.items():
        c = compare_runs(a, b, "ndcg@10")
        report["paired"][name] = {"mean_a": c.mean_a, "mean_b": c.mean_b, "delta": c.delta,
                                  "p_randomization": c.p_randomization, "p_ttest": c.p_ttest, "n": c.num_queries}
    return report
