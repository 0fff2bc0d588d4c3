"""Streaming readers and writers for the file formats of the field: corpora, queries, qrels, TREC runs,
training tuples and agent run records."""
