"""``read_fusion_config`` reads its file through the one input boundary: every bad file is a FormatError
naming it (too deeply nested JSON, bad bytes, invalid JSON, a non-object), never a RecursionError."""

from __future__ import annotations

import json

import pytest

from hopscotch.retriever.errors import FormatError
from hopscotch.retriever.searchers.fusion import FusionSettings, read_fusion_config


def test_deeply_nested_json_is_a_format_error(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"method": "rrf", "x": ' + "[" * 200_000 + "]" * 200_000 + "}")
    with pytest.raises(FormatError, match="nested too deeply") as err:
        read_fusion_config(path)
    assert str(path) in str(err.value)


@pytest.mark.parametrize("raw, match, line", [
    (b'{"method": "rrf",\n "rrf_k": }', "invalid JSON", 2),        # the syntax error's own line
    (b'{"method": "rrf", "x": "\xff"}', "UTF-8", 1),                 # not UTF-8
    (b'["rrf"]', "list", None),                                        # not an object
    (b"", "invalid JSON", 1),                                          # empty file
])
def test_bad_files_are_format_errors(tmp_path, raw, match, line):
    path = tmp_path / "bad.json"
    path.write_bytes(raw)
    with pytest.raises(FormatError, match=match) as err:
        read_fusion_config(path)
    assert err.value.line == line and str(path) in str(err.value)


def test_missing_file_is_a_format_error(tmp_path):
    with pytest.raises(FormatError):
        read_fusion_config(tmp_path / "absent.json")


def test_good_file_with_a_bom_still_reads(tmp_path):
    settings = FusionSettings.convex(0.3)
    path = tmp_path / "tuned.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(settings.to_json(), indent=2).encode())
    assert read_fusion_config(path) == settings
