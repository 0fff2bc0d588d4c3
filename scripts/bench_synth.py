"""DR-Synth benchmark: throughput on HotpotQA/IRCoT and label accuracy on step-labelled data.

1. Throughput: whole-process ``hopscotch synth`` (lexical oracle) on hotpotqa_ircot's 3,128 IRCoT steps
   with 1 and 2 workers, median of ``--runs`` runs, against the named peer in the same run: a *naive
   labeller* (same BM25 top-50, the question's first gold document as positive, 7 random non-gold
   candidates as negatives, no oracle, no answer guard, no resumability).
2. Label accuracy where the right positive of each step is known:
   * the embedded world (200 questions): traces with their step gold removed, so the labeller only
     knows the question's gold documents; right = the positive is the step's gold document;
   * MuSiQue sub-questions (237 hops): query = the hop's sub-question with ``#k`` filled in by earlier
     sub-answers, reasoning = the earlier hops; right = the positive is the hop's paragraph.
   Peers: ``first-gold`` (the question's first gold document, as a naive labeller does) and
   ``bm25-gold`` (the gold document BM25 ranks highest for the step query, no question/answer view).
   Also reported: how many naive negatives contain the answer (false negatives the guard removes).

Usage (heavy: run alone)::

    flock /tmp/hopscotch-heavy.lock .venv/bin/python scripts/bench_synth.py --runs 3 --json out/bench_synth.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from hopscotch_experiments.benchmarks.common import shared_data_dir, timed

ROOT = Path(__file__).resolve().parents[1]


def shared_data(arg: str | None) -> Path:
    for cand in [arg, shared_data_dir(ROOT)]:
        if cand and Path(cand).is_dir():
            return Path(cand)
    sys.exit("shared data not found: pass --data or set HOPSCOTCH_DATA")


# -- the naive peer ----------------------------------------------------------------------------------------

def naive_label(qa_dir: Path, traces: Path, out: Path, seed: int = 13, depth: int = 50, negatives: int = 7) -> dict:
    """BM25 top-depth; positive = the question's first gold; negatives = random non-gold candidates."""
    from hopscotch.retriever.text.answers import AnswerMatcher
    from hopscotch.data_synth.qa import load_qa
    from hopscotch.data_synth.traces import read_traces
    from hopscotch.retriever.index.bm25 import BM25Index
    from hopscotch.retriever.io.corpus import load_corpus_dict

    qa = load_qa(qa_dir)
    docs = load_corpus_dict(qa_dir / "corpus.jsonl")
    index = BM25Index.build(docs.values(), show_progress=False)
    steps = [s for s in read_traces([traces]) if s.query and s.question_id in qa.questions]
    hits = index.search([s.query for s in steps], k=depth)
    n_neg = n_answer_neg = 0
    with open(out, "w", encoding="utf-8") as fh:
        for step, hit in zip(steps, hits):
            q = qa.questions[step.question_id]
            gold = q.gold_ranked()
            if not gold:
                continue
            pool = [d for d, _ in hit if d not in q.gold]
            rng = random.Random(f"{seed}:{step.query_id}")
            neg = rng.sample(pool, min(negatives, len(pool)))
            matcher = AnswerMatcher(q.answers)
            n_neg += len(neg)
            n_answer_neg += sum(matcher.contained_in(f"{docs[d].title} {docs[d].text}") for d in neg)
            row = {"query_id": step.query_id, "query": step.query, "reasoning": step.reasoning,
                   "positive_passages": [{"docid": gold[0], "title": docs[gold[0]].title, "text": docs[gold[0]].text}],
                   "negative_passages": [{"docid": d, "title": docs[d].title, "text": docs[d].text} for d in neg]}
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return {"negatives": n_neg, "answer_bearing_negatives": n_answer_neg}


# -- throughput --------------------------------------------------------------------------------------------

def throughput(data: Path, runs: int, tmp: Path) -> dict:
    root = data / "hotpotqa_ircot"
    env = {**os.environ, "OMP_NUM_THREADS": "2", "HF_HUB_OFFLINE": "1"}
    py = sys.executable
    synth = [py, "-m", "hopscotch.retriever.cli", "synth", "--qa", str(root), "--traces", str(root / "cot_steps.jsonl")]
    jobs = {
        "naive labeller (peer)": [py, __file__, "--naive", str(root), "--out", str(tmp / "naive.jsonl")],
        "hopscotch synth, lexical, 1 worker": synth + ["--out", str(tmp / "w1.jsonl"), "--workers", "1"],
        "hopscotch synth, lexical, 2 workers": synth + ["--out", str(tmp / "w2.jsonl"), "--workers", "2"],
    }
    times = {name: [] for name in jobs}
    for _ in range(runs):  # interleaved, so a slow moment of the shared machine hits every job alike
        for name, cmd in jobs.items():
            times[name].append(timed(cmd, env))
    stats = json.loads((tmp / "w1.stats.json").read_text())
    assert (tmp / "w1.jsonl").read_bytes() == (tmp / "w2.jsonl").read_bytes(), "workers changed the output"
    peer = statistics.median(times["naive labeller (peer)"])
    return {"steps": stats["steps_read"], "kept": stats["steps_kept"], "kept_fraction": stats["kept_fraction"],
            "kept_fraction_with_gold": stats["kept_fraction_with_gold"], "dropped": stats["dropped"],
            "timings": {name: {"median_s": round(statistics.median(t), 2), "runs_s": [round(x, 2) for x in t],
                               "ratio_to_peer": round(statistics.median(t) / peer, 2)} for name, t in times.items()}}


