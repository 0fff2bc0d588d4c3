"""Are search runs bit-identical across two installs (before and after a refactor)?

    .venv/bin/python scripts/search_identity.py --hopscotch /path/to/other/.venv/bin/hopscotch \
        --inputs WORK/inputs --runs WORK/reference            # reference runs (also builds the inputs)
    .venv/bin/python scripts/search_identity.py --inputs WORK/inputs --runs WORK/candidate --compare WORK/reference

Logic in experiments/benchmarks/search_identity.py; prints one line per run: identical or DIFFERENT.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from hopscotch_experiments.benchmarks.common import shared_data_dir
from hopscotch_experiments.benchmarks.search_identity import build_inputs, compare, run_all

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--hopscotch", default=shutil.which("hopscotch") or "hopscotch", help="the install's CLI")
parser.add_argument("--inputs", required=True, help="query files and indexes (built here when missing)")
parser.add_argument("--runs", required=True, help="folder of the run files to write")
parser.add_argument("--queries", type=int, default=300, help="queries of each set")
parser.add_argument("--compare", help="a reference runs folder: cmp every run file against it")
args = parser.parse_args()
build_inputs(args.hopscotch, shared_data_dir(Path(__file__).resolve().parents[1]), Path(args.inputs), args.queries)
run_all(args.hopscotch, Path(args.inputs), Path(args.runs))
if args.compare:
    results = compare(Path(args.compare), Path(args.runs))
    for name, same in results:
        print(f"{name}: {'identical' if same else 'DIFFERENT'}")
    sys.exit(0 if all(same for _, same in results) else 1)
