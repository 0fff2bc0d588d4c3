"""docs/cli.md is what scripts/cli_docs.py makes of the parsers, and it names every flag of every command."""

from __future__ import annotations

import argparse
from pathlib import Path

from hopscotch.retriever.cli import build_parser

PAGE = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def test_docs_cli_md_is_up_to_date(load_script):
    """Regenerated from the parsers it is the same file: run ``python scripts/cli_docs.py`` after changing a flag."""
    assert PAGE.read_text() == load_script("cli_docs").cli_page(), \
        "docs/cli.md is stale: run python scripts/cli_docs.py"


def test_every_flag_of_every_command_is_on_the_page(load_script):
    text = PAGE.read_text()
    found = list(load_script("cli_docs").commands(build_parser()))
    names = {" ".join(words) for words, _ in found}
    assert {"world", "search", "train", "serve", "audit", "audit contamination", "audit model"} <= names
    missing = []
    for words, parser in found:
        heading = f"## `hopscotch {' '.join(words)}`"
        assert heading in text, heading
        section = text.split(heading, 1)[1].split("\n## ", 1)[0]
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            shown = [f"`{s}`" for s in action.option_strings] or [f"`{action.dest}` (positional)"]
            missing += [f"hopscotch {' '.join(words)} {s}" for s in shown if s not in section]
    assert not missing, missing


def test_a_missing_flag_is_seen(load_script):
    """The page check sees a flag the page lacks: a parser with one more flag renders a different page."""
    cli_docs = load_script("cli_docs")
    parser = build_parser()
    _, world = next(found for found in cli_docs.commands(parser) if found[0] == ("world",))
    world.add_argument("--not-on-the-page", help="a flag added after the page was written")
    assert "`--not-on-the-page`" in cli_docs.cli_page(parser)
    assert "`--not-on-the-page`" not in PAGE.read_text()
