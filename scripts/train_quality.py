"""Quality check of the trainer: MiniLM trained on DR-Synth tuples of HotpotQA/IRCoT questions 1-400,
evaluated on questions 401-500 against the full corpus, base vs trained and reasoning-aware vs query-only.

    flock /tmp/hopscotch-heavy.lock .venv/bin/python scripts/train_quality.py --work /tmp/hopscotch-quality

A thin driver: the sets, the training and the report are :mod:`hopscotch_experiments.ablations.train_quality`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from hopscotch_experiments.ablations.train_quality import run_quality

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", default="/tmp/hopscotch-quality", help="scratch folder (tuples, runs)")
    parser.add_argument("--recipe", default=str(ROOT / "recipes" / "minilm_hotpot.yaml"))
    parser.add_argument("--skip-train", action="store_true", help="evaluate an existing WORK/run")
    parser.add_argument("--dims", type=int, nargs="+", default=[],
                        help="also evaluate at these Matryoshka prefixes, e.g. 256 128 64")
    parser.add_argument("--reference", help="another trained model folder to evaluate and compare with (e.g. the "
                        "fp32 run of a bf16 one)")
    parser.add_argument("--json", help="write all numbers here")
    parser.add_argument("overrides", nargs="*", help="recipe overrides (key=value)")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("OMP_NUM_THREADS", "2")
    import torch

    from hopscotch.retriever.io.common import write_json

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    report = run_quality(Path(args.work), args.recipe, args.overrides, skip_train=args.skip_train,
                         dims=tuple(args.dims), reference=args.reference)
    print(json.dumps(report, indent=2))
    if args.json:
        write_json(args.json, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
