"""Every flag of every backend is either used or refused, per effective backend (the registry's rule).

A table states, for each way of selecting a searcher (BM25; dense over a single-vector index; ``dense`` named over
a multi-vector index; ``multi_vector``; hybrid over either index; hybrid whose BM25 half is an endpoint; remote), which
backend flags the search uses. For
each (selection, flag) pair the test gives the flag on a command line as ``hopscotch search`` parses it:

* a used flag builds the searcher, and the builder read the flag (the namespace records what is read);
* any other flag is a :class:`UsageError` naming it, raised before a model is loaded.

A flag added to any backend without a row here fails :func:`test_the_table_names_every_backend_flag`.
"""

from __future__ import annotations

import argparse
import json

import pytest

from hopscotch.retriever.errors import UsageError

RERANK = {"rerank_model", "rerank_depth", "rerank_cache", "rerank_late_fusion", "rerank_windows",
          "rerank_first_weight"}
EXPANSION = {"bm25_reasoning", "bm25_query_weight", "bm25_terms", "bm25_reasoning_weight", "bm25_k3"}
DENSE = {"model", "instruction", "query_input", "late_fusion", "late_fusion_max_words", "late_fusion_long",
         "nprobe", "ef_search", "refine", "first_windows_only", "dim", "faiss_name"}
MULTI_VECTOR = {"model", "query_input", "late_fusion", "nprobe", "mv_candidates"}
FUSION = {"fusion", "adapt", "adapt_shift", "alpha", "normalization", "rrf_k", "rrf_weights", "depth", "fusion_config"}
REMOTE = {"name", "token", "remote_timeout"}
REMOTE_BM25 = {"bm25_token", "remote_timeout"}
#: flags that select the searcher: in every selection's own command line, not tested one by one
STRUCTURAL = {"bm25", "index", "url", "bm25_url"}

#: selection -> the flags a search so selected uses
USES = {
    "bm25": {"corpus"} | EXPANSION | RERANK,
    "dense": DENSE | RERANK,
    "dense-named-on-multi-vector": MULTI_VECTOR | RERANK,
    "multi_vector": MULTI_VECTOR | RERANK,
    "hybrid": EXPANSION | DENSE | FUSION | RERANK,
    "hybrid-on-multi-vector": EXPANSION | MULTI_VECTOR | FUSION | RERANK,
    "hybrid-remote-bm25": EXPANSION | DENSE | FUSION | RERANK | REMOTE_BM25,
    "remote": REMOTE | RERANK,
}
#: (selection, flag) -> the refusal's words, where the flag is declared by the selected backend but refused by
#: what the index is (its FAISS index has no HNSW graph)
REFUSED_BY_INDEX = {("dense", "ef_search"): "has no HNSW graph", ("hybrid", "ef_search"): "has no HNSW graph",
                    ("hybrid-remote-bm25", "ef_search"): "has no HNSW graph"}


@pytest.fixture(scope="module")
def world(small_world, small_world_index, mv_world, tmp_path_factory):
    from hopscotch.retriever.cli import main
    from hopscotch.retriever.index.faiss_index import build_faiss_index
    from hopscotch.retriever.index.layout import IndexMeta
    from hopscotch.retriever.searchers import build_searcher
    from hopscotch.retriever.serving.server import make_server, serve_in_thread

    root = tmp_path_factory.mktemp("flag_usage")
    build_faiss_index(small_world_index, "IVF4,Flat", layout="merged", train_size=None, use_gpu=False)
    meta = IndexMeta.load(small_world_index)
    assert main(["bm25-index", "--corpus", str(small_world / "corpus.jsonl"), "--out", str(root / "bm25")]) == 0
    (root / "fusion.json").write_text(json.dumps({"method": "interp", "alpha": 0.5}))
    # the BM25 endpoint of the hybrid whose BM25 half is remote (--bm25-url), probed when it is built
    server = make_server({"wiki": build_searcher("bm25", bm25=root / "bm25", corpus=small_world / "corpus.jsonl")},
                         port=0)
    serve_in_thread(server)
    yield {"bm25": root / "bm25", "corpus": small_world / "corpus.jsonl", "sv": small_world_index,
           "sv_model": meta.model_path, "sv_dim": meta.dim, "faiss": meta.faiss["default"],
           "mv": mv_world["idx"], "mv_model": mv_world["mv"], "fusion": root / "fusion.json", "root": root,
           "bm25_url": f"{server.url}/v1/wiki"}
    server.shutdown_and_close()


