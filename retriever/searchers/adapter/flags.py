"""Backend flags in an argparse parser and their values in a parsed namespace: the low half of the searchers'
argparse adapter (:mod:`hopscotch.retriever.searchers.adapter`). A backend declares its flags with
:func:`add_option` (once per parser, renamed ``--hopscotch-NAME`` where a harness's parser has the name); the
adapter reads their values with :func:`flag` and which were given with :func:`given_flags`. Nothing here imports
any other part of Hopscotch, so the searcher interface (:mod:`~hopscotch.retriever.searchers.base`) and every
backend can declare flags through it."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

#: prefix of a backend flag whose name the host parser already uses (``--model`` in BrowseComp-Plus and
#: AgentIR is the agent's LLM): the flag becomes ``--hopscotch-model``, its destination ``hopscotch_model``
HOSTED_PREFIX = "hopscotch-"
HOSTED_DEST = "hopscotch_"
#: namespace attribute (a parser default, a sorted tuple) naming the destinations :func:`add_option` declared
OWN_DESTS = "_hopscotch_dests"
#: namespace attribute ``{dest: option string}`` of the :func:`add_option` flags given on the command line
GIVEN_FLAGS = "_hopscotch_given"



def _dest_of(flags: tuple[str, ...], spec: dict) -> str:
    return spec.get("dest") or next((f for f in flags if f.startswith("--")), flags[0]).lstrip("-").replace("-", "_")


def _recorded(parser: argparse.ArgumentParser, spec: dict, dest: str) -> type[argparse.Action]:
    """``spec``'s action class, made to note in the namespace (:data:`GIVEN_FLAGS`) that the flag was given."""
    base = parser._registry_get("action", spec.get("action"), spec.get("action"))

    class Given(base):
        def __call__(self, parser, namespace, values, option_string=None):
            given = {**(getattr(namespace, GIVEN_FLAGS, None) or {}), dest: option_string or self.option_strings[0]}
            setattr(namespace, GIVEN_FLAGS, given)
            super().__call__(parser, namespace, values, option_string)

    return Given


def with_deprecated_aliases(base: type[argparse.Action], aliases: Mapping[str, str]) -> type[argparse.Action]:
    """``base`` (an argparse action class), made to print one line to stderr when it is given under a deprecated
    alias (``aliases``: ``{old option string: its new name}``); the value is taken as under the new name."""

    class Deprecated(base):
        def __call__(self, parser, namespace, values, option_string=None):
            if option_string in aliases:
                print(f"{parser.prog}: note: {option_string} is deprecated, use {aliases[option_string]}",
                      file=sys.stderr)
            super().__call__(parser, namespace, values, option_string)

    return Deprecated


def deprecated_help(help_text: str, aliases) -> str:
    """``help_text`` saying that ``aliases`` (old option strings) are deprecated names of the flag."""
    names = ", ".join(aliases)
    return f"{help_text} ({names}: deprecated alias{'es' if len(aliases) > 1 else ''}, still accepted)"


def given_flags(args: argparse.Namespace) -> dict[str, str]:
    """``{dest: option string}`` of the backend flags given on the command line (none in a hand-built namespace)."""
    return dict(getattr(args, GIVEN_FLAGS, None) or {})


