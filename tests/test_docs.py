"""The docs name nothing that is not there: every file path and every dotted Hopscotch name written in backticks in
README.md and docs/*.md, and every relative link, exists in the repository.

A path counts when it is written from the repository root (``scripts/demo.sh``, ``tests/retriever/...``) or, for a
source file, from inside a package folder (``searchers/fusion.py``: some file of the repository ends with it). A
path whose first folder is not one of the repository's (``runs/agent/final``, ``idx/bm25``: what a command writes)
is an example, not checked; so is one with a placeholder (``*``, ``<``, ``{``, ``...``, upper-case words). A dotted
name (``hopscotch.retriever.index.encode.encode_corpus``, ``hopscotch_experiments.ablations``) resolves to a module
of the repository and, for the rest, to what that module defines or imports at its top, statically (no import).
"""

from __future__ import annotations

import ast
import os
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: folders -> import names (pyproject.toml's package-dir and experiments/pyproject.toml's)
IMPORT_ROOTS = {"hopscotch": "hopscotch", "hopscotch.retriever": "retriever", "hopscotch.kernels": "kernels",
                "hopscotch.data_synth": "data_synth", "hopscotch_experiments": "experiments"}
REPO_FOLDERS = {p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(".")} - {"runs"}
FILE_SUFFIXES = (".py", ".md", ".sh", ".yaml", ".yml", ".json", ".toml", ".png", ".txt")
#: a bare file name of these is the repository's (a bare ``manifest.json`` or ``my.yaml`` is a user's or an output)
SOURCE_SUFFIXES = (".py", ".sh")
CODE = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
DOTTED = re.compile(r"^(hopscotch(?:_experiments)?(?:\.[A-Za-z_][A-Za-z0-9_]*)*)(?:\(\))?$")
PLACEHOLDER = re.compile(r"[*<>{}$|\[\]]|\.\.\.|\b[A-Z]+\b")


@cache
def repo_files() -> tuple[str, ...]:
    """Every file of the checkout (no .git, .venv, caches or build metadata), relative to the root."""
    found = []
    for folder, dirs, names in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in (".git", ".venv", "__pycache__", ".pytest_cache")
                   and not d.endswith(".egg-info")]
        rel = Path(folder).relative_to(ROOT)
        found += [(rel / name).as_posix() for name in names]
    return tuple(found)


def path_exists(text: str) -> bool | None:
    """Whether the path ``text`` names exists; None when it is not a path of the repository (an example)."""
    text = text.strip().rstrip("/").split("::")[0].split(":")[0]
    if " " in text or not text or PLACEHOLDER.search(text) or text.startswith(("http", "../", "/", "~")):
        return None
    first = text.split("/")[0]
    is_file = text.endswith(FILE_SUFFIXES)
    if "/" not in text:  # a bare file name: somewhere in the repository; outputs (.json, ...) are examples
        if not text.endswith(SOURCE_SUFFIXES):
            return None
        return any(f == text or f.endswith("/" + text) for f in repo_files())
    if first in REPO_FOLDERS:
        if (ROOT / text).exists():
            return True
        # a file of the root (``train.py``) is only ever from the root; in a folder of the repository, a path
        # also counts from inside another folder (``index/bm25/disk.py`` inside ``retriever/``)
        return "/" in text and is_file and any(f.endswith("/" + text) for f in repo_files())
    if is_file and "/" in text:  # inside a package folder: searchers/fusion.py, model/query_input.py
        candidates = [f for f in repo_files() if f.endswith("/" + text)]
        return bool(candidates) if first in _inner_folders() else None
    return None


@cache
def _inner_folders() -> frozenset[str]:
    """Folder names inside the source folders (``searchers``, ``index``, ``oracles``, ...)."""
    return frozenset(p.name for folder in IMPORT_ROOTS.values() for p in (ROOT / folder).rglob("*")
                     if p.is_dir() and p.name != "__pycache__")


def module_file(module: str) -> Path | None:
    for name, folder in sorted(IMPORT_ROOTS.items(), key=lambda kv: -len(kv[0])):
        if module == name or module.startswith(name + "."):
            rest = module[len(name):].lstrip(".").split(".") if module != name else []
            base = ROOT.joinpath(folder, *rest)
            for cand in (base / "__init__.py", base.with_suffix(".py")):
                if cand.is_file():
                    return cand
            return None
    return None


@cache
def defined_names(path: Path) -> dict[str, ast.AST | None]:
    """Top-level names of a module: functions, classes (with their node, for members), assignments, imports."""
    tree = ast.parse(path.read_text())
    names: dict[str, ast.AST | None] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        names[name.id] = None
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names[(alias.asname or alias.name).split(".")[0]] = None
        elif isinstance(node, ast.If):  # TYPE_CHECKING and the like
            for inner in node.body:
                if isinstance(inner, (ast.Import, ast.ImportFrom)):
                    names.update({(a.asname or a.name).split(".")[0]: None for a in inner.names})
    if "_EXPORTS" in names:  # a lazy facade (hopscotch/__init__.py): its keys are its names
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "_EXPORTS" for t in node.targets):
                names.update({k.value: None for k in node.value.keys if isinstance(k, ast.Constant)})
    return names


