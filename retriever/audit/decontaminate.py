"""Training tuple files without their contaminated tuples (``hopscotch audit contamination --clean DIR``).

Each tuple file is read line by line; a tuple with any *counted* hit of :class:`.contamination.ContaminationChecker`
(an evaluation question asked, near-duplicated or quoted in it, or an evaluation qrel document among its
positives; answer strings only with ``count_answers``) is left out, every other line is copied byte for byte
to ``DIR/<file name>`` (written under a temporary name, then renamed). ``DIR/decontamination.json`` lists
what was removed: per file the kept and removed counts, removals per kind and per evaluation set, and every
removed tuple's id with the evaluation questions it hit. The rule is the audit's, unchanged: the cleaned files
audit to zero by construction, which the command checks by auditing them again.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from hopscotch.retriever.audit.contamination import ContaminationChecker
from hopscotch.retriever.audit.eval_sets import EvalSet, TrainingItem
from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.io.common import atomic_write, iter_lines, write_json
from hopscotch.retriever.io.tevatron import TevatronIdResolver
from hopscotch.retriever.io.tuples import parse_tuple, tuple_source_files
from hopscotch.retriever.io.validate import json_object

REPORT_NAME = "decontamination.json"


def tuple_files(paths: Sequence[str | os.PathLike]) -> list[Path]:
    """The JSONL files of ``paths`` (files, or folders of ``*.jsonl``), in order; an error for anything else."""
    out: list[Path] = []
    for p in map(Path, paths):
        if not p.exists():
            raise UsageError(f"--clean: {p}: no such file or folder")
        out.extend(f for f in tuple_source_files(p, "--clean", (".jsonl",)) if f.is_file())
    names = Counter(f.name for f in out)
    if clash := [n for n, c in names.items() if c > 1]:
        raise UsageError(f"--clean writes DIR/<file name>, and two tuple files are named {clash[0]!r}")
    return out


def decontaminate(eval_sets: Sequence[EvalSet], paths: Sequence[str | os.PathLike], out_dir: str | os.PathLike, *,
                  threshold: float, count_answers: bool = False, corpus: str | None = None) -> dict:
    """Write each tuple file of ``paths`` to ``out_dir`` without its contaminated tuples; returns the report
    (also written to ``out_dir/decontamination.json``)."""
    files = tuple_files(paths)
    out_dir = Path(out_dir)
    for f in files:
        if (out_dir / f.name).resolve() == f.resolve():
            raise UsageError(f"--clean: {out_dir / f.name} is an input; give another folder")
    out_dir.mkdir(parents=True, exist_ok=True)
    checker = ContaminationChecker(eval_sets, threshold, count_answers)
    questions = checker.index.questions
    resolver = TevatronIdResolver(corpus)
    report: dict = {"rule": {"threshold": threshold, "counted": list(checker.counted)}, "files": {}}

    for f in files:
        kinds: Counter = Counter()
        sets: Counter = Counter()
        removed: list[dict] = []
        kept = 0
        with atomic_write(out_dir / f.name) as out:
            for lineno, line in iter_lines(f):
                obj = json_object(line, f, lineno, "a training tuple object")
                t = parse_tuple(resolver.expand(obj, f, lineno), f, lineno)
                item = TrainingItem(str(f), t.query_id, t.query, t.reasoning,
                                    [(p.docid, p.title, p.text) for p in t.positives])
                hits = checker.counted_hits(item)
                if not hits:
                    out.write(line + "\n")
                    kept += 1
                    continue
                kinds.update({k for _, k in hits})
                sets.update({questions[i].set_name for i, _ in hits})
                removed.append({"line": lineno, "query_id": t.query_id, "query": t.query[:160],
                                "hits": sorted({f"{questions[i].set_name}:{questions[i].qid}:{k}" for i, k in hits})[:10]})
        report["files"][f.name] = {"source": str(f), "kept": kept, "removed": len(removed),
                                   "removed_by_kind": dict(sorted(kinds.items())),
                                   "removed_by_eval_set": dict(sorted(sets.items())), "removed_tuples": removed}
    report["kept"] = sum(v["kept"] for v in report["files"].values())
    report["removed"] = sum(v["removed"] for v in report["files"].values())
    write_json(out_dir / REPORT_NAME, report)
    return report
