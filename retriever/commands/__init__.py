"""Subcommands of the ``hopscotch`` CLI, one module each (see :mod:`hopscotch.retriever.cli`)."""
