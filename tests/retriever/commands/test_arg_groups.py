"""The flags several commands share (:mod:`hopscotch.retriever.commands.arg_groups`, issue 26 item 3): declared
once, and the same in every ``hopscotch`` subcommand that takes them (introspected from the real CLI parser and
parsed through it)."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

import pytest

from hopscotch.retriever.cli import build_parser
from hopscotch.retriever.commands.arg_groups import OVERWRITE_HELP

ROOT = Path(__file__).resolve().parents[3]

#: output flag -> its destination
OUTPUT_FLAGS = {"--out": "out", "--json": "json_out", "--output": "output", "--clean": "clean"}
#: every audit's report flag: an output beside the audit's own (issue 36: through the output guard, with --overwrite)
REPORT_FLAG = "--report"
#: command -> (its output flag, required, default): as the commands declared them before the shared function
#: bm25-index and index take --plan (no output), so their --out is required only when they build
OUTPUTS = {
    "world": ("--out", True, None), "bm25-index": ("--out", False, None), "index": ("--out", False, None),
    "search": ("--out", True, None), "synth": ("--out", True, None), "replay": ("--out", True, None),
    "tune-fusion": ("--out", False, None), "demo": ("--out", False, "demo_out"),
    "eval": ("--json", False, None), "compare": ("--json", False, None), "eval-agent": ("--json", False, None),
    "train": ("--output", True, None), "audit near-duplicates": ("--out", True, None),
    "audit contamination": ("--clean", False, None),
    **{f"audit {k}": ("--report", False, None) for k in ("ann-fidelity", "false-negatives", "model", "perturbation")},
}
#: commands whose output flag has no --overwrite (none since every audit's outputs go through the output guard)
NO_OUTPUT_BOUNDARY: set[str] = set()
#: commands whose --overwrite says more than the usual text
OWN_OVERWRITE_HELP = {"index", "demo", "train"}
#: command -> --k default
#: serve's None: the MCP tools take 5 (MCPOptions), and a REST service refuses --k (hits= per request)
K_DEFAULTS = {"search": 100, "replay": 10, "tune-fusion": 1000, "serve": None, "audit perturbation": None,
              "audit ann-fidelity": (10, 100)}
#: serve's MCP --k stays a plain int, refused below 1 when the server starts (MCPOptions, tests/retriever/serving)
K_CHECKED_AT_START = {"serve"}
#: the flags arg_groups.py declares, and where else a declaration of one may stand
SHARED = {"--out", "--json", "--overwrite", "--k", "--reasoning", "--device"}
ELSEWHERE = {"retriever/training/trainer.py": {"--overwrite"}}  # train.py's own parser, reused by 'hopscotch train'


def _commands() -> dict[str, argparse.ArgumentParser]:
    """Every subcommand's parser by its name (``search``, ``audit ann-fidelity``), from a freshly built CLI."""
    found: dict[str, argparse.ArgumentParser] = {}

    def walk(parser, prefix):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found[f"{prefix} {name}".strip()] = sub
                    walk(sub, f"{prefix} {name}")

    walk(build_parser(), "")
    return found


COMMANDS = _commands()


def _options(name: str) -> dict[str, argparse.Action]:
    return COMMANDS[name]._option_string_actions


def _parse(name: str, *argv: str) -> argparse.Namespace:
    """``argv`` parsed by the command's own parser, its other required flags waived and positionals filled."""
    parser = _commands()[name]  # a fresh parser: the waiver below changes it
    positionals = 0
    for group in parser._mutually_exclusive_groups:
        group.required = False
    for action in parser._actions:
        if action.option_strings:
            action.required = False
        elif action.nargs is None:
            positionals += 1
    return parser.parse_args(["x"] * positionals + list(argv))


