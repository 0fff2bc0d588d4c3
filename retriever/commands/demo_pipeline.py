"""The demo's stages as plain functions (part of the CLI, so it may import ``data_synth``).

Split: the world's first ``train_fraction`` of questions feed DR-Synth and training; the rest are held
out. Two held-out evaluation sets: the questions themselves, and every search step of their agent
traces (query + reasoning, graded against the step's own gold documents), written to ``OUT/eval/`` (queries and
qrels) with the runs in ``OUT/runs/``, so that the ``hopscotch eval`` commands the demo prints rebuild its table.
The trained model keeps one document length (the recipe's ``passage_max_len``, what its folder tells
sentence-transformers and what its index is built at), and only its final folder is kept.

Reuse: ``OUT/demo_manifest.json`` (:class:`Stages`) records, per stage, what it is run from: the demo's
settings, the content fingerprints of its input files and the model folder's files. A stage whose record
differs from what it would be run from now has its outputs removed and runs again (saying why), and since
every stage's record holds its inputs' content, everything downstream of a change reruns too; a stage with
an unchanged record resumes or is skipped. So a rerun with another model, world or step count never shows
the numbers of an older one.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from hopscotch.data_synth import SynthConfig, SynthInputs, synthesize
from hopscotch.data_synth.pipeline import default_stats_path
from hopscotch.data_synth.traces import read_traces
from hopscotch.data_synth.world import build_world, write_world
from hopscotch.retriever.evaluation.metrics import compare_runs, evaluate
from hopscotch.retriever.index.bm25 import BM25Index
from hopscotch.retriever.index.encode import EncodeOptions, encode_corpus
from hopscotch.retriever.index.faiss_index import build_faiss_index
from hopscotch.retriever.io.common import write_json
from hopscotch.retriever.io.corpus import read_corpus
from hopscotch.retriever.io.fingerprint import digest, file_fingerprint, manifest_differences, model_fingerprint
from hopscotch.retriever.io.qrels import read_qrels, write_qrels
from hopscotch.retriever.io.queries import Query, read_queries, write_queries
from hopscotch.retriever.io.runs import read_run, write_run
from hopscotch.retriever.model.loading import resolve_model_path
from hopscotch.retriever.searchers import build_searcher, search_run
from hopscotch.retriever.training.checkpoint import checkpoints

METRICS = ["ndcg@10", "recall@100"]
#: the trained model's document length (training, its folder, its index): the world's documents all fit
DOCUMENT_TOKENS = 128
STAGES_FILE = "demo_manifest.json"
WORLD_FILES = ("corpus.jsonl", "queries.jsonl", "qrels.tsv", "traces.jsonl")


class Stages:
    """``OUT/demo_manifest.json``: ``{stage: record}`` of the stages started in a demo folder."""

    def __init__(self, out: Path):
        self.path = out / STAGES_FILE
        self.records = json.loads(self.path.read_text()) if self.path.is_file() else {}

    def enter(self, name: str, record: dict, outputs: list[Path]) -> bool:
        """Start stage ``name`` run from ``record``: when the recorded one differs (or none is recorded),
        remove ``outputs`` first. Returns whether the stage's record was unchanged (its outputs may be reused)."""
        record = json.loads(json.dumps(record))
        old = self.records.get(name)
        if old == record:
            return True
        stale = [p for p in outputs if p.exists()]
        if stale:
            why = manifest_differences(old, record, then="before") if old is not None else ["not recorded"]
            print(f"{name}: {'; '.join(why[:2])}: removing {', '.join(p.name for p in stale)} to rebuild")
            for p in stale:
                shutil.rmtree(p) if p.is_dir() else p.unlink()
        self.records[name] = record
        write_json(self.path, self.records)
        return False

    def digest(self, name: str) -> str:
        """One sha256 of stage ``name``'s record, for the records of the stages that use its outputs."""
        return digest(self.records[name])


def world_record(world_dir: Path) -> dict:
    """The content fingerprints of the world's files."""
    return {name: file_fingerprint(world_dir / name) for name in WORLD_FILES}


def model_record(model: str) -> dict:
    """A model (alias, folder or Hub id) as its resolved folder and that folder's files."""
    path = Path(resolve_model_path(model)).resolve()
    return {"path": str(path), "files": model_fingerprint(path)}


def make_world(out: Path, docs: int, questions: int, seed: int, stages: Stages | None = None) -> Path:
    world_dir = out / "world"
    fresh = stages is None or stages.enter("world", {"docs": docs, "questions": questions, "seed": seed}, [world_dir])
    if fresh and (world_dir / "world.json").exists():
        print(f"reusing {world_dir}")
        return world_dir
    stats = write_world(build_world(seed=seed, docs=docs, questions=questions), world_dir)
    print(f"{stats['documents']} documents, {stats['questions']} questions, {stats['trace_steps']} trace steps")
    return world_dir


