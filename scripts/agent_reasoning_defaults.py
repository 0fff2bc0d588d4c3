"""The dense model's reasoning defaults (query input variant, late-fusion weights, word gate) chosen by the selection
rule (real agent calls decide, every other set guards; tune questions only), optionally recorded into the model folder.

    .venv/bin/python scripts/agent_reasoning_defaults.py --work /tmp/hopscotch-ablation --trained DIR [--record]

Prints the rule's report (the pick's and the runner-up's objective, each guard's delta and p), the leading settings,
and the pick on the held-out test questions (paired tests against the query alone). ``--record`` writes the pick into DIR's ``hopscotch_config.json`` (``query_input``,
``late_fusion``, ``late_fusion_max_words``, ``late_fusion_long``: what ``search --reasoning``
and ``serve`` apply; the weights do not depend on them) with the rule, its sets and split (``defaults_selection``). A thin driver of
:mod:`hopscotch_experiments.ablations.reasoning_defaults`; the dense indexes are the agent ablation's (``--work``).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from hopscotch_experiments.agent_data.eval_sets import GUARDS, OBJECTIVE

VOTING = ",".join(OBJECTIVE + GUARDS)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", default="/tmp/hopscotch-ablation", help="the ablation's cache folder")
    parser.add_argument("--trained", required=True, help="the trained model folder")
    parser.add_argument("--sets", default=VOTING, help="dev sets: the objective and guard sets by default")
    parser.add_argument("--record", action="store_true", help="write the pick into the model's hopscotch_config.json")
    parser.add_argument("--json", help="write the pick and the lines here")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch

    from hopscotch_experiments.ablations.reasoning_defaults import choose, dense_runs, record
    from hopscotch.retriever.io.common import write_json

    torch.set_num_threads(args.threads)
    model = str(Path(args.trained).resolve())
    sets = dense_runs(Path(args.work), [s.strip() for s in args.sets.split(",") if s.strip()], model)
    lines, pick = choose(sets)
    print("\n".join(lines))
    if args.json:
        write_json(args.json, {"pick": pick, "lines": lines})
    if args.record:
        record(model, pick)
        print(f"recorded in {model}/hopscotch_config.json: {pick}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
