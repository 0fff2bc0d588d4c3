"""``python scripts/agent_data.py OUT_DIR``: the training trace files of the agent experiments' train
questions (``hotpot_traces.jsonl``, ``musique_traces.jsonl``, ``tongyi_traces.jsonl``, ``tongyi_qrels.tsv``).

A thin driver of :mod:`hopscotch_experiments.agent_data.training_traces` (what each file holds, and why); splits:
:mod:`hopscotch_experiments.agent_data.splits`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hopscotch_experiments.agent_data.training_traces import write_training_traces


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/agent_data.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("out", metavar="OUT_DIR", help="folder to write the trace files into")
    out = Path(parser.parse_args(argv).out)
    for name, n in write_training_traces(out).items():
        print(f"{out / name}: {n} steps")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
