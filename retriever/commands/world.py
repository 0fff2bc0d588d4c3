"""``hopscotch world --out DIR``: generate the embedded synthetic world (BEIR folder + traces.jsonl)."""

from __future__ import annotations

import time


def register(sub) -> None:
    p = sub.add_parser("world", help="generate the embedded synthetic world",
                       description="Generate a seeded synthetic knowledge graph with documents, multi-hop "
                                   "questions and scripted agent traces, as a BEIR folder plus traces.jsonl.")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--seed", type=int, default=13, help="random seed: the same seed gives the same world")
    p.add_argument("--docs", type=int, default=2000, help="number of documents")
    p.add_argument("--questions", type=int, default=200, help="number of multi-hop questions")
    p.set_defaults(func=run)


def run(args) -> int:
    from hopscotch.data_synth.world import build_world, write_world
    from hopscotch.retriever.errors import UsageError

    if args.docs < 50 or args.questions < 1:
        raise UsageError("--docs must be at least 50 and --questions at least 1")
    t0 = time.perf_counter()
    try:
        world = build_world(seed=args.seed, docs=args.docs, questions=args.questions)
    except RuntimeError as exc:
        raise UsageError(str(exc)) from None
    stats = write_world(world, args.out)
    print(f"world (seed {stats['seed']}): {stats['documents']:,} documents, {stats['questions']:,} questions "
          f"({stats['hops']['2']}/{stats['hops']['3']}/{stats['hops']['4']} with 2/3/4 steps), "
          f"{stats['trace_steps']:,} trace steps -> {args.out} in {time.perf_counter() - t0:.1f}s")
    return 0
