"""``hopscotch index`` refuses a flag that does nothing for the kind of model given (the one table,
``commands/index_plan.py:INDEX_FLAGS``), in a build and in ``--plan`` alike, before anything is written; a
multi-vector index rerun with other codec settings is refused unless ``--overwrite``; and ``--overwrite`` over a
changed corpus rebuilds the token index as a fresh build would (no stale compressed shard survives)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from hopscotch.retriever.commands.index_plan import INDEX_FLAGS, MULTI, SINGLE

#: a value for every flag of the table; a flag's own default where it has one, since giving it counts
VALUES = {"--nbits": "2", "--mv-centroids": "8", "--tokens-per-doc": "40", "--ram-gib": "64", "--multi-vector": None,
          "--spec": "Flat", "--layout": "auto", "--train-size": "100", "--gpu-index": "auto", "--dim": "8",
          "--max-length": "32", "--windows": "2", "--window-stride": "16", "--windows-per-doc": "1",
          "--docs": "300", "--avg-doc-bytes": "0", "--docs-per-second": "100", "--gpus": "1"}
KIND_FLAGS = [f for f in INDEX_FLAGS if f.kind]
PLAN_ONLY = [f for f in INDEX_FLAGS if f.plan_only]


def test_every_flag_of_the_table_has_a_value_here():
    assert set(VALUES) == {f.option for f in INDEX_FLAGS}
    assert {f.option for f in INDEX_FLAGS if f.kind == MULTI} == {"--nbits", "--mv-centroids", "--tokens-per-doc",
                                                                  "--ram-gib", "--multi-vector"}


def _given(flag) -> list[str]:
    value = VALUES[flag.option]
    return [flag.option] + ([] if value is None else [value])


def _snapshot(folder):
    return {p.relative_to(folder): (p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(folder.rglob("*"))
            if p.is_file()}


def _refused(cli, argv, *needles) -> str:
    code, out, err = cli(*argv)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and "Traceback" not in err and len(lines) == 1, (argv, err)
    assert all(n in lines[0] for n in needles), (needles, lines[0])
    return lines[0]


@pytest.fixture(scope="module")
def models(mv_world, tiny_bert_dir):
    return {SINGLE: tiny_bert_dir, MULTI: mv_world["mv"]}


def _other(kind: str) -> str:
    return SINGLE if kind == MULTI else MULTI


@pytest.mark.parametrize("flag", KIND_FLAGS, ids=lambda f: f.option)
def test_a_build_refuses_a_flag_for_the_other_kind_of_model(flag, models, mv_world, small_world_index, cli,
                                                           tmp_path):
    model = models[_other(flag.kind)]
    new = tmp_path / "idx"
    base = ["index", "--corpus", mv_world["corpus"], "--model", model, "--shard-size", "64"]
    line = _refused(cli, [*base, "--out", new, *_given(flag)], flag.option, f"applies to {flag.kind} models only",
                    f"{model} is a {_other(flag.kind)} model")
    assert line.split("error: ", 1)[1].startswith(flag.option) and not new.exists()
    existing = {SINGLE: small_world_index, MULTI: mv_world["idx"]}[_other(flag.kind)]  # an index of that model
    before = _snapshot(existing)
    _refused(cli, [*base, "--out", existing, *_given(flag)], flag.option, "applies to")
    assert _snapshot(existing) == before


@pytest.mark.parametrize("flag", KIND_FLAGS, ids=lambda f: f.option)
def test_a_plan_refuses_a_flag_for_the_other_kind_of_model(flag, models, cli):
    model = models[_other(flag.kind)]
    _refused(cli, ["index", "--plan", "--model", model, "--docs", "1000", *_given(flag)], flag.option,
             f"applies to {flag.kind} models only")
    if flag.bare_plan_any_kind or flag.option == "--multi-vector":
        return  # without --model: --dim is the width planned for, --multi-vector the kind itself
    kind = ["--multi-vector"] if flag.kind == SINGLE else []  # without --model, --multi-vector decides the kind
    _refused(cli, ["index", "--plan", "--docs", "1000", "--dim", "16", *kind, *_given(flag)], flag.option,
             f"applies to {flag.kind} models only", "--multi-vector")


@pytest.mark.parametrize("flag", PLAN_ONLY, ids=lambda f: f.option)
def test_a_build_refuses_a_plan_only_flag(flag, models, mv_world, cli, tmp_path):
    model = models[flag.kind or SINGLE]  # the flag's own kind: only --plan is missing
    out = tmp_path / "idx"
    _refused(cli, ["index", "--corpus", mv_world["corpus"], "--model", model, "--out", out, *_given(flag)],
             flag.option, "applies to --plan only", "--plan")
    assert not out.exists()


def test_the_same_flags_pass_with_their_own_kind_in_a_plan(models, cli):
    single = [a for f in KIND_FLAGS if f.kind == SINGLE and f.option != "--dim" for a in _given(f)]
    code, out, err = cli("index", "--plan", "--model", models[SINGLE], "--docs", "1000", *single)
    assert code == 0 and "dim 32" in out, err
    multi = [a for f in KIND_FLAGS if f.kind == MULTI and f.option != "--mv-centroids" for a in _given(f)]
    code, out, err = cli("index", "--plan", "--model", models[MULTI], "--docs", "1000", *multi)
    assert code == 0 and "dim 16" in out and "8 B a token" in out, err  # --nbits 2 as given
    code, out, err = cli("index", "--plan", "--docs", "1000", "--dim", "16", *multi)   # --multi-vector among them
    assert code == 0 and "8 B a token" in out, err


def test_import_tevatron_builds_single_vectors(cli, tmp_path):
    out = tmp_path / "idx"
    for flag in ("--nbits", "--mv-centroids"):
        _refused(cli, ["index", "--import-tevatron", str(tmp_path / "corpus.*.pkl"), "--out", out, flag, "4"], flag,
                 "applies to multi-vector models only", "--import-tevatron builds a single-vector index")
    assert not out.exists()


# --- a multi-vector rerun with other codec settings -------------------------------------------------------------

def _mv_args(mv_world, corpus, out, *flags):
    return ["index", "--corpus", corpus, "--model", mv_world["mv"], "--out", out, "--shard-size", "64", *flags]


def _mv_arrays(idx):
    return {p.name: np.load(p) for p in sorted((idx / "mv").glob("*.npy"))}


def test_other_codec_settings_are_refused_untouched_then_rebuilt_with_overwrite(mv_world, cli, tmp_path):
    idx = tmp_path / "idx"
    shutil.copytree(mv_world["idx"], idx)
    before = _snapshot(idx)
    old = "--nbits 8 --mv-centroids 64"
    for flags, new in ((["--nbits", "2", "--mv-centroids", "64"], "--nbits 2 --mv-centroids 64"),
                       (["--nbits", "8", "--mv-centroids", "32"], "--nbits 8 --mv-centroids 32"),
                       (["--mv-centroids", "64"], "--nbits 2 --mv-centroids 64")):   # --nbits left at its default
        _refused(cli, _mv_args(mv_world, mv_world["corpus"], idx, *flags),
                 f"{idx / 'mv'} holds a codec trained with {old}; this run asks {new}: rerun with --overwrite")
        assert _snapshot(idx) == before
    code, _, err = cli(*_mv_args(mv_world, mv_world["corpus"], idx, "--nbits", "2", "--mv-centroids", "64",
                                 "--overwrite"))
    assert code == 0, err
    assert json.loads((idx / "index.json").read_text())["multi_vector"]["nbits"] == 2
    fresh = tmp_path / "fresh"
    assert cli(*_mv_args(mv_world, mv_world["corpus"], fresh, "--nbits", "2", "--mv-centroids", "64"))[0] == 0
    got, want = _mv_arrays(idx), _mv_arrays(fresh)
    assert got.keys() == want.keys() and all(np.array_equal(got[k], want[k]) for k in want)


def test_the_library_refuses_or_recompresses_in_place_with_overwrite(mv_world, tmp_path):
    from hopscotch.retriever.errors import UsageError
    from hopscotch.retriever.index.layout import IndexMeta
    from hopscotch.retriever.index.multi_vector.build import MultiVectorOptions, build_multi_vector_index

    idx = tmp_path / "idx"
    shutil.copytree(mv_world["idx"], idx)
    before = _snapshot(idx)
    opts = dict(num_centroids=64, show_progress=False)
    with pytest.raises(UsageError, match=r"holds a codec trained with --nbits 8 --mv-centroids 64 seed 13; this run "
                                         r"asks --nbits 8 --mv-centroids 64 seed 5"):
        build_multi_vector_index(idx, IndexMeta.load(idx), MultiVectorOptions(nbits=8, seed=5, **opts))
    assert _snapshot(idx) == before
    shards = {p.name: p.stat().st_mtime_ns for p in (idx / "shards").iterdir()}
    meta = build_multi_vector_index(idx, IndexMeta.load(idx), MultiVectorOptions(nbits=4, overwrite=True, **opts))
    assert meta.multi_vector["nbits"] == 4 and np.load(idx / "mv" / "shard_00000.residuals.npy").shape[1] == 8
    assert {p.name: p.stat().st_mtime_ns for p in (idx / "shards").iterdir()} == shards  # recompressed, not encoded


def test_overwrite_over_a_changed_corpus_rebuilds_the_token_index_afresh(mv_world, cli, tmp_path):
    idx = tmp_path / "idx"
    shutil.copytree(mv_world["idx"], idx)  # 300 documents: 5 shards of 64
    changed = tmp_path / "changed.jsonl"
    changed.write_text("".join(reversed(mv_world["corpus"].read_text().splitlines(keepends=True)[:200])))
    settings = ("--nbits", "8", "--mv-centroids", "64")
    _refused(cli, _mv_args(mv_world, changed, idx, *settings), "changed since the shards were written", "--overwrite")
    code, _, err = cli(*_mv_args(mv_world, changed, idx, *settings, "--overwrite"))
    assert code == 0, err
    fresh = tmp_path / "fresh"
    assert cli(*_mv_args(mv_world, changed, fresh, *settings))[0] == 0
    assert sorted(p.name for p in (idx / "mv").iterdir()) == sorted(p.name for p in (fresh / "mv").iterdir())
    assert not (idx / "mv" / "shard_00004.done.json").exists()  # 4 shards now: the old fifth one went with mv/
    got, want = _mv_arrays(idx), _mv_arrays(fresh)
    assert got.keys() == want.keys() and all(np.array_equal(got[k], want[k]) for k in want)
    assert json.loads((idx / "mv" / "codec.json").read_text()) == json.loads((fresh / "mv" / "codec.json").read_text())


def test_check_encode_config_overwrite_removes_the_token_index(tmp_path):
    from hopscotch.retriever.index.multi_vector.build import MV_DIR
    from hopscotch.retriever.index.shard_files import check_encode_config

    (tmp_path / MV_DIR).mkdir()
    (tmp_path / MV_DIR / "shard_00000.done.json").write_text("{}")
    check_encode_config(tmp_path, {"format": 2}, overwrite=True)
    assert not (tmp_path / MV_DIR).exists() and (tmp_path / "encode_config.json").is_file()
