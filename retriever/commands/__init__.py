"""Subcommands of the ``hopscotch`` CLI, one module each (see :mod:`retriever.cli`)."""