def selection(name: str, w) -> list[str]:
    return {"bm25": ["--bm25", w["bm25"], "--corpus", w["corpus"]],  # documents for the reranker
            "dense": ["--index", w["sv"]],
            "dense-named-on-multi-vector": ["--searcher-type", "dense", "--index", w["mv"]],
            "multi_vector": ["--index", w["mv"]],
            "hybrid": ["--bm25", w["bm25"], "--index", w["sv"]],
            "hybrid-on-multi-vector": ["--bm25", w["bm25"], "--index", w["mv"]],
            "hybrid-remote-bm25": ["--bm25-url", w["bm25_url"], "--index", w["sv"]],
            "remote": ["--url", "http://127.0.0.1:9"]}[name]


def flag_argv(dest: str, name: str, w) -> list:
    """The command-line words giving ``dest`` a valid value (with the flags it needs beside it)."""
    multi = "multi" in name
    rerank = ["--rerank-model", w["mv_model"]]
    return {"corpus": ["--corpus", w["corpus"]],
            "bm25_reasoning": ["--bm25-reasoning", "reasoning_tail:16"],
            "bm25_query_weight": ["--bm25-query-weight", "3"],
            "bm25_terms": ["--bm25-terms", "20"],
            "bm25_reasoning_weight": ["--bm25-reasoning-weight", "2"],
            "bm25_k3": ["--bm25-k3", "1.2"],
            "model": ["--model", w["mv_model"] if multi else w["sv_model"]],
            "instruction": ["--instruction", "Q: "],
            "query_input": ["--query-input", "reasoning"],
            "late_fusion": ["--query-mix", "0.5"],
            "late_fusion_max_words": ["--query-mix-max-words", "10"],
            "late_fusion_long": ["--query-mix-max-words", "10", "--query-mix-long", "0.3"],
            "nprobe": ["--nprobe", "2"],
            "ef_search": ["--ef-search", "16"],
            "refine": ["--refine", "2"],
            "first_windows_only": ["--first-windows-only"],
            "dim": ["--dim", w["sv_dim"]],
            "faiss_name": ["--faiss", w["faiss"]],
            "mv_candidates": ["--mv-candidates", "50"],
            "fusion": ["--fusion", "rrf"],
            "adapt": ["--adapt", "1"],
            "adapt_shift": ["--adapt-shift", "0"],
            "alpha": ["--alpha", "0.5"],
            "normalization": ["--normalization", "minmax"],
            "rrf_k": ["--rrf-k", "30"],
            "rrf_weights": ["--rrf-weights", "1,2"],
            "depth": ["--depth", "50"],
            "fusion_config": ["--fusion-config", w["fusion"]],
            "name": ["--name", "wiki"],
            "token": ["--token", "secret"],
            "bm25_token": ["--bm25-token", "secret"],
            "remote_timeout": ["--remote-timeout", "30"],
            "rerank_model": rerank,
            "rerank_depth": rerank + ["--rerank-depth", "20"],
            "rerank_cache": rerank + ["--rerank-cache", w["root"] / "rerank_cache"],
            "rerank_late_fusion": rerank + ["--rerank-query-mix", "0.5"],
            "rerank_windows": rerank + ["--rerank-windows", "2"],
            "rerank_first_weight": rerank + ["--rerank-first-weight", "0.3"]}[dest]


class ReadRecorder(argparse.Namespace):
    """A namespace that records the attributes read from it (what the searcher's builder looked at)."""

    def __getattribute__(self, name):
        if not name.startswith("_"):
            object.__getattribute__(self, "__dict__").setdefault("_read", set()).add(name)
        return object.__getattribute__(self, name)


