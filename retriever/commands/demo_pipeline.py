"""The demo's stages as plain functions (part of the CLI, so it may import ``data_synth``).

Split: the world's first ``train_fraction`` of questions feed DR-Synth and training; the rest are held
out. Two held-out evaluation sets: the questions themselves, and every search step of their agent
traces (query + reasoning, graded against the step's own gold documents).
"""

from __future__ import annotations

from pathlib import Path

from hopscotch.retriever.io.queries import Query

METRICS = ["ndcg@10", "recall@100"]


def make_world(out: Path, docs: int, questions: int, seed: int) -> Path:
    from hopscotch.data_synth.world import build_world, write_world

    world_dir = out / "world"
    if (world_dir / "world.json").exists():
        print(f"reusing {world_dir}")
        return world_dir
    stats = write_world(build_world(seed=seed, docs=docs, questions=questions), world_dir)
    print(f"{stats['documents']} documents, {stats['questions']} questions, {stats['trace_steps']} trace steps")
    return world_dir


def eval_sets(world_dir: Path, held_out: list[str]) -> dict[str, tuple[list[Query], dict]]:
    """``{"questions": (queries, qrels), "steps": (queries with reasoning, per-step qrels)}``."""
    from hopscotch.data_synth.traces import read_traces
    from hopscotch.retriever.io.qrels import read_qrels
    from hopscotch.retriever.io.queries import read_queries

    keep = set(held_out)
    questions = [q for q in read_queries(world_dir / "queries.jsonl") if q.qid in keep]
    qrels = {q: d for q, d in read_qrels(world_dir / "qrels.tsv").items() if q in keep}
    steps, step_qrels = [], {}
    for s in read_traces([world_dir / "traces.jsonl"], "world"):
        if s.question_id in keep:
            steps.append(Query(s.query_id, s.query, s.reasoning))
            step_qrels[s.query_id] = {d: 1 for d in s.gold_docids}
    return {"questions": (questions, qrels), "steps": (steps, step_qrels)}


def build_indexes(world_dir: Path, out: Path, model: str, name: str) -> tuple[Path, Path]:
    from hopscotch.retriever.index.bm25 import BM25Index
    from hopscotch.retriever.index.encode import EncodeOptions, encode_corpus
    from hopscotch.retriever.index.faiss_index import build_faiss_index
    from hopscotch.retriever.io.corpus import read_corpus

    bm25_dir = out / "bm25"
    if not (bm25_dir / "docids.txt").exists():
        BM25Index.build(read_corpus(world_dir / "corpus.jsonl"), show_progress=False).save(bm25_dir)
    dense_dir = out / name
    result = encode_corpus(world_dir / "corpus.jsonl", model, dense_dir,
                           EncodeOptions(shard_size=1000, max_length=256, reasoning_aware=True))
    if result.meta is not None and not result.meta.faiss:
        build_faiss_index(dense_dir, spec="Flat", show_progress=False)
    print(f"{name}: sharded index in {dense_dir}")
    return bm25_dir, dense_dir


def run_systems(systems: dict, sets: dict, out: Path) -> dict:
    """Search every set with every ``name -> (searcher, reasoning_aware)``; returns evaluated results."""
    from hopscotch.retriever.evaluation.metrics import evaluate
    from hopscotch.retriever.io.runs import read_run, write_run
    from hopscotch.retriever.searchers import search_run

    results = {}
    for set_name, (queries, qrels) in sets.items():
        for name, (searcher, reasoning_aware) in systems.items():
            if set_name == "questions" and reasoning_aware:
                continue  # the questions carry no reasoning
            path = out / "runs" / f"{set_name}.{name}.trec"
            if not path.exists():
                write_run(path, search_run(searcher, queries, k=100, reasoning_aware=reasoning_aware), tag=name)
            results[(set_name, name)] = evaluate(read_run(path), qrels, METRICS)
    return results


def synthesize_tuples(world_dir: Path, out: Path, train_questions: int, bm25_dir: Path) -> Path:
    from hopscotch.data_synth import SynthConfig, SynthInputs, synthesize

    tuples = out / "tuples.jsonl"
    stats = synthesize(SynthInputs(world_dir, traces=[world_dir / "traces.jsonl"], bm25_index=bm25_dir), out=tuples,
                       config=SynthConfig(max_questions=train_questions, show_progress=False))
    print(f"DR-Synth: {stats.get('steps_kept', '?')} tuples from {stats.get('steps_read', '?')} steps "
          f"of {train_questions} training questions -> {tuples}")
    return tuples


