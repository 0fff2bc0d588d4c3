"""``hopscotch train --recipe R --output DIR [key=value ...]``: train a dual encoder; the model lands in DIR/final.

The same flags as the root ``train.py``; for several processes use ``accelerate launch train.py ...``.
"""

from __future__ import annotations

from hopscotch.retriever.commands.audit.contamination import add_train_flags, guard_training


def register(sub) -> None:
    from hopscotch.retriever.training.trainer import build_arg_parser

    p = sub.add_parser("train", help="train a reasoning-aware dual encoder from a recipe",
                       description="Train a dual encoder from a recipe YAML; any recipe key can be overridden "
                                   "as key=value (e.g. train.lr=3e-5 data.train=tuples.jsonl). The model is "
                                   "written to OUTPUT/final; OUTPUT/train_manifest.json records the run, and "
                                   "--resume continues only the same run.")
    build_arg_parser(p)
    add_train_flags(p)  # --eval-sets, --allow-contamination, --max-contaminated
    p.set_defaults(func=run, stray_words="overrides")  # key=value may come before, between or after the flags


def run(args) -> int:
    from hopscotch.retriever.training.trainer import train

    guard_training(args)  # with --eval-sets: refuses contaminated training data (exit 2)
    print(train(args.recipe, args.output, args.overrides, resume=args.resume, overwrite=args.overwrite))
    return 0