# -- label accuracy ------------------------------------------------------------------------------------------

def world_case(tmp: Path) -> tuple[Path, Path, dict]:
    from hopscotch.data_synth.world import build_world, write_world
    from hopscotch.retriever.io.common import read_jsonl, write_jsonl

    folder = tmp / "world"
    write_world(build_world(seed=13, docs=2000, questions=200), folder)
    truth, rows = {}, []
    for _, t in read_jsonl(folder / "traces.jsonl"):
        truth[f"{t['question_id']}_turn{t['step']}"] = set(t.pop("gold_docids"))
        rows.append(t)
    traces = tmp / "world_traces_without_step_gold.jsonl"
    write_jsonl(traces, rows)
    return folder, traces, truth


def musique_case(data: Path, tmp: Path) -> tuple[Path, Path, dict]:
    from hopscotch.retriever.io.common import read_jsonl, write_jsonl

    root = data / "musique_hipporag"
    rows, truth, answers = [], {}, {}
    for _, r in read_jsonl(root / "subquestion_pairs.jsonl"):
        prev = answers.setdefault(r["qid"], [])
        query = r["subquestion"]
        for k in range(len(prev), 0, -1):
            query = query.replace(f"#{k}", prev[k - 1][1])
        reasoning = " ".join(f"{q} {a}." for q, a in prev)
        rows.append({"question_id": r["qid"], "step": r["hop"], "reasoning": reasoning, "query": query})
        truth[f"{r['qid']}_turn{r['hop']}"] = {r["positive"]}
        prev.append((query, r["subanswer"]))
    traces = tmp / "musique_subquestion_traces.jsonl"
    write_jsonl(traces, rows)
    return root, traces, truth


def bm25_gold_accuracy(qa_dir: Path, traces: Path, truth: dict) -> float:
    from hopscotch.data_synth.qa import load_qa
    from hopscotch.data_synth.traces import read_traces
    from hopscotch.retriever.index.bm25 import BM25Index
    from hopscotch.retriever.io.corpus import load_corpus_dict

    qa = load_qa(qa_dir)
    index = BM25Index.build(load_corpus_dict(qa_dir / "corpus.jsonl").values(), show_progress=False)
    right = total = 0
    for s in read_traces([traces]):
        gold = qa.questions[s.question_id].gold_ranked()
        scores = index.score_documents(s.query, gold)
        best = max(range(len(gold)), key=lambda i: (scores[i], -i))
        right += gold[best] in truth[s.query_id]
        total += 1
    return right / total


def accuracy(path: Path, truth: dict) -> float:
    from hopscotch.retriever.io.common import read_jsonl

    rows = [r for _, r in read_jsonl(path)]
    return sum(r["positive_passages"][0]["docid"] in truth[r["query_id"]] for r in rows) / len(truth)


def label_accuracy(data: Path, tmp: Path, oracles: list[str]) -> dict:
    from hopscotch.data_synth.config import SynthConfig
    from hopscotch.data_synth.pipeline import SynthInputs, synthesize

    out = {}
    for name, (qa_dir, traces, truth) in {"world (200 q)": world_case(tmp), "MuSiQue hops": musique_case(data, tmp)}.items():
        res = {"steps": len(truth)}
        naive = naive_label(qa_dir, traces, tmp / "naive_acc.jsonl")
        res["first-gold (peer)"] = round(accuracy(tmp / "naive_acc.jsonl", truth), 4)
        res["bm25-gold (peer)"] = round(bm25_gold_accuracy(qa_dir, traces, truth), 4)
        res["naive answer-bearing negatives"] = naive
        for rr in oracles:
            t0 = time.perf_counter()
            stats = synthesize(SynthInputs(qa_dir, traces=[traces]), out=tmp / f"acc_{rr}.jsonl",
                               config=SynthConfig(reranker=rr, show_progress=False, fresh=True))
            res[f"dr-synth {rr}"] = round(accuracy(tmp / f"acc_{rr}.jsonl", truth), 4)
            res[f"dr-synth {rr} seconds"] = round(time.perf_counter() - t0, 1)
            res[f"dr-synth {rr} kept"] = stats["steps_kept"]
        out[name] = res
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", help="shared data folder (default ../shared/data or $HOPSCOTCH_DATA)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rerankers", default="lexical,dense", help="oracles for the accuracy part")
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--json", help="write the results here too")
    ap.add_argument("--naive", metavar="QA_DIR", help=argparse.SUPPRESS)  # the peer, run as its own process
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.naive:
        naive_label(Path(args.naive), Path(args.naive) / "cot_steps.jsonl", Path(args.out))
        return
    import torch

    torch.set_num_threads(2)
    data = shared_data(args.data)
    with tempfile.TemporaryDirectory(prefix="bench_synth_") as tmp:
        tmp = Path(tmp)
        results = {"machine": f"{os.cpu_count()} CPUs, torch {torch.__version__}"}
        if not args.skip_throughput:
            results["throughput_hotpotqa"] = throughput(data, args.runs, tmp)
        results["label_accuracy"] = label_accuracy(data, tmp, [r for r in args.rerankers.split(",") if r])
    text = json.dumps(results, indent=2)
    print(text)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(text + "\n")


if __name__ == "__main__":
    main()