def add_option(parser: argparse.ArgumentParser, *flags: str, **spec) -> None:
    """``parser.add_argument(*flags, **spec)``, once per parser.

    Backends compose each other's flags (hybrid adds the BM25 and the dense ones) and share some
    (``--index``), so a flag may be declared several times; the first declaration adds it, later ones
    must be identical and add nothing. A differing redeclaration is a programming error (ValueError).
    A flag whose name the parser already has from elsewhere (a harness's own ``--model``) is added as
    ``--hopscotch-NAME`` with destination ``hopscotch_DEST``, which :func:`flag` reads in its place.
    Giving the flag is noted (:func:`given_flags`), so that the registry refuses a flag the selected backend
    does not use. ``allow_empty=True`` (not an argparse setting) lets hopscotch's own parsers take an empty value
    for it (they refuse one otherwise: ``retriever/cli.py``). ``aliases=("--old-name", ...)`` (not an argparse
    setting either) adds deprecated names of the flag: they still work, and print one deprecation line to stderr.
    """
    declared = parser.__dict__.setdefault("_hopscotch_options", {})
    if flags in declared:
        if declared[flags] != spec:
            raise ValueError(f"{flags[0]} is declared twice with different settings")
        return
    dest = _dest_of(flags, spec)
    aliases = tuple(spec.get("aliases", ()))
    settings = {k: v for k, v in spec.items() if k not in ("allow_empty", "aliases")}
    if aliases and settings.get("help"):
        settings["help"] = deprecated_help(settings["help"], aliases)
    action = _recorded(parser, settings, dest)
    names = (*flags, *aliases)
    if any(f in parser._option_string_actions for f in names):
        names = tuple(f"--{HOSTED_PREFIX}{f.lstrip('-')}" for f in names)
        settings["dest"] = HOSTED_DEST + dest
    if aliases:
        action = with_deprecated_aliases(action, {old: names[0] for old in names[len(flags):]})
    added = parser.add_argument(*names, **{**settings, "action": action})
    added.allow_empty = bool(spec.get("allow_empty"))  # hopscotch's parsers refuse an empty value otherwise
    declared[flags] = spec
    parser.set_defaults(**{OWN_DESTS: tuple(sorted({*(parser.get_default(OWN_DESTS) or ()), dest}))})


def flag(args: argparse.Namespace, dest: str, default: Any = None) -> Any:
    """The value of the backend flag ``dest`` in ``args``: ``hopscotch_DEST`` when :func:`add_option` had to
    rename the flag, else ``DEST``, else ``default``. In a namespace parsed by a parser that
    :func:`add_option` declared flags in, a ``DEST`` it did not declare belongs to the host (a harness's
    ``--model``) and reads as ``default``; a namespace built by hand is read as it is."""
    return FlagValues.of(args).get(dest, default)


def options_of(options_type, flags: FlagValues, dests=None):
    """An options dataclass (``options_type``, whose fields are named like the flags' destinations) filled from
    ``flags`` (a flag unset, None, leaves the field's default); with ``dests`` only those fields are read (the flags
    a backend declares: a hand-built namespace's other values are ignored)."""
    names = [f.name for f in fields(options_type) if dests is None or f.name in dests]
    values = {name: flags.get(name) for name in names}
    return options_type(**{k: v for k, v in values.items() if v is not None})


class FlagValues(Mapping):
    """The backend flags' values by destination, read-only: what the selection rules of the backends read (which
    backend the flags select, which flags it uses, how an unused one is refused). Built from a parsed namespace
    by :meth:`of` (read as :func:`flag` reads it, when a value is asked for: a renamed ``--hopscotch-NAME`` read
    as ``NAME``, a host parser's own flags left out), or from keyword options (``FlagValues({"index": "idx"})``,
    :func:`~.build.build_searcher`)."""

    def __init__(self, values: Mapping[str, Any]):
        self._values = values

    @classmethod
    def of(cls, args: argparse.Namespace) -> FlagValues:
        """The flags in ``args``."""
        return cls(_NamespaceFlags(args))

    def __getitem__(self, dest: str) -> Any:
        return self._values[dest]

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


class _NamespaceFlags(Mapping):
    """A parsed namespace's backend flags, each read when asked for (see :func:`flag`)."""

    def __init__(self, args: argparse.Namespace):
        self._args = args

    def __getitem__(self, dest: str) -> Any:
        args = self._args
        if hasattr(args, HOSTED_DEST + dest):
            return getattr(args, HOSTED_DEST + dest)
        own = getattr(args, OWN_DESTS, None)
        if (own is not None and dest not in own) or not hasattr(args, dest):
            raise KeyError(dest)
        return getattr(args, dest)

    def __iter__(self):
        names = {d[len(HOSTED_DEST):] if d.startswith(HOSTED_DEST) else d for d in vars(self._args)}
        return (dest for dest in sorted(names) if dest in self)

    def __len__(self) -> int:
        return sum(1 for _ in self)