def _refused(name: str, capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as exc:
        _parse(name, *argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and len(err.strip().splitlines()) == 1, (name, argv, err)
    return err


def test_every_command_is_found():
    assert {"search", "serve", "audit ann-fidelity", "audit near-duplicates"} <= set(COMMANDS)


def test_every_output_flag_comes_with_overwrite():
    found, without = {}, set()
    for name in COMMANDS:
        opts = _options(name)
        flags = [f for f in OUTPUT_FLAGS if f in opts] or [f for f in (REPORT_FLAG,) if f in opts]
        if not flags:
            assert "--overwrite" not in opts, f"{name}: --overwrite without an output flag"
            continue
        assert len(flags) == 1, (name, flags)
        out = opts[flags[0]]
        found[name] = (flags[0], out.required, out.default)
        assert out.dest == {**OUTPUT_FLAGS, REPORT_FLAG: "report"}[flags[0]] and out.type is None \
            and out.nargs is None and out.help, name
        if "--overwrite" not in opts:
            without.add(name)
            continue
        overwrite = opts["--overwrite"]
        assert isinstance(overwrite, argparse._StoreTrueAction), name
        assert overwrite.dest == "overwrite" and overwrite.default is False, name
        assert overwrite.option_strings == ["--overwrite"], name
        args = _parse(name, flags[0], "some/place", "--overwrite")
        assert getattr(args, out.dest) == "some/place" and args.overwrite is True, name
        args = _parse(name, flags[0], "some/place")
        assert args.overwrite is False, name
        standard = overwrite.help.startswith("replace existing ") and overwrite.help.endswith(
            OVERWRITE_HELP.split("{what}")[1])
        assert standard != (name in OWN_OVERWRITE_HELP), (name, overwrite.help)
    assert found == OUTPUTS
    assert without == NO_OUTPUT_BOUNDARY


def test_k_is_a_positive_whole_number_wherever_it_is_declared(capsys):
    found = {name for name in COMMANDS if "--k" in _options(name)}
    assert found == set(K_DEFAULTS)
    for name in sorted(found):
        action = _options(name)["--k"]
        assert action.dest == "k" and action.nargs is None and action.default == K_DEFAULTS[name], name
        assert _parse(name, "--k", "7").k == ((7,) if name == "audit ann-fidelity" else 7), name
        assert _parse(name).k == K_DEFAULTS[name], name
        for bad in ("1.5", "ten", "nan", ""):
            assert "argument --k" in _refused(name, capsys, "--k", bad)
        for low in ("0", "-1"):
            if name in K_CHECKED_AT_START:
                assert _parse(name, "--k", low).k == int(low)
            else:
                assert "argument --k" in _refused(name, capsys, "--k", low)


def test_reasoning_is_an_off_switch_wherever_it_is_declared():
    found = {name for name in COMMANDS if "--reasoning" in _options(name)}
    assert found == {"search", "replay", "audit ann-fidelity"}
    for name in found:
        action = _options(name)["--reasoning"]
        assert isinstance(action, argparse._StoreTrueAction) and action.dest == "reasoning" and action.help, name
        assert _parse(name).reasoning is False and _parse(name, "--reasoning").reasoning is True, name


def test_device_is_a_plain_string_defaulting_to_the_commands_choice():
    found = {name for name in COMMANDS if "--device" in _options(name)}
    assert found == {"index", "audit model"}
    for name in found:
        action = _options(name)["--device"]
        assert action.dest == "device" and action.type is None and action.default is None and action.help, name
        assert _parse(name, "--device", "cpu").device == "cpu" and _parse(name).device is None, name


def _declared_flags(path: Path) -> set[str]:
    """The option strings of every ``add_argument(...)`` / ``add_option(...)`` call in ``path``."""
    flags = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call):
            func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if func in ("add_argument", "add_option"):
                flags |= {a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)}
    return flags


def test_the_shared_flags_are_declared_once():
    stray = {}
    for path in sorted((ROOT / "retriever").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel == "retriever/commands/arg_groups.py":
            assert SHARED - {"--out", "--json"} <= _declared_flags(path)  # --out / --json: the caller's flag name
            continue
        if extra := (_declared_flags(path) & SHARED) - ELSEWHERE.get(rel, set()):
            stray[rel] = sorted(extra)
    assert stray == {}