def eval_sets(world_dir: Path, held_out: list[str]) -> dict[str, tuple[list[Query], dict]]:
    """``{"questions": (queries, qrels), "steps": (queries with reasoning, per-step qrels)}``."""
    keep = set(held_out)
    questions = [q for q in read_queries(world_dir / "queries.jsonl") if q.qid in keep]
    qrels = {q: d for q, d in read_qrels(world_dir / "qrels.tsv").items() if q in keep}
    steps, step_qrels = [], {}
    for s in read_traces([world_dir / "traces.jsonl"], "world"):
        if s.question_id in keep:
            steps.append(Query(s.query, s.reasoning, qid=s.query_id))
            step_qrels[s.query_id] = {d: 1 for d in s.gold_docids}
    return {"questions": (questions, qrels), "steps": (steps, step_qrels)}


def build_indexes(world_dir: Path, out: Path, model: str, name: str, stages: Stages) -> tuple[Path, Path]:
    bm25_dir, corpus = out / "bm25", file_fingerprint(world_dir / "corpus.jsonl")
    if not stages.enter("bm25", {"corpus": corpus}, [bm25_dir]) or not (bm25_dir / "docids.txt").exists():
        BM25Index.build(read_corpus(world_dir / "corpus.jsonl"), show_progress=False).save(bm25_dir)
    dense_dir = out / name
    record = {"corpus": corpus, "corpus_path": str((world_dir / "corpus.jsonl").resolve()),
              "model": model_record(model), "max_length": "the model's passage length"}
    stages.enter(name, record, [dense_dir])  # unchanged: encode_corpus resumes or finds the index done
    # max_length None: the model's own passage length (a trained model's, else 256), as `hopscotch index` takes it
    result = encode_corpus(world_dir / "corpus.jsonl", model, dense_dir,
                           EncodeOptions(shard_size=1000, max_length=None, reasoning_aware=True))
    if result.meta is not None and not result.meta.faiss:
        build_faiss_index(dense_dir, spec="Flat", show_progress=False)
    print(f"{name}: sharded index in {dense_dir}")
    return bm25_dir, dense_dir


def run_systems(systems: dict, sets: dict, out: Path, stages: Stages, record: dict) -> dict:
    """Search every set with every ``system -> (searcher, reasoning_aware, stages it is built from)``; returns
    evaluated results. A system's run files are reused only when ``record`` (the evaluation sets) and the
    records of the stages its searcher is built from are those they were written from."""
    for system, (_, _, built_from) in systems.items():
        stages.enter(f"search {system}", record | {s: stages.digest(s) for s in built_from},
                     [out / "runs" / f"{s}.{system}.trec" for s in sets])
    results = {}
    for set_name, (queries, qrels) in sets.items():
        for system, (searcher, reasoning_aware, _) in systems.items():
            if set_name == "questions" and reasoning_aware:
                continue  # the questions carry no reasoning
            path = out / "runs" / f"{set_name}.{system}.trec"
            if not path.exists():
                searched = [q.with_reasoning(reasoning_aware) for q in queries]
                write_run(path, search_run(searcher, searched, k=100), tag=system)
            results[(set_name, system)] = evaluate(read_run(path), qrels, METRICS)
    return results


def synthesize_tuples(world_dir: Path, out: Path, train_questions: int, bm25_dir: Path, stages: Stages | None = None,
                      seed: int = 13) -> Path:
    tuples, stats_path = out / "tuples.jsonl", default_stats_path(out / "tuples.jsonl")
    record = {"world": world_record(world_dir), "bm25": stages.digest("bm25") if stages else None,
              "train_questions": train_questions, "seed": seed}
    if stages is not None and stages.enter("synth", record, [tuples, stats_path, out / "tuples.jsonl.parts"]) \
            and tuples.is_file() and stats_path.is_file():
        print(f"reusing {tuples}")
        return tuples
    stats = synthesize(SynthInputs(world_dir, traces=[world_dir / "traces.jsonl"], bm25_index=bm25_dir), out=tuples,
                       config=SynthConfig(max_questions=train_questions, seed=seed, show_progress=False))
    print(f"DR-Synth: {stats.get('steps_kept', '?')} tuples from {stats.get('steps_read', '?')} steps "
          f"of {train_questions} training questions -> {tuples}")
    return tuples


def train_model(tuples: Path, out: Path, max_steps: int, model: str = "minilm", stages: Stages | None = None) -> Path:
    from hopscotch.retriever.training.trainer import train

    run_dir = out / "model"
    recipe = Path(__file__).resolve().parents[2] / "recipes" / "minilm_hotpot.yaml"
    record = {"tuples": file_fingerprint(tuples), "model": model_record(model), "steps": max_steps,
              "recipe": file_fingerprint(recipe) if recipe.exists() else None, "document_tokens": DOCUMENT_TOKENS}
    if stages is not None and stages.enter("train", record, [run_dir]) and (run_dir / "train_summary.json").is_file():
        print(f"reusing the trained model {run_dir / 'final'}")
        return run_dir / "final"
    # documents trained, saved and indexed at 128 tokens: every document of the world fits (the longest ~100)
    overrides = [f"data.train={tuples}", f"model.name={model}", f"train.max_steps={max_steps}",
                 f"model.passage_max_len={DOCUMENT_TOKENS}", "model.query_max_len=128", "train.batch_size=16",
                 "train.encode_chunk_size=16", "train.save_every=10", "train.lr=1e-4", "eval.every=0"]
    final = train(str(recipe) if recipe.exists() else None, run_dir, overrides, resume=True)

    for done in checkpoints(run_dir):  # a finished run keeps only its final model (checkpoints: a killed one's resume)
        shutil.rmtree(done)
    print(f"trained model -> {final}")
    return Path(final)