def parse(argv: list) -> ReadRecorder:
    from hopscotch.retriever.searchers import add_searcher_arguments

    parser = argparse.ArgumentParser()
    add_searcher_arguments(parser)
    return parser.parse_args([str(a) for a in argv], namespace=ReadRecorder())


def all_backend_dests() -> set[str]:
    from hopscotch.retriever.searchers import SEARCHERS
    from hopscotch.retriever.searchers.registry import backend_dests

    return set().union(*(backend_dests(cls) for cls in SEARCHERS.values()))


def test_the_table_names_every_backend_flag():
    from hopscotch.retriever.searchers import SEARCHERS
    from hopscotch.retriever.searchers.registry import backend_dests

    tested = set().union(*USES.values()) | STRUCTURAL
    assert all_backend_dests() == tested
    for name in ("bm25", "dense", "multi_vector", "hybrid", "remote"):  # each selection uses only its flags
        declared = backend_dests(SEARCHERS[name])
        assert USES[name] <= declared, (name, USES[name] - declared)


CASES = [(name, dest) for name in USES for dest in sorted(all_backend_dests() - STRUCTURAL)]


@pytest.mark.parametrize("name, dest", CASES, ids=[f"{n}-{d}" for n, d in CASES])
def test_every_flag_is_used_or_refused(world, name, dest, monkeypatch):
    from hopscotch.retriever.searchers import searcher_from_args
    from hopscotch.retriever.searchers.registry import backend_options
    from hopscotch.retriever.searchers.hybrid import HybridSearcher

    args = parse(selection(name, world) + flag_argv(dest, name, world))
    option = backend_options(HybridSearcher).get(dest) or f"--{dest.replace('_', '-')}"
    if dest in USES[name] and (name, dest) not in REFUSED_BY_INDEX:
        vars(args).pop("_read", None)
        searcher = searcher_from_args(args)
        try:
            assert dest in vars(args)["_read"], f"{option} was accepted but never read"
        finally:
            searcher.close()
        return
    if (name, dest) not in REFUSED_BY_INDEX:  # refused before anything loads: no model is built
        import hopscotch.retriever.searchers.dense as dense_module
        import hopscotch.retriever.searchers.multi_vector_index as mv_module

        def no_model(*a, **k):
            raise AssertionError("a model was loaded before the flag was refused")

        monkeypatch.setattr(dense_module.DenseSearcher, "__init__", no_model)
        monkeypatch.setattr(mv_module.MultiVectorIndexSearcher, "__init__", no_model)
    with pytest.raises(UsageError) as err:
        searcher_from_args(args)
    message = str(err.value)
    assert option in message and "\n" not in message, message
    assert REFUSED_BY_INDEX.get((name, dest), "") in message


@pytest.mark.parametrize("kind, on, wrong", [
    ("dense", "mv", ["--instruction", "Q: "]),
    ("dense", "mv", ["--dim", "16"]),
    ("hybrid", "mv", ["--refine", "2"]),
    ("hybrid", "sv", ["--mv-candidates", "9"]),
], ids=["dense-instruction", "dense-dim", "hybrid-refine", "hybrid-mv-candidates"])
def test_a_harness_namespace_is_held_to_the_same_rule(world, kind, on, wrong):
    """BrowseComp-Plus builds ``SEARCHERS[kind](args)`` without the registry's command-line check: a value of a flag
    the effective backend does not use is still refused (the vector half checks the other kind's flags)."""
    from hopscotch.retriever.searchers import SEARCHERS

    parser = argparse.ArgumentParser()
    SEARCHERS[kind].parse_args(parser)
    argv = (["--bm25", str(world["bm25"])] if kind == "hybrid" else []) + ["--index", str(world[on])] + wrong
    with pytest.raises(UsageError, match=wrong[0]):
        SEARCHERS[kind](parser.parse_args(argv))
