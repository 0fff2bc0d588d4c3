"""What every ``hopscotch audit <kind>`` shares: the ``--report`` / ``--overwrite`` flags, the one output guard every
audit's outputs go through, and the way it ends (summary, JSON, exit code)."""

from __future__ import annotations

import os
import sys

from hopscotch.retriever.commands.arg_groups import add_overwrite_flag
from hopscotch.retriever.io.outputs import check_outputs

#: flags whose values an audit writes (never counted as its inputs)
OUTPUT_FLAGS = ("report", "out", "state", "clean")


def add_report_flag(parser) -> None:
    """``--report PATH``: where the JSON report goes (the summary is printed either way); ``--overwrite``: replace
    an earlier run's outputs made with other inputs or settings."""
    parser.add_argument("--report", metavar="PATH", help="write the JSON report here")
    if "--overwrite" not in parser._option_string_actions:   # an output flag group may have added it
        add_overwrite_flag(parser, "audit outputs (--report and the audit's own)")


def _paths_in(value) -> list[str]:
    """The existing paths a flag value names: the value itself, or an eval spec's ``NAME=FOLDER::CORPUS`` parts."""
    values = value if isinstance(value, (list, tuple)) else [value]
    out = []
    for v in values:
        if not isinstance(v, (str, os.PathLike)):
            continue
        v = str(v)
        parts = [v] + ([p for p in v.split("=", 1)[1].split("::") if p] if "=" in v else [])
        out += [p for p in parts if p and os.path.exists(p)]
    return out


def audit_inputs(args) -> list[str]:
    """Every existing file or folder named by a flag that is not an output flag: what the audit reads."""
    return [p for dest, value in sorted(vars(args).items()) if dest not in OUTPUT_FLAGS and not dest.startswith("_")
            for p in _paths_in(value)]


def guarded(run, outputs_of=None, ignore=()):
    """``run(args)`` behind the output guard (:func:`hopscotch.retriever.io.outputs.check_outputs`): ``--report``
    and the outputs ``outputs_of(args)`` declares are checked against the audit's inputs and what is on disk before
    any work (an output onto an input, or over another run's output without ``--overwrite``, is refused with one
    line) and recorded when the audit has run. ``ignore``: flags left out of the fingerprint (``--fresh``)."""
    def wrapped(args) -> int:
        outputs = [getattr(args, "report", None), *(outputs_of(args) if outputs_of else [])]
        guard = check_outputs(vars(args), outputs=outputs, inputs=audit_inputs(args),
                              command=f"audit {getattr(args, 'audit_kind', '')}".strip(), ignore=ignore)
        code = run(args)
        guard.finish()
        return code

    wrapped.__wrapped__ = run
    return wrapped


def finish(report, args) -> int:
    """Print the summary, write ``--report``, return the exit code (2 when the audit failed)."""
    print(report.summary_text())
    if getattr(args, "report", None):
        report.write(args.report)
        print(f"report written to {args.report}", file=sys.stderr)
    return report.exit_code
