"""The flags several commands share, each declared here once; a command passes what differs (its help text,
its default), never a second declaration.

* :func:`add_output_flags`: the output flag (``--out``; ``--json`` of ``eval``, ``compare``, ``eval-agent``)
  and ``--overwrite`` (:func:`add_overwrite_flag`), the one rule of the output boundary
  (:func:`hopscotch.retriever.io.outputs.check_outputs`): another run's outputs are refused without it;
* :func:`add_k_flag`: ``--k``, the documents retrieved per query (``search``, ``replay``, ``tune-fusion``,
  ``serve --mcp``, ``audit perturbation``; recall cutoffs for ``audit ann-fidelity``);
* :func:`add_reasoning_flag`: ``--reasoning``, encode the queries reasoning-aware (``search``, ``replay``,
  ``audit ann-fidelity``);
* :func:`add_device_flag`: ``--device``, the torch device of an encoder (``index``, ``audit model``; checked
  by :func:`~hopscotch.retriever.commands.flag_types.check_device`).

>>> import argparse
>>> p = argparse.ArgumentParser()
>>> add_output_flags(p, "TREC run file to write", required=True, what="run file")   # --out, --overwrite
>>> add_k_flag(p, default=100, help="documents per query")
>>> args = p.parse_args(["--out", "run.trec", "--k", "10"])
>>> args.out, args.overwrite, args.k
('run.trec', False, 10)
>>> report = argparse.ArgumentParser()                  # eval, compare, eval-agent: --json, --overwrite
>>> add_output_flags(report, "write the report as JSON here", flag="--json", dest="json_out", what="--json file")
>>> report.parse_args(["--json", "metrics.json"]).json_out
'metrics.json'
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hopscotch.retriever.commands.flag_types import positive_int

#: the ``--overwrite`` help of a command that does not say more: ``what`` names its outputs
OVERWRITE_HELP = ("replace existing {what} that another run (other inputs or flags, or another tool) made; without "
                  "it they are refused, while rerunning the same command is allowed")


def add_overwrite_flag(parser, what: str = "outputs", help: str | None = None) -> None:
    """The ``--overwrite`` flag of a command that writes outputs (the rule is
    :func:`~hopscotch.retriever.io.outputs.check_outputs`'); ``help`` replaces the usual text built from ``what``."""
    parser.add_argument("--overwrite", action="store_true", help=help or OVERWRITE_HELP.format(what=what))


def add_output_flags(parser, help: str, *, flag: str = "--out", dest: str | None = None, required: bool = False,
                     default: str | None = None, what: str | None = "outputs",
                     overwrite_help: str | None = None) -> None:
    """The output flag ``flag`` (a path: ``--out``, or ``--json`` with ``dest="json_out"``) followed by
    ``--overwrite`` (:func:`add_overwrite_flag` with ``what`` / ``overwrite_help``).

    ``what=None`` declares the output flag alone, for a command whose outputs do not go through
    :func:`~hopscotch.retriever.io.outputs.check_outputs` (so an ``--overwrite`` would change nothing)."""
    spec: dict[str, Any] = {"help": help}
    if dest is not None:
        spec["dest"] = dest
    if required:
        spec["required"] = True
    if default is not None:
        spec["default"] = default
    parser.add_argument(flag, **spec)
    if what is not None or overwrite_help is not None:
        add_overwrite_flag(parser, what or "outputs", overwrite_help)


def add_k_flag(parser, *, help: str, default: Any = None, type: Callable[[str], Any] = positive_int) -> None:
    """``--k``: how many documents a query retrieves (``type`` :func:`positive_int`, or ``cutoff_int`` where
    ``k`` is also a metric's cutoff; ``default`` None: the command derives it)."""
    parser.add_argument("--k", type=type, default=default, help=help)


def add_reasoning_flag(parser, help: str) -> None:
    """``--reasoning``: encode the queries reasoning-aware, from their reasoning (and other context) fields in
    the model's query input variant; ``help`` says where a command's queries carry them."""
    parser.add_argument("--reasoning", action="store_true", help=help)


def add_device_flag(parser, help: str) -> None:
    """``--device``: the torch device an encoder runs on (None: the command picks one); commands check it with
    :func:`~hopscotch.retriever.commands.flag_types.check_device` before loading a model."""
    parser.add_argument("--device", help=help)


def arg_paths(args, *names: str) -> list:
    """The values of the flags ``names`` that are set (lists flattened later), for ``check_outputs(inputs=)``."""
    return [getattr(args, name, None) for name in names]
