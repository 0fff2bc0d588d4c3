"""The file formats Hopscotch reads and writes, in one place.

Corpora (JSONL, parquet, BEIR folders, ClimbMix-style shards), queries (JSONL, TSV), qrels (TREC,
BEIR TSV, BrowseComp-Plus JSONL), runs (TREC). Every reader streams and raises
:class:`~retriever.errors.FormatError` naming the file and line of a malformed record.
"""

from retriever.errors import FormatError
from retriever.io.common import atomic_write, read_jsonl, write_json, write_jsonl
from retriever.io.corpus import (Document, climbmix_id, corpus_files, count_documents, load_corpus_dict,
                                 read_corpus)
from retriever.io.qrels import Qrels, expand_qrels_with_duplicates, read_qrels
from retriever.io.queries import Query, load_queries, read_queries
from retriever.io.runs import Run, ranked, read_run, write_run

__all__ = [
    "FormatError", "atomic_write", "read_jsonl", "write_json", "write_jsonl",
    "Document", "climbmix_id", "corpus_files", "count_documents", "load_corpus_dict", "read_corpus",
    "Qrels", "expand_qrels_with_duplicates", "read_qrels",
    "Query", "load_queries", "read_queries",
    "Run", "ranked", "read_run", "write_run",
]