def dotted_name_exists(name: str) -> bool:
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        path = module_file(".".join(parts[:cut]))
        if path is None:
            continue
        rest = parts[cut:]
        if not rest:
            return True
        node = defined_names(path).get(rest[0], False)
        if node is False:
            return False
        for member in rest[1:]:  # Class.method / Class.attribute
            if not isinstance(node, ast.ClassDef):
                return True  # an attribute of something assigned: not checked further
            found = [n for n in ast.walk(node) if getattr(n, "name", None) == member
                     or (isinstance(n, ast.Name) and n.id == member) or getattr(n, "attr", None) == member]
            if not found:
                return False
            node = found[0]
        return True
    return False


def _names(page: Path) -> list[tuple[int, str]]:
    """``(line, text)`` of what a page names: each backticked span and every word of a code block (a command
    line names paths as words), and ``link:TARGET`` for each markdown link."""
    found = []
    in_fence = False
    for number, line in enumerate(page.read_text().splitlines(), 1):
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
            continue
        if in_fence:
            found += [(number, word) for word in line.split("#")[0].replace("=", " ").split()]
            continue
        found += [(number, m) for m in CODE.findall(line)]
        found += [(number, "link:" + m) for m in LINK.findall(CODE.sub("", line))]
    return found


def missing_in(page: Path) -> list[str]:
    missing = []
    for number, text in _names(page):
        where = f"{page.relative_to(ROOT) if ROOT in page.parents else page.name}:{number}"
        if text.startswith("link:"):
            target = text[5:]
            if not target.startswith(("http:", "https:", "mailto:")) and not (page.parent / target).exists():
                missing.append(f"{where}: link {target}")
            continue
        for word in text.replace(",", " ").split():
            word = word.strip("()[]'\";")
            dotted = DOTTED.match(word)
            if dotted and "." in dotted.group(1):
                if not dotted_name_exists(dotted.group(1)):
                    missing.append(f"{where}: {word}")
            elif path_exists(word) is False:
                missing.append(f"{where}: {word}")
    return missing


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_path_and_name_a_page_gives_exists(page):
    missing = missing_in(page)
    assert not missing, "\n".join(missing)


def test_the_checks_see_what_is_missing(tmp_path):
    assert path_exists("scripts/demo.sh") and path_exists("tests/test_docs.py") and path_exists("train.py")
    assert path_exists("searchers/fusion.py") and path_exists("index/bm25/disk.py")
    assert path_exists("tests/kernels/test_nothing_here.py") is False
    assert path_exists("scripts/no_such_script.py") is False
    assert path_exists("searchers/no_such_module.py") is False
    assert path_exists("runs/agent/final") is None and path_exists("idx/bm25") is None   # outputs: examples
    assert path_exists("tests/retriever/<area>/test_x.py") is None
    assert dotted_name_exists("hopscotch.retriever.index.encode.encode_corpus")
    assert dotted_name_exists("hopscotch.retriever.searchers.build_searcher")       # imported by the package
    assert dotted_name_exists("hopscotch.retriever.model.query_mix.QueryMix.weight_for")
    assert dotted_name_exists("hopscotch.build_searcher") and dotted_name_exists("hopscotch_experiments.ablations")
    assert not dotted_name_exists("hopscotch.retriever.index.encode.no_such_function")
    assert not dotted_name_exists("hopscotch.retriever.no_such_module")
    assert not dotted_name_exists("hopscotch.retriever.model.query_mix.QueryMix.no_such_method")
    assert not dotted_name_exists("hopscotch.no_such_name")
    page = tmp_path / "page.md"
    page.write_text("See `scripts/gone.py`, `hopscotch.retriever.gone` and [a page](gone.md).\n"
                    "```bash\nhopscotch search --out runs/x.trec   # in a code block: an example\n```\n")
    assert [m.split(": ", 1)[1] for m in missing_in(page)] == [
        "scripts/gone.py", "hopscotch.retriever.gone", "link gone.md"]


# ------------------------------------------------------------------------------------------------- the README
README_MAX_LINES = 150
FIRST_COMMANDS = ["bash scripts/demo.sh", "bash scripts/test.sh"]


def test_the_readme_is_a_front_door():
    """At most 150 lines, opening with the two commands a fresh machine needs."""
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, len(lines)
    fence = lines.index("```bash")
    assert [line.split("#")[0].strip() for line in lines[fence + 1:fence + 3]] == FIRST_COMMANDS
    assert not [line for line in lines[:fence] if line.strip() and not line.startswith("# ")]


def readme_commands() -> list[list[str]]:
    """The words of every ``hopscotch ...`` line in the README's code blocks (comments cut)."""
    out, in_fence = [], False
    for line in (ROOT / "README.md").read_text().splitlines():
        if line.startswith("```"):
            in_fence = not in_fence
        elif in_fence and line.startswith("hopscotch "):
            out.append(line.split("#")[0].split()[1:])
    return out


def test_every_readme_command_parses():
    """Each command of the README parses with the real parser (flags that exist, values their types take)."""
    from hopscotch.retriever.cli import build_parser

    commands = readme_commands()
    assert len(commands) >= 10 and {c[0] for c in commands} >= {"world", "search", "train", "synth", "serve"}
    for words in commands:
        try:
            args, stray = build_parser().parse_known_args(words)
        except SystemExit:
            pytest.fail(f"README: hopscotch {' '.join(words)} does not parse")
        assert not stray or (getattr(args, "stray_words", None) and not any(w.startswith("-") for w in stray)), \
            f"README: hopscotch {' '.join(words)}: unknown {stray}"