def write_eval_sets(sets: dict, out: Path) -> dict[str, tuple[Path, Path]]:
    """The held-out sets as files ``hopscotch eval`` reads: ``OUT/eval/SET.queries.jsonl`` (the steps with their
    reasoning) and ``OUT/eval/SET.qrels.tsv``; returns ``{set: (queries, qrels)}``."""
    paths = {}
    for name, (queries, qrels) in sets.items():
        paths[name] = (out / "eval" / f"{name}.queries.jsonl", out / "eval" / f"{name}.qrels.tsv")
        paths[name][0].parent.mkdir(parents=True, exist_ok=True)
        write_queries(paths[name][0], queries)
        write_qrels(paths[name][1], qrels)
    return paths


def eval_commands(results: dict, files: dict[str, tuple[Path, Path]], out: Path, comparisons: list[str]) -> list[str]:
    """The ``hopscotch eval`` commands that give each cell of the table (and each paired test) from the files the
    demo wrote."""
    metrics = ",".join(METRICS)
    lines = []
    for set_name, system in results:
        lines.append(f"hopscotch eval --run {out / 'runs' / f'{set_name}.{system}.trec'} --qrels "
                     f"{files[set_name][1]} --metrics {metrics}")
    for pair in comparisons:
        a, b = pair.split(" vs ")
        if ("steps", a) in results and ("steps", b) in results:
            lines.append(f"hopscotch eval --run {out / 'runs' / f'steps.{a}.trec'} --compare "
                         f"{out / 'runs' / f'steps.{b}.trec'} --qrels {files['steps'][1]} --metrics ndcg@10")
    return lines


def format_results(results: dict, sets: dict, comparisons: list[str]) -> str:
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
    fmt = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths))
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
    out.mkdir(parents=True, exist_ok=True)
    stages = Stages(out)
    stage("1/6 world")
    world_dir = make_world(out, docs, questions, seed, stages)
    world = world_record(world_dir)
    qids = [q.qid for q in read_queries(world_dir / "queries.jsonl")]
    n_train = int(len(qids) * train_fraction)
    sets = eval_sets(world_dir, qids[n_train:])
    files = write_eval_sets(sets, out)
    print(f"held out: {len(sets['questions'][0])} questions, {len(sets['steps'][0])} search steps "
          f"(queries and qrels in {out / 'eval'})")
    stage(f"2/6 BM25 index + sharded dense index ({model})")
    bm25_dir, base_dir = build_indexes(world_dir, out, model, "dense-base", stages)
    stage("3/6 search: BM25, dense, hybrid")
    base = build_searcher("dense", index=base_dir, model=model)
    bm25 = build_searcher("bm25", bm25=bm25_dir, index=base_dir)
    hybrid = build_searcher("hybrid", bm25=bm25_dir, index=base_dir, model=model, fusion="rrf")
    systems = {"bm25": (bm25, False, ["bm25"]), "dense-base": (base, False, ["dense-base"]),
               "hybrid-base": (hybrid, False, ["bm25", "dense-base"]),
               "dense-base+reasoning": (base, True, ["dense-base"])}
    searched = {"world": world, "held_out": n_train}
    results = run_systems(systems, sets, out, stages, searched)
    stage("4/6 DR-Synth on the training questions")
    tuples = synthesize_tuples(world_dir, out, n_train, bm25_dir, stages, seed)
    stage(f"5/6 train ({train_steps} steps, reasoning-aware)")
    final = train_model(tuples, out, train_steps, model, stages)
    stage("6/6 index + search with the trained model")
    _, trained_dir = build_indexes(world_dir, out, str(final), "dense-trained", stages)
    trained = build_searcher("dense", index=trained_dir, model=str(final))
    hybrid_t = build_searcher("hybrid", bm25=bm25_dir, index=trained_dir, model=str(final), fusion="rrf")
    results.update(run_systems({"dense-trained": (trained, False, ["dense-trained"]),
                                "dense-trained+reasoning": (trained, True, ["dense-trained"]),
                                "hybrid-trained+reasoning": (hybrid_t, True, ["bm25", "dense-trained"])},
                               sets, out, stages, searched))
    write_json(out / "results.json", {f"{s}/{n}": r.mean for (s, n), r in results.items()})
    comparisons = ["dense-base vs dense-base+reasoning", "dense-base+reasoning vs dense-trained+reasoning",
                   "dense-trained vs dense-trained+reasoning"]
    commands = eval_commands(results, files, out, comparisons)
    return (format_results(results, sets, comparisons) + "\n\nthe table from the files, cell by cell (and the "
            "paired tests):\n" + "\n".join(f"  {c}" for c in commands))
