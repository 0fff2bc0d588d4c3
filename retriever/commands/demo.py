"""``hopscotch demo``: the main job on the embedded world, end to end, in minutes on a laptop CPU.

Stages (each reused when it last ran from the same settings, inputs and model, so a killed demo resumes; one
whose settings, inputs or model changed is rebuilt, and so is everything after it):
world -> BM25 + sharded dense index (base MiniLM) -> BM25 / dense / hybrid search -> DR-Synth on the
training questions -> brief reasoning-aware training -> index + search with the trained model -> table of
nDCG@10 / Recall@100 on held-out questions and held-out search steps, with paired tests.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from hopscotch.retriever.commands.arg_groups import add_output_flags
from hopscotch.retriever.commands.demo_pipeline import run_demo
from hopscotch.retriever.commands.flag_types import int_range, positive_int, seed_int
from hopscotch.retriever.commands.world import MAX_DOCS, MAX_QUESTIONS
from hopscotch.retriever.io.outputs import check_outputs, output_folder


def register(sub) -> None:
    p = sub.add_parser("demo", help="run the main job on the embedded world", description=__doc__.split("\n\n")[1],
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_output_flags(p, "working folder (reused: stages run from the same settings and inputs are skipped, the "
                        "others rebuilt; see OUT/demo_manifest.json)", default="demo_out",
                     overwrite_help="work in an --out folder that another hopscotch command made (refused without it)")
    p.add_argument("--docs", type=int_range(50, MAX_DOCS), default=3000,
                   help="documents of the generated world (at least 50)")
    p.add_argument("--questions", type=int_range(5, MAX_QUESTIONS), default=300,
                   help="multi-hop questions of the world (80%% train, 20%% held out; at least 5)")
    p.add_argument("--seed", type=seed_int, default=13, help="seed of the world, DR-Synth and training")
    p.add_argument("--model", default="minilm", help="base encoder (alias or folder)")
    p.add_argument("--train-steps", type=positive_int, default=40, help="optimizer steps of the brief training")
    p.set_defaults(func=run)


def _stage(name: str):
    print(f"\n== {name}", flush=True)
    return time.perf_counter()


def run(args) -> int:
    guard = check_outputs(vars(args), outputs=[output_folder(args.out, resumable=True)])  # its stages: demo_manifest.json
    t0 = time.perf_counter()
    table = run_demo(Path(args.out), docs=args.docs, questions=args.questions, seed=args.seed,
                     model=args.model, stage=_stage,
                     train_steps=args.train_steps)
    guard.finish()
    print(f"\n{table}\n\ndemo finished in {time.perf_counter() - t0:.0f}s; outputs in {args.out}")
    return 0
