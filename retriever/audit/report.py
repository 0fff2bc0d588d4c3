"""What every audit returns: a verdict, a one-screen summary and the details, written as JSON.

A command writes the report, prints its summary and exits with ``report.exit_code`` (2 on "fail", else 0):

>>> report = AuditReport("contamination", "fail", ["5 of 40 eval questions appear in the training tuples"],
...                      {"per_set": {"dev": 5}})
>>> report.write("reports/contamination.json")
>>> report.exit_code
2
>>> print(report.summary_text())
audit contamination: FAIL
...5 of 40 eval questions appear in the training tuples...
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field

from hopscotch.retriever.io.common import write_json

VERDICTS = ("ok", "warning", "fail")


@dataclass
class AuditReport:
    """:param kind: the audit (``contamination``, ...); :param verdict: ``ok``, ``warning`` (printed, exit 0) or
    ``fail`` (exit 2); :param summary: the lines of the one-screen summary; :param details: JSON-able findings
    (counts, rates, examples, settings)."""

    kind: str
    verdict: str
    summary: list[str]
    details: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict {self.verdict!r}: use one of {VERDICTS}")

    @property
    def exit_code(self) -> int:
        return 2 if self.verdict == "fail" else 0

    def summary_text(self) -> str:
        head = f"audit {self.kind}: {self.verdict.upper()}"
        return "\n".join([head, *(f"  {line}" for line in self.summary)])

    def to_json(self) -> dict:
        return asdict(self)

    def write(self, path: str | os.PathLike) -> None:
        """The report as JSON, atomically."""
        write_json(path, self.to_json())
