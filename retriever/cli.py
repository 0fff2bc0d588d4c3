"""The ``hopscotch`` command line.

Each subcommand lives in ``retriever/commands/<name>.py`` (``audit``, whose kinds are subcommands of their own: the
package ``retriever/commands/audit/``) with ``register(subparsers)``, which adds its parser and sets ``func`` (and
``stray_words``, the name of a positional list that also takes words placed after a later flag: ``train``'s
``KEY=VALUE`` overrides).
User-facing errors (:class:`~hopscotch.retriever.errors.HopscotchError`, including
:class:`~hopscotch.retriever.errors.FormatError`) print one line on stderr and exit with code 2.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from importlib.metadata import PackageNotFoundError, version

from hopscotch.retriever.errors import HopscotchError

COMMAND_MODULES = [
    "world", "bm25_index", "index", "search", "eval", "compare", "tune_fusion", "synth", "train", "serve",
    "eval_agent", "replay", "demo", "audit",
]


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's own errors: one line, exit 2
        self.exit(2, f"{self.prog}: error: {message}\n")

    def _get_values(self, action, arg_strings):
        """An empty (or blank) value is refused for every flag and positional, unless its action allows one
        (``action.allow_empty``: an instruction prefix may be empty)."""
        if not getattr(action, "allow_empty", False) and action.nargs != 0 and not isinstance(
                action, argparse._SubParsersAction):
            if any(isinstance(s, str) and not s.strip() for s in arg_strings):
                name = "/".join(action.option_strings) or action.metavar or action.dest
                self.error(f"argument {name}: expected a value, got an empty string")
        return super()._get_values(action, arg_strings)


def _version() -> str:
    try:
        return version("hopscotch")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="hopscotch", description="Reasoning-aware dense retrieval for deep-research agents.")
    parser.add_argument("--version", action="version", version=f"hopscotch {_version()}")
    parser.add_argument("--offline", action="store_true",
                        help="never reach the Hugging Face Hub (models and datasets from the local cache only; "
                             "same as HF_HUB_OFFLINE=1); accepted before or after the command")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(f"hopscotch.retriever.commands.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--offline" in argv:  # the hub is offline only when the user says so (here or HF_HUB_OFFLINE=1)
        argv = [a for a in argv if a != "--offline"]
        for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
            os.environ[var] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    parser = build_parser()
    args, stray = parser.parse_known_args(argv)
    if stray:  # words argparse could not place: a command's KEY=VALUE list given on both sides of a flag
        target = getattr(args, "stray_words", None)
        if target is None or any(word.startswith("-") for word in stray):
            parser.error(f"unrecognized arguments: {' '.join(stray)}")
        setattr(args, target, [*(getattr(args, target) or []), *stray])
    try:
        return int(args.func(args) or 0)
    except HopscotchError as exc:
        print(f"hopscotch {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"hopscotch {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
