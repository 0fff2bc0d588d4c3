"""Relevance judgement readers: TREC 4-column, BEIR TSV with header, and two JSONL shapes.

JSONL shapes (BrowseComp-Plus projected onto ClimbMix): ``{query_id, doc_id, relevance}`` rows, or
``{record_id, qrel: [doc_id, ...]}`` rows (every listed document relevant with grade 1).
"""

from __future__ import annotations

import os
from pathlib import Path

from hopscotch.retriever.errors import FormatError
from hopscotch.retriever.io.common import first_key, iter_lines, read_jsonl

Qrels = dict[str, dict[str, int]]


def _grade(value, path, lineno) -> int:
    try:
        return int(float(value))
    except (TypeError, ValueError):
        raise FormatError(path, lineno, "an integer relevance grade", str(value)) from None


def _read_tabular(path: Path) -> Qrels:
    qrels: Qrels = {}
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
        qrels.setdefault(qid.strip(), {})[docid.strip()] = _grade(rel, path, lineno)
    return qrels


def _read_jsonl(path: Path) -> Qrels:
    qrels: Qrels = {}
    for lineno, obj in read_jsonl(path, "a qrels object"):
        if "qrel" in obj:
            qid = first_key(obj, ("record_id", "query_id", "qid"))
            docs = obj["qrel"]
            if qid is None or not isinstance(docs, list):
                raise FormatError(path, lineno, "{record_id, qrel: [doc_id, ...]}", f"keys {sorted(obj)}")
            for d in docs:
                qrels.setdefault(str(qid), {})[str(d)] = 1
            continue
        qid = first_key(obj, ("query_id", "qid", "record_id"))
        docid = first_key(obj, ("doc_id", "docid", "corpus_id", "corpus-id"))
        if qid is None or docid is None:
            raise FormatError(path, lineno, "{query_id, doc_id, relevance} or {record_id, qrel: [...]}",
                              f"keys {sorted(obj)}")
        rel = first_key(obj, ("relevance", "score", "rel"))
        qrels.setdefault(str(qid), {})[str(docid)] = 1 if rel is None else _grade(rel, path, lineno)
    return qrels


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


def expand_qrels_with_duplicates(qrels: Qrels, groups_path: str | os.PathLike,
                                 min_jaccard: float | None = None) -> Qrels:
    """Add a relevant document's exact (and optionally near, ``jaccard >= min_jaccard``) duplicates.

    ``groups_path`` is JSONL of ``{doc_id, exact_duplicates: [...], near_duplicates: [{doc_id, jaccard}]}``.
    """
    dups: dict[str, set[str]] = {}
    for lineno, obj in read_jsonl(groups_path, "a duplicate group {doc_id, exact_duplicates, near_duplicates}"):
        if "doc_id" not in obj:
            raise FormatError(groups_path, lineno, "a 'doc_id' field", f"keys {sorted(obj)}")
        same = set(map(str, obj.get("exact_duplicates") or []))
        if min_jaccard is not None:
            for near in obj.get("near_duplicates") or []:
                if float(near.get("jaccard", 0.0)) >= min_jaccard:
                    same.add(str(near["doc_id"]))
        dups.setdefault(str(obj["doc_id"]), set()).update(same)
    out: Qrels = {}
    for qid, docs in qrels.items():
        row = dict(docs)
        for docid, grade in docs.items():
            for d in dups.get(docid, ()):
                row[d] = max(row.get(d, 0), grade)
        out[qid] = row
    return out
