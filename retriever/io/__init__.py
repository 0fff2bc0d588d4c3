"""Streaming readers and writers for the file formats of the field (see :mod:`hopscotch.retriever.formats`)."""
