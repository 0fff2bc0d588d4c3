"""``hopscotch audit model``: does every loader encode a saved model as it encoded itself at save time?

    hopscotch audit model M [--url URL] [--write-golden] [--tol 1e-5] [--device D] [--report PATH]

Re-encodes the folder's golden vectors (``golden_vectors.json``, written by every save) with Hopscotch's search
path, its reload path and plain sentence-transformers, and names the setting (pooling, padding side,
prefix/prompt, normalisation, max length, query input) that makes one differ:
:mod:`hopscotch.retriever.audit.model_conformance`. Exit 2 on a mismatch beyond ``--tol``.
"""

from __future__ import annotations

from hopscotch.retriever.audit.model_conformance import audit_model
from hopscotch.retriever.commands.arg_groups import add_device_flag
from hopscotch.retriever.commands.audit.common import finish
from hopscotch.retriever.commands.flag_types import check_device, positive_float

HELP = ("model conformance: a saved model's golden vectors re-encoded by Hopscotch, sentence-transformers and a "
        "service; exit 2 on a mismatch")
DESCRIPTION = ("Re-encode the golden vectors a saved model folder recorded at save time through every loader; on a "
               "mismatch beyond --tol (exit 2) name the setting that reproduces it.")


def add_flags(p) -> None:
    p.add_argument("model", help="a saved model folder (or a training output folder, or a Hub id in the cache)")
    p.add_argument("--url", help="a running 'hopscotch serve' (noted: the service has no embedding endpoint)")
    p.add_argument("--write-golden", action="store_true",
                   help="record golden vectors now for a folder saved without them (then audit it)")
    p.add_argument("--tol", type=positive_float, default=1e-5,
                   help="largest max-abs difference that passes (default 1e-5; raised to the save's precision "
                        "when it was not float32)")
    add_device_flag(p, "device to encode on (default: cuda when available, else cpu)")


def run(args) -> int:
    if args.device:
        check_device(args.device)
    report = audit_model(args.model, url=args.url, write_golden=args.write_golden, tol=args.tol, device=args.device)
    return finish(report, args)
