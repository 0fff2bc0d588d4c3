"""Relevance judgement readers: TREC 4-column, BEIR TSV with header, and two JSONL shapes; duplicate groups.

JSONL shapes (BrowseComp-Plus projected onto ClimbMix): ``{query_id, doc_id, relevance}`` rows, or
``{record_id, qrel: [doc_id, ...]}`` rows (every listed document relevant with grade 1).

Every docid is read through :func:`~hopscotch.retriever.io.docids.canonical_docid`, so qrels in either
ClimbMix spelling match runs and corpora in the other; a document listed for one query in both spellings
keeps its highest grade.

Checks (the input boundary, :mod:`.validate`), each a :class:`FormatError` naming file and line: ids are
strings or integers without control characters (and without whitespace in TREC / TSV files); a grade is
an integer (``1``, ``"1"``, ``1.0``; ``0.9``, ``nan``, ``inf`` refused, never truncated; negative grades are
TREC's non-relevant levels); a (qid, docid) row repeated with another grade is refused.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from hopscotch.retriever.errors import FormatError, UsageError
from hopscotch.retriever.io.common import atomic_write, first_key, iter_lines, parquet_rows, read_jsonl
from hopscotch.retriever.io.docids import canonical_docid
from hopscotch.retriever.io.validate import check_id, integer_grade

Qrels = dict[str, dict[str, int]]


class _QrelsBuilder:
    """Collects ``{qid: {docid: grade}}`` from checked rows.

    A row repeating a (qid, docid) as the file spells it is fine with the same grade and a
    :class:`FormatError` with another (the file contradicts itself). Two spellings of one ClimbMix
    document meet after :func:`canonical_docid` and keep the higher grade.
    """

    def __init__(self):
        self.qrels: Qrels = {}
        self._rows: dict[tuple[str, str], tuple[int, int]] = {}

    def add(self, qid: str, docid: str, grade: int, path, lineno: int) -> None:
        first = self._rows.setdefault((qid, docid), (grade, lineno))
        if first[0] != grade:
            raise FormatError(path, lineno, f"one grade per (query, document) pair (line {first[1]} gives "
                                            f"{qid} {docid} grade {first[0]})", f"grade {grade}")
        docs = self.qrels.setdefault(qid, {})
        docid = canonical_docid(docid)
        if docid not in docs or grade > docs[docid]:
            docs[docid] = grade


def write_qrels(path: str | os.PathLike, qrels: Mapping[str, Mapping[str, int]]) -> None:
    """Write ``{qid: {docid: grade}}`` as a BEIR TSV (``query-id corpus-id score`` with its header; atomically),
    which :func:`read_qrels` reads back."""
    with atomic_write(path) as fh:
        fh.write("query-id\tcorpus-id\tscore\n")
        for qid, docs in qrels.items():
            fh.writelines(f"{qid}\t{docid}\t{int(grade)}\n" for docid, grade in docs.items())


def _read_tabular(path: Path) -> Qrels:
    out = _QrelsBuilder()
    for lineno, line in iter_lines(path):
        parts = line.split("\t") if "\t" in line else line.split()
        if lineno == 1 and parts and parts[0].lower() in ("query-id", "query_id", "qid"):
            continue  # BEIR header
        if len(parts) == 4:  # TREC: qid Q0 docid rel
            qid, _, docid, rel = parts
        elif len(parts) == 3:  # BEIR: query-id corpus-id score
            qid, docid, rel = parts
        else:
            raise FormatError(path, lineno, "'qid Q0 docid rel' (TREC) or 'query-id<TAB>corpus-id<TAB>score' (BEIR)",
                              line)
        qid = check_id(qid.strip(), path, lineno, "a query id", whitespace=False)
        docid = check_id(docid.strip(), path, lineno, "a docid", whitespace=False)
        out.add(qid, docid, integer_grade(rel, path, lineno), path, lineno)
    return out.qrels


def _read_jsonl(path: Path) -> Qrels:
    out = _QrelsBuilder()
    for lineno, obj in read_jsonl(path, "a qrels object"):
        if "qrel" in obj:
            qid = first_key(obj, ("record_id", "query_id", "qid"))
            docs = obj["qrel"]
            if qid is None or not isinstance(docs, list):
                raise FormatError(path, lineno, "{record_id, qrel: [doc_id, ...]}", f"keys {sorted(obj)}")
            qid = check_id(qid, path, lineno, "a query id")
            for d in docs:
                out.add(qid, check_id(d, path, lineno, "docids in 'qrel'"), 1, path, lineno)
            continue
        qid = first_key(obj, ("query_id", "qid", "record_id"))
        docid = first_key(obj, ("doc_id", "docid", "corpus_id", "corpus-id"))
        if qid is None or docid is None:
            raise FormatError(path, lineno, "{query_id, doc_id, relevance} or {record_id, qrel: [...]}",
                              f"keys {sorted(obj)}")
        rel = first_key(obj, ("relevance", "score", "rel"))
        out.add(check_id(qid, path, lineno, "a query id"), check_id(docid, path, lineno, "a docid"),
                1 if rel is None else integer_grade(rel, path, lineno), path, lineno)
    return out.qrels


def canonical_qrels(qrels: Mapping[str, Mapping[str, int]]) -> Qrels:
    """``qrels`` (e.g. built in Python, not read here) with every docid through :func:`canonical_docid`;
    two spellings of one document keep the higher grade, as the readers do."""
    out: Qrels = {}
    for qid, docs in qrels.items():
        row = out.setdefault(str(qid), {})
        for docid, grade in docs.items():
            docid = canonical_docid(str(docid))
            row[docid] = max(grade, row.get(docid, grade))
    return out


def read_qrels(path: str | os.PathLike) -> Qrels:
    """Read qrels into ``{qid: {docid: grade}}``; a BEIR folder reads ``qrels/test.tsv`` or ``qrels.tsv``."""
    p = Path(path)
    if p.is_dir():
        for cand in ("qrels.tsv", "qrels/test.tsv", "qrels.jsonl", "qrels.txt"):
            if (p / cand).is_file():
                p = p / cand
                break
        else:
            raise FormatError(p, None, "a BEIR folder with qrels.tsv or qrels/test.tsv")
    if p.name.endswith((".jsonl", ".jsonl.gz")):
        return _read_jsonl(p)
    return _read_tabular(p)


# ---------------------------------------------------------------------------------------- duplicate groups

_GROUP_SUFFIXES = (".jsonl", ".jsonl.gz", ".parquet")


def _group_rows(path: Path) -> Iterator[tuple[Path, int, dict]]:
    """``(file, line, row)`` of a duplicate-group JSONL or parquet file, or of every such file of a folder."""
    if path.is_dir():
        files = sorted(f for f in path.iterdir() if f.is_file() and f.name.endswith(_GROUP_SUFFIXES))
        if not files:
            raise FormatError(path, None, "a folder holding *.jsonl or *.parquet duplicate groups", "none found")
    else:
        files = [path]
    for f in files:
        if not f.name.endswith(".parquet"):
            for lineno, obj in read_jsonl(f, "a duplicate group {doc_id, exact_duplicates, near_duplicates}"):
                yield f, lineno, obj
            continue
        for row, obj in enumerate(parquet_rows(f, batch_size=65536), start=1):
            yield f, row, obj  # parquet has no lines: the 1-based row stands in


def _docid_list(value, field: str, path, lineno) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(d, str) and d for d in value):
        raise FormatError(path, lineno, f"'{field}' as a list of doc id strings", repr(value)[:80])
    return [canonical_docid(check_id(d, path, lineno, f"doc ids in '{field}'")) for d in value]


def _near_list(value, path, lineno) -> list[tuple[str, float]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise FormatError(path, lineno, "'near_duplicates' as a list of {doc_id, jaccard} objects", repr(value)[:80])
    out = []
    for item in value:
        docid = item.get("doc_id") if isinstance(item, dict) else None
        jac = item.get("jaccard") if isinstance(item, dict) else None
        if (not isinstance(docid, str) or not docid or isinstance(jac, bool) or not isinstance(jac, (int, float))
                or not 0.0 <= jac <= 1.0):
            raise FormatError(path, lineno, "'near_duplicates' entries as {doc_id: string, jaccard: 0..1}",
                              repr(item)[:80])
        out.append((canonical_docid(check_id(docid, path, lineno, "a 'near_duplicates' doc_id")), float(jac)))
    return out


class DuplicateGroups:
    """Exact-duplicate classes (closed under transitivity) and near-duplicate links of a corpus.

    Read from cmass's ``corpus_duplicates`` rows ``{doc_id, exact_duplicates: [...], near_duplicates:
    [{doc_id, jaccard}], n_exact?, n_near?}`` (JSONL, parquet, or a folder of either) or from exact-group
    rows ``{doc_ids: [...]}``. Semantics, as cmass defines its duplicates (``DUPLICATES.md``):

    * exact duplicates are byte-identical, so they form equivalence classes: every listed pair is
      merged and the classes are closed (A = B and B = C puts A, B, C in one class), whether a file
      lists whole groups on every row or only some pairs;
    * near duplicates (``jaccard >= min_jaccard``; None: not used) are *not* transitive (A ~ B and
      B ~ C says nothing of A and C; single-linkage chains unrelated boilerplate), so only direct
      neighbours are taken: the neighbours of any member of a document's exact class, each with its own
      exact class (a byte-identical copy has the same Jaccard). Links are used in both directions.

    Docids are canonical (:func:`~hopscotch.retriever.io.docids.canonical_docid`): padded group files
    match unpadded qrels. The file is held in memory: for the full ClimbMix release, keep only the rows
    of judged documents first (cmass rows already list whole neighbourhoods, both directions).
    """

    def __init__(self, min_jaccard: float | None = None):
        if min_jaccard is not None and not 0.0 <= min_jaccard <= 1.0:
            raise UsageError(f"the near-duplicate Jaccard threshold must lie in [0, 1], got {min_jaccard}")
        self.min_jaccard = min_jaccard
        self._parent: dict[str, str] = {}
        self._near: dict[str, set[str]] = {}

    def _root(self, docid: str) -> str:
        parent = self._parent
        root = docid
        while parent.get(root, root) != root:
            root = parent[root]
        while docid != root:  # path compression
            parent[docid], docid = root, parent[docid]
        return root

    def merge_exact(self, docids: list[str]) -> None:
        """Put ``docids`` in one exact-duplicate class."""
        for d in docids:
            self._parent.setdefault(d, d)
        first = self._root(docids[0]) if docids else None
        for d in docids[1:]:
            root = self._root(d)
            if root != first:
                self._parent[root] = first

    def link_near(self, a: str, b: str, jaccard: float) -> None:
        """Record a near-duplicate pair (kept only at or above ``min_jaccard``)."""
        if self.min_jaccard is not None and jaccard >= self.min_jaccard and a != b:
            self._near.setdefault(a, set()).add(b)
            self._near.setdefault(b, set()).add(a)

    def add_row(self, obj: dict, path, lineno: int) -> None:
        """One row of a group file, checked (a bad field type is a :class:`FormatError` naming file:line)."""
        if "doc_ids" in obj and "doc_id" not in obj:
            self.merge_exact(_docid_list(obj["doc_ids"], "doc_ids", path, lineno))
            return
        docid = obj.get("doc_id")
        if not isinstance(docid, str) or not docid:
            raise FormatError(path, lineno, "a string 'doc_id' (or an exact group {doc_ids: [...]})",
                              f"keys {sorted(obj)[:8]}" if docid is None else repr(docid)[:80])
        docid = canonical_docid(check_id(docid, path, lineno, "a 'doc_id'"))
        self.merge_exact([docid, *_docid_list(obj.get("exact_duplicates"), "exact_duplicates", path, lineno)])
        for other, jaccard in _near_list(obj.get("near_duplicates"), path, lineno):
            self.link_near(docid, other, jaccard)

    def classes(self) -> dict[str, set[str]]:
        """Every exact class of two or more documents, keyed by each member."""
        by_root: dict[str, set[str]] = {}
        for d in self._parent:
            by_root.setdefault(self._root(d), set()).add(d)
        return {d: members for members in by_root.values() if len(members) > 1 for d in members}

    def same_documents(self):
        """``f(docid) -> set``: the documents that count as ``docid`` (itself, its exact class, and the exact
        classes of its direct near duplicates), as :meth:`expand` and ``synth --duplicate-groups`` use them."""
        exact = self.classes()
        same: dict[str, set[str]] = {}

        def duplicates(docid: str) -> set[str]:
            if docid not in same:
                members = exact.get(docid, {docid})
                out = set(members)
                for m in members:
                    for n in self._near.get(m, ()):
                        out |= exact.get(n, {n})
                same[docid] = out
            return same[docid]

        return duplicates

    def expand(self, qrels: Qrels) -> Qrels:
        """``qrels`` plus, for each relevant (grade > 0) document, its duplicates at its grade (the highest
        grade wins where several reach one document; judged documents keep a higher grade of their own)."""
        duplicates = self.same_documents()
        out: Qrels = {}
        for qid, docs in qrels.items():
            row = dict(docs)
            for docid, grade in docs.items():
                if grade <= 0:
                    continue
                for d in duplicates(docid):
                    if row.get(d, 0) < grade:
                        row[d] = grade
            out[qid] = row
        return out


def read_duplicate_groups(path: str | os.PathLike, min_jaccard: float | None = None) -> DuplicateGroups:
    """Read a duplicate-group file (or folder); see :class:`DuplicateGroups` for the formats and semantics."""
    p = Path(path)
    if not p.exists():
        raise UsageError(f"{p}: no such duplicate-group file or folder")
    groups = DuplicateGroups(min_jaccard)
    for f, lineno, obj in _group_rows(p):
        groups.add_row(obj, f, lineno)
    return groups


def expand_qrels_with_duplicates(qrels: Qrels, groups_path: str | os.PathLike,
                                 min_jaccard: float | None = None) -> Qrels:
    """Expand ``qrels`` over the duplicate groups at ``groups_path``: the closure over exact duplicates,
    and direct near duplicates with ``jaccard >= min_jaccard`` when it is given (:class:`DuplicateGroups`)."""
    return read_duplicate_groups(groups_path, min_jaccard).expand(qrels)
