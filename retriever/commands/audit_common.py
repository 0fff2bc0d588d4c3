"""What every ``hopscotch audit <kind>`` shares: the ``--report`` flag and the way it ends (summary, JSON, exit code)."""

from __future__ import annotations

import sys


def add_report_flag(parser) -> None:
    """``--report PATH``: where the JSON report goes (the summary is printed either way)."""
    parser.add_argument("--report", metavar="PATH", help="write the JSON report here")


def finish(report, args) -> int:
    """Print the summary, write ``--report``, return the exit code (2 when the audit failed)."""
    print(report.summary_text())
    if getattr(args, "report", None):
        report.write(args.report)
        print(f"report written to {args.report}", file=sys.stderr)
    return report.exit_code
