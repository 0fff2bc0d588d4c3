"""``hopscotch audit <kind>``: the audits of :mod:`hopscotch.retriever.audit`.

Each kind is a module of this package, ``retriever/commands/audit/<kind>.py`` (``ann_fidelity`` is ``audit
ann-fidelity``), with its parser's ``HELP`` and ``DESCRIPTION``, ``add_flags(parser)`` (its own flags) and
``run(args)``; they are found by listing the package, so adding an audit touches no list, and :func:`register` adds
each one's parser, ``--report`` and the output guard. Every audit writes its JSON report with
``--report PATH`` and prints its one-screen summary; the exit code is 2 when the audit fails (:mod:`.common`).
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from hopscotch.retriever.commands.audit.common import add_report_flag, guarded

#: the ``audit`` command's own help and description (each kind's module has its own)
HELP = ("audits: contamination, false negatives, near-duplicates, ANN fidelity, model conformance, reasoning "
        "perturbation")
DESCRIPTION = ("Check one silent failure of training or evaluating a retriever; each audit writes a JSON report "
               "(--report) and prints a one-screen summary; exit 2 when it fails.")


def audit_modules() -> list[str]:
    """The audit kinds' command modules of this package (all but :mod:`.common`), sorted."""
    here = Path(__file__).parent
    return sorted(m.name for m in pkgutil.iter_modules([str(here)]) if m.name != "common")


def register(sub) -> None:
    p = sub.add_parser("audit", help=HELP, description=DESCRIPTION)
    kinds = p.add_subparsers(dest="audit_kind", metavar="KIND", help="the audit to run (each has its own --help)")
    kinds.required = True

    for name in audit_modules():
        module = importlib.import_module(f"{__name__}.{name}")
        parser = kinds.add_parser(name.replace("_", "-"), help=module.HELP, description=module.DESCRIPTION)
        module.add_flags(parser)
        add_report_flag(parser)
        # every audit's outputs through the one output guard (--report, and what the module declares)
        parser.set_defaults(func=guarded(module.run, getattr(module, "outputs", None),
                                         getattr(module, "FINGERPRINT_IGNORE", ())))