def train_model(tuples: Path, out: Path, max_steps: int) -> Path:
    from hopscotch.retriever.training.trainer import train

    recipe = Path(__file__).resolve().parents[2] / "recipes" / "minilm_hotpot.yaml"
    overrides = [f"data.train={tuples}", f"train.max_steps={max_steps}", "model.passage_max_len=64",
                 "model.query_max_len=128", "train.batch_size=16", "train.encode_chunk_size=16",
                 "train.save_every=10", "train.lr=1e-4", "eval.every=0"]
    final = train(str(recipe) if recipe.exists() else None, out / "model", overrides, resume=True)
    print(f"trained model -> {final}")
    return Path(final)


def format_results(results: dict, sets: dict, comparisons: list[str]) -> str:
    from hopscotch.retriever.evaluation.metrics import compare_runs

    names = list(dict.fromkeys(name for _, name in results))
    header = ["system"] + [f"{s} {m}" for s in sets for m in METRICS]
    rows = []
    for name in names:
        row = [name]
        for s in sets:
            r = results.get((s, name))
            row += [f"{r.mean[m]:.4f}" if r else "-" for m in METRICS]
        rows.append(row)
    widths = [max(len(c) for c in col) for col in zip(header, *rows)]
    fmt = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths))  # noqa: E731
    lines = [fmt(header), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows]
    for pair in comparisons:
        a, b = pair.split(" vs ")
        if ("steps", a) in results and ("steps", b) in results:
            c = compare_runs(results[("steps", a)], results[("steps", b)], "ndcg@10")
            lines.append(f"steps nDCG@10, {b} - {a}: {c.delta:+.4f} (paired randomisation p={c.p_randomization:.4f}, "
                         f"t-test p={c.p_ttest:.4f}, {c.num_queries} steps)")
    return "\n".join(lines)


def run_demo(out: Path, docs: int, questions: int, seed: int, model: str, stage, train_steps: int = 40,
             train_fraction: float = 0.8) -> str:
    from hopscotch.retriever.io.common import write_json
    from hopscotch.retriever.io.queries import read_queries
    from hopscotch.retriever.searchers import build_searcher

    out.mkdir(parents=True, exist_ok=True)
    stage("1/6 world")
    world_dir = make_world(out, docs, questions, seed)
    qids = [q.qid for q in read_queries(world_dir / "queries.jsonl")]
    n_train = int(len(qids) * train_fraction)
    sets = eval_sets(world_dir, qids[n_train:])
    print(f"held out: {len(sets['questions'][0])} questions, {len(sets['steps'][0])} search steps")
    stage(f"2/6 BM25 index + sharded dense index ({model})")
    bm25_dir, base_dir = build_indexes(world_dir, out, model, "dense-base")
    stage("3/6 search: BM25, dense, hybrid")
    base = build_searcher("dense", index=base_dir, model=model)
    bm25 = build_searcher("bm25", bm25=bm25_dir, index=base_dir)
    hybrid = build_searcher("hybrid", bm25=bm25_dir, index=base_dir, model=model, fusion="rrf")
    systems = {"bm25": (bm25, False), "dense-base": (base, False), "hybrid-base": (hybrid, False),
               "dense-base+reasoning": (base, True)}
    results = run_systems(systems, sets, out)
    stage("4/6 DR-Synth on the training questions")
    tuples = synthesize_tuples(world_dir, out, n_train, bm25_dir)
    stage(f"5/6 train ({train_steps} steps, reasoning-aware)")
    final = train_model(tuples, out, train_steps)
    stage("6/6 index + search with the trained model")
    _, trained_dir = build_indexes(world_dir, out, str(final), "dense-trained")
    trained = build_searcher("dense", index=trained_dir, model=str(final))
    hybrid_t = build_searcher("hybrid", bm25=bm25_dir, index=trained_dir, model=str(final), fusion="rrf")
    results.update(run_systems({"dense-trained": (trained, False), "dense-trained+reasoning": (trained, True),
                                "hybrid-trained+reasoning": (hybrid_t, True)}, sets, out))
    write_json(out / "results.json", {f"{s}/{n}": r.mean for (s, n), r in results.items()})
    return format_results(results, sets, ["dense-base vs dense-base+reasoning",
                                          "dense-base+reasoning vs dense-trained+reasoning",
                                          "dense-trained vs dense-trained+reasoning"])
