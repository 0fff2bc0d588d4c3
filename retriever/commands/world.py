"""``hopscotch world --out DIR``: generate the embedded synthetic world (BEIR folder + traces.jsonl)."""

from __future__ import annotations

import time

from hopscotch.data_synth.world import build_long_world, build_world, write_world
from hopscotch.retriever.commands.arg_groups import add_output_flags
from hopscotch.retriever.commands.flag_types import int_range, seed_int
from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.io.outputs import check_outputs, output_folder

#: the largest world the command builds (generation time grows faster than the size: ~20 s at 30,000 documents)
MAX_DOCS, MAX_QUESTIONS = 100_000, 20_000
#: the files write_world puts in --out (other files there are left alone)
WORLD_FILES = ("corpus.jsonl", "queries.jsonl", "qrels.tsv", "traces.jsonl", "world.json")


def register(sub) -> None:
    p = sub.add_parser("world", help="generate the embedded synthetic world",
                       description="Generate a seeded synthetic knowledge graph with documents, multi-hop "
                                   "questions and scripted agent traces, as a BEIR folder plus traces.jsonl.")
    add_output_flags(p, "output folder", required=True, what="world files")
    p.add_argument("--seed", type=seed_int, default=13, help="random seed: the same seed gives the same world")
    p.add_argument("--docs", type=int_range(50, MAX_DOCS), default=2000, help="number of documents (at least 50)")
    p.add_argument("--questions", type=int_range(1, MAX_QUESTIONS), default=200,
                   help="number of multi-hop questions")
    p.add_argument("--long-reasoning", action="store_true",
                   help="long-reasoning mode (data_synth/world/long.py): multi-section pages, 300-3,000-word agent "
                        "thinking per step (hypotheses, look-alikes, results as read, dead ends) and keyword "
                        "queries; same questions and gold documents (the default world is unchanged)")
    p.set_defaults(func=run)


def run(args) -> int:
    if args.docs < 50 or args.questions < 1:
        raise UsageError("--docs must be at least 50 and --questions at least 1")
    guard = check_outputs(vars(args), outputs=[output_folder(args.out, WORLD_FILES)])
    t0 = time.perf_counter()
    try:
        build = build_long_world if getattr(args, "long_reasoning", False) else build_world
        world = build(seed=args.seed, docs=args.docs, questions=args.questions)
    except RuntimeError as exc:
        raise UsageError(str(exc)) from None
    stats = write_world(world, args.out)
    guard.finish()
    print(f"world (seed {stats['seed']}): {stats['documents']:,} documents, {stats['questions']:,} questions "
          f"({stats['hops']['2']}/{stats['hops']['3']}/{stats['hops']['4']} with 2/3/4 steps), "
          f"{stats['trace_steps']:,} trace steps -> {args.out} in {time.perf_counter() - t0:.1f}s")
    if stats.get("long_reasoning"):
        r, pw = stats["reasoning_words"], stats["page_words"]
        print(f"long reasoning: {r['min']:,}-{r['max']:,} words a step (median {r['median']:,}); pages "
              f"{pw['min']:,}-{pw['max']:,} words (median {pw['median']:,})")
    return 0
