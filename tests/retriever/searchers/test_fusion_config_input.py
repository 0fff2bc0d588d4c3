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


# --- one reader, the CLI's defaults, no contradictions (issue 36, mechanism 5) ----------------------------------

def _config(tmp_path, obj):
    import json

    path = tmp_path / "fusion.json"
    path.write_text(json.dumps(obj))
    return path


def test_a_config_without_parameters_is_the_cli_default_of_its_method(tmp_path):
    from hopscotch.retriever.searchers.fusion import default_settings, read_fusion_config

    for method in ("interp", "rrf", "adaptive"):
        assert read_fusion_config(_config(tmp_path, {"method": method})) == default_settings(method), method
    adaptive = read_fusion_config(_config(tmp_path, {"method": "adaptive", "sparse_weight": 0.4}))
    assert adaptive.adapt == default_settings("adaptive").adapt > 0   # never a plain interpolation
    assert read_fusion_config(_config(tmp_path, {"method": "rrf", "weights": None})).weights is None   # plain RRF


@pytest.mark.parametrize("obj,needle", [
    ({"method": "interp", "rrf_k": 60}, "'rrf_k' does not apply to method 'interp'"),
    ({"method": "rrf", "alpha": 0.5}, "'alpha' does not apply to method 'rrf'"),
    ({"method": "adaptive", "weights": [1, 1]}, "'weights' does not apply"),
    ({"method": "interp", "alpha": 1.0, "sparse_weight": 0.2}, "contradicts 'alpha'"),
    ({"method": "interp", "weight_on_dense": True}, "'weight_on_dense' needs 'alpha'"),
    ({"method": "interp", "sparse_weight": 0.2, "weight_on_dense": True}, "contradicts 'sparse_weight'"),
    ({"method": "max"}, "unknown method"),
])
def test_contradictory_keys_are_refused(tmp_path, obj, needle):
    from hopscotch.retriever.errors import UsageError
    from hopscotch.retriever.searchers.fusion import read_fusion_config

    with pytest.raises(UsageError, match="fusion.json") as err:
        read_fusion_config(_config(tmp_path, obj))
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_what_to_json_writes_reads_back(tmp_path):
    from hopscotch.retriever.searchers.fusion import DEFAULT_ADAPTIVE, DEFAULT_INTERP, DEFAULT_RRF, FusionSettings
    from hopscotch.retriever.searchers.fusion import read_fusion_config

    for settings in (DEFAULT_INTERP, DEFAULT_RRF, DEFAULT_ADAPTIVE, FusionSettings.convex(0.8, "zscore"),
                     FusionSettings("rrf", rrf_k=60.0)):
        assert read_fusion_config(_config(tmp_path, settings.to_json())) == settings
