"""Fixtures of the searcher tests."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def harness():
    """The harnesses' calling conventions (BrowseComp-Plus's registry and search tool, AgentIR's searcher and tool),
    as ``test_harness_protocol.py`` re-implements them: loaded from there, not copied."""
    path = Path(__file__).with_name("test_harness_protocol.py")
    spec = importlib.util.spec_from_file_location("hopscotch_harness_protocol", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
