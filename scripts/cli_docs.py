"""Write docs/cli.md, the reference of every ``hopscotch`` command and flag, from the commands' own parsers.

    python scripts/cli_docs.py              # (re)write docs/cli.md
    python scripts/cli_docs.py --check      # exit 1 when docs/cli.md is not what the parsers give

The page is generated, so it cannot go stale: tests/scripts/test_cli_docs.py regenerates it and fails when the
file differs, and checks that every flag of every command (``audit``'s kinds included) is on it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hopscotch.retriever.cli import build_parser
from hopscotch.retriever.io.common import atomic_write

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "cli.md"
#: a fixed width, so the page does not depend on the terminal that wrote it
WIDTH = 120

HEADER = """# Command-line reference

Every `hopscotch` command and flag, generated from the commands' parsers by `python scripts/cli_docs.py`
(do not edit by hand: `tests/scripts/test_cli_docs.py` fails when this page differs from what the parsers
say). `hopscotch COMMAND --help` prints the same. What the commands are for: [README.md](../README.md); the
names used below: [glossary.md](glossary.md).
"""


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """``(words, parser)`` of every command under ``parser``, depth first in the order they were added
    (``("audit", "contamination")`` for ``hopscotch audit contamination``)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen = set()
            for name, sub in action.choices.items():
                if id(sub) in seen:  # an alias
                    continue
                seen.add(id(sub))
                yield (*path, name), sub
                yield from commands(sub, (*path, name))


def _flag_cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _value(action: argparse.Action) -> str:
    if action.nargs == 0:
        return ""
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        return " \\| ".join(f"`{c}`" for c in action.choices)
    metavar = action.metavar or (action.dest.upper() if action.option_strings else action.dest)
    if isinstance(metavar, tuple):
        metavar = " ".join(metavar)
    if action.nargs in ("*", "+"):
        return f"{metavar} ..."
    return str(metavar)


def _default(action: argparse.Action) -> str:
    if action.required:
        return "required"
    if action.nargs == 0 or action.default in (None, argparse.SUPPRESS) or action.default == []:
        return ""
    return f"`{action.default}`"


def flag_rows(parser: argparse.ArgumentParser) -> list[str]:
    """The flag tables of one command: one per argument group that holds any flag, titled by the group."""
    formatter = argparse.HelpFormatter(parser.prog, width=WIDTH)
    lines = []
    for group in parser._action_groups:
        actions = [a for a in group._group_actions
                   if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]
        if not actions:
            continue
        if group.title not in ("options", "optional arguments", "positional arguments"):
            lines += [f"*{group.title}*", ""]
        lines += ["| flag | value | default | what it does |", "|---|---|---|---|"]
        for action in actions:
            names = ", ".join(f"`{s}`" for s in action.option_strings) or f"`{action.dest}` (positional)"
            help_text = formatter._expand_help(action) if action.help else ""
            lines.append(f"| {names} | {_value(action)} | {_default(action)} | {_flag_cell(help_text)} |")
        lines.append("")
    return lines


def cli_page(parser: argparse.ArgumentParser | None = None) -> str:
    """The page, as markdown."""
    parser = parser or build_parser()
    found = list(commands(parser))
    lines = [HEADER, "## Contents", ""]
    lines += [f"- [`hopscotch {' '.join(words)}`](#hopscotch-{'-'.join(words)})" for words, _ in found]
    lines += ["", "## `hopscotch` (every command)", "", *flag_rows(parser)]
    for words, sub in found:
        lines += [f"## `hopscotch {' '.join(words)}`", ""]
        if sub.description:
            lines += [" ".join(sub.description.split()), ""]
        lines += flag_rows(sub)
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when docs/cli.md is stale, write nothing")
    parser.add_argument("--out", type=Path, default=OUT, help="where to write the page (default: docs/cli.md)")
    args = parser.parse_args(argv)
    text = cli_page()
    if args.check:
        if not args.out.is_file() or args.out.read_text() != text:
            print(f"{args.out} is stale: run python scripts/cli_docs.py", file=sys.stderr)
            return 1
        return 0
    with atomic_write(args.out) as fh:
        fh.write(text)
    print(f"wrote {args.out} ({text.count(chr(10))} lines)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
