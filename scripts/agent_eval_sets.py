"""``python scripts/agent_eval_sets.py [--write WORK]``: build every evaluation set of the agent ablation and
print its counts and first test query; with ``--write WORK``, write each set to ``WORK/sets/<name>/`` instead and
print one ``NAME=FOLDER::CORPUS`` spec a line (``hopscotch audit contamination --eval`` reads them).

A thin driver of :mod:`hopscotch_experiments.agent_data.eval_sets` (what each set holds, and why).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from hopscotch_experiments.agent_data.eval_sets import SET_NAMES, build_sets, write_sets


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--write", metavar="WORK", help="write the sets under WORK/sets/ and print their audit specs")
    p.add_argument("--sets", nargs="+", choices=SET_NAMES, default=list(SET_NAMES), help="the sets (default: all)")
    args = p.parse_args(argv)
    if args.write:
        for spec in write_sets(Path(args.write), args.sets):
            print(spec)
        return 0
    for name, es in build_sets(Path(tempfile.mkdtemp()), args.sets).items():
        print(name, es.counts, es.queries[len(es.tune)] if es.test else None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
