"""Hopscotch searchers dropped unchanged into the agent harnesses BrowseComp-Plus and AgentIR.

The harness side is re-implemented here from the upstream code (logic only): BrowseComp-Plus's
``search_agent/openai_client.py`` (its own flags, the searcher registry's ``parse_args(parser)`` then
``SearcherClass(args)`` or ``SearcherClass(reranker, args)``, ``SearchToolHandler._search`` /
``_get_document``) and AgentIR's ``evaluation/search_agent/tongyi_client.py`` + ``tools/tool_search.py``
(``searcher.search(q, k, store_rerank=True, **kwargs)``, ``result["results"]``, titles from each snippet's
first line, ``Reasoning: ...\\n\\nQuery: ...`` queries). Each runs against every searcher kind: bm25, dense,
hybrid and remote (a ``hopscotch serve`` REST service in a thread over the BM25 searcher).
"""

from __future__ import annotations

import argparse
import json

import pytest

from hopscotch.retriever.searchers.harness import harness_query
from hopscotch.retriever.searchers import SEARCHERS, build_searcher
from hopscotch.retriever.io.queries import queries_of

K = 4
QUERY = "shipbuilding company headquarters city"
KINDS = ["bm25", "dense", "hybrid", "remote"]


# --- BrowseComp-Plus, re-implemented -------------------------------------------------------------------------

def bcp_parser() -> argparse.ArgumentParser:
    """openai_client.main's own flags: ``--model`` is the agent's LLM, ``--k`` the hits per search."""
    p = argparse.ArgumentParser()
    p.add_argument("--query", default="topics-qrels/queries.tsv")
    p.add_argument("--model", default="gpt-4.1")
    p.add_argument("--max_tokens", type=int, default=10000)
    p.add_argument("--output-dir", default="runs/bm25/gpt_4_1")
    p.add_argument("--searcher-type", choices=list(SEARCHERS), required=True)
    p.add_argument("--reranker-type", default=None)
    p.add_argument("--snippet-max-tokens", type=int, default=512)
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--get-document", action="store_true")
    p.add_argument("--hf-token")
    p.add_argument("--hf-home")
    return p


def bcp_build(argv: list[str], reranker=None, reranker_generation: bool = False):
    """The registry: parse the known flags, add the searcher's own, parse again, construct from ``args``."""
    parser = bcp_parser()
    temp_args, _ = parser.parse_known_args(argv)
    searcher_class = SEARCHERS[temp_args.searcher_type]
    searcher_class.parse_args(parser)
    args = parser.parse_args(argv)
    searcher = searcher_class(reranker, args) if reranker_generation else searcher_class(args)
    return searcher, args


class BcpSearchToolHandler:
    """``SearchToolHandler``: snippets are the first ``snippet_max_tokens`` tokens of each hit's ``text``."""

    def __init__(self, searcher, snippet_max_tokens=None, k=5, tokenizer=None, with_query_id=True):
        self.searcher, self.snippet_max_tokens, self.k = searcher, snippet_max_tokens, k
        self.tokenizer, self.with_query_id = tokenizer, with_query_id

    def _search(self, query: str, query_id: str | None = None) -> str:
        if self.with_query_id:  # the reranker generation of the harness
            candidates = self.searcher.search(query, query_id, self.k)
        else:
            candidates = self.searcher.search(query, self.k)
        for cand in candidates:
            text = cand["text"]
            if self.snippet_max_tokens and self.snippet_max_tokens > 0 and self.tokenizer:
                tokens = self.tokenizer.encode(text, add_special_tokens=False)
                cand["snippet"] = (self.tokenizer.decode(tokens[:self.snippet_max_tokens], skip_special_tokens=True)
                                   if len(tokens) > self.snippet_max_tokens else text)
            else:
                cand["snippet"] = text
        results = [{"docid": c["docid"], "snippet": c["snippet"]} if c.get("score") is None else
                   {"docid": c["docid"], "score": c["score"], "snippet": c["snippet"]} for c in candidates]
        return json.dumps(results, indent=2)

    def _get_document(self, docid: str) -> str:
        result = self.searcher.get_document(docid)
        if result is None:
            return json.dumps({"error": f"Document with docid '{docid}' not found"})
        return json.dumps(result, indent=2)


# --- AgentIR, re-implemented ---------------------------------------------------------------------------------

def agentir_parser() -> argparse.ArgumentParser:
    """tongyi_client.main's own flags: ``--model`` and ``--port`` are the LLM's."""
    p = argparse.ArgumentParser()
    p.add_argument("--query", default="topics-qrels/queries.tsv")
    p.add_argument("--model", default="Alibaba-NLP/Tongyi-DeepResearch-30B-A3B")
    p.add_argument("--port", type=int, default=6008)
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--searcher-type", required=True)
    p.add_argument("--reasoning-aware", action="store_true")
    p.add_argument("--QA-jsonl")
    p.add_argument("--prepend-oracle", action="store_true")
    p.add_argument("--corpus-path", default="Tevatron/browsecomp-plus-corpus")
    return p


def format_reasoning_query(query: str, thinking: str | None) -> str:
    return f"Reasoning: {thinking if thinking else 'Empty'}\n\nQuery: {query}"


class AgentIRSearchTool:
    """``SearchToolHandler`` of AgentIR: any exception becomes a 'Search error' response, as upstream."""

    def __init__(self, searcher, k: int = 5, reasoning_aware: bool = False):
        self.searcher, self.k, self.reasoning_aware = searcher, k, reasoning_aware

    @staticmethod
    def title_of(snippet: str) -> str:
        if snippet.startswith("---\ntitle:"):
            lines = snippet.split("\n")
            if len(lines) > 1:
                return lines[1].replace("title:", "").strip().strip('"')
        first = snippet.split("\n")[0].strip()
        return first[:50] + "..." if len(first) > 50 else first

    def search(self, query: str, **kwargs) -> dict:
        k = kwargs.pop("k", self.k)
        display = kwargs.get("original_query") or query
        try:
            result = self.searcher.search(query, k, store_rerank=True, **kwargs)
            results = result.get("results", [])
            if not results:
                return {"response": f"No results found for '{display}'.", "docids": []}
            lines = [f"{i}. [{self.title_of(r['snippet'])}]\n{r['snippet']}" for i, r in enumerate(results, 1)]
            result.update({"response": f"A search for '{display}' found {len(lines)} results:\n\n## Web Results\n"
                                       + "\n\n".join(lines), "docids": [str(r["docid"]) for r in results]})
            return result
        except Exception as e:  # noqa: BLE001 - the harness's own behaviour
            return {"response": f"Search error for query '{display}': {e}", "docids": []}

    def handle_single(self, original_query: str, thinking: str | None, positives=None) -> dict:
        query = format_reasoning_query(original_query, thinking) if self.reasoning_aware else original_query
        kwargs = {"oracle_question": "the global question", "original_query": original_query}
        if positives:
            kwargs["prepend_candidates"] = [p.copy() for p in positives]
        return self.search(query, **kwargs)


# --- fixtures ------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def world(small_world, small_world_index, tiny_bert_dir, tmp_path_factory):
    """A BM25 index and the dense index of the small world, and a REST service over the BM25 searcher."""
    from hopscotch.retriever.index.bm25 import BM25Index
    from hopscotch.retriever.io.corpus import read_corpus
    from hopscotch.retriever.serving.server import make_server, serve_in_thread

    bm25 = tmp_path_factory.mktemp("harness") / "bm25"
    BM25Index.build(read_corpus(small_world / "corpus.jsonl")).save(bm25)
    corpus = small_world / "corpus.jsonl"
    behind = build_searcher("bm25", bm25=bm25, corpus=corpus)
    server = make_server({"wiki": behind}, port=0)
    serve_in_thread(server)
    refs = {"bm25": behind, "remote": behind, "dense": build_searcher("dense", index=small_world_index),
            "hybrid": build_searcher("hybrid", bm25=bm25, index=small_world_index)}
    argv = {"bm25": ["--bm25", str(bm25), "--corpus", str(corpus)],
            "dense": ["--index", str(small_world_index), "--hopscotch-model", str(tiny_bert_dir)],
            "hybrid": ["--bm25", str(bm25), "--index", str(small_world_index)],
            "remote": ["--url", server.url, "--name", "wiki"]}
    yield {"argv": argv, "refs": refs, "bm25": bm25, "corpus": corpus, "tiny": tiny_bert_dir}
    server.shutdown_and_close()


def expected_text(ref, docid: str) -> str:
    doc = ref.get_document(docid)
    return f"{doc['title']}\n{doc['text']}" if doc.get("title") else doc["text"]


# --- BrowseComp-Plus -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_browsecomp_plus_registry_and_search_tool(world, kind):
    argv = ["--searcher-type", kind, *world["argv"][kind], "--k", str(K), "--get-document"]
    searcher, args = bcp_build(argv)
    assert type(searcher) is SEARCHERS[kind] and searcher.search_type and args.model == "gpt-4.1"
    assert f"top-{K}" in searcher.search_description(args.k) and searcher.get_document_description()
    ref = world["refs"][kind]
    want = ref.search_batch([QUERY], K)[0]

    old = json.loads(BcpSearchToolHandler(searcher, k=args.k, with_query_id=False)._search(QUERY))
    new = json.loads(BcpSearchToolHandler(searcher, k=args.k)._search(QUERY, "q0"))
    assert old == new and len(new) == K
    assert [h["docid"] for h in new] == [d for d, _ in want]
    assert all(set(h) == {"docid", "score", "snippet"} for h in new)
    assert [h["score"] for h in new] == pytest.approx([s for _, s in want], abs=1e-5)
    for hit in new:  # the snippet is the hit's whole text when the harness does not cut it
        body = ref.get_document(hit["docid"])["text"]
        assert hit["snippet"] == expected_text(ref, hit["docid"]) if kind != "remote" else body in hit["snippet"]

    doc = json.loads(BcpSearchToolHandler(searcher)._get_document(new[0]["docid"]))
    assert doc["docid"] == new[0]["docid"] and doc["text"] == ref.get_document(new[0]["docid"])["text"]
    assert json.loads(BcpSearchToolHandler(searcher)._get_document("no-such-doc")) == {
        "error": "Document with docid 'no-such-doc' not found"}


def test_browsecomp_plus_cuts_snippets_from_the_whole_text(world):
    from transformers import AutoTokenizer

    from hopscotch.retriever.model.loading import bundled_minilm_path

    searcher, _ = bcp_build(["--searcher-type", "bm25", *world["argv"]["bm25"]])
    searcher.snippet_chars = 12  # our own snippet is short; the harness cuts ``text``, which stays whole
    raw = searcher.search(QUERY, K)
    assert all(len(h["snippet"]) <= 12 and h["text"] == expected_text(searcher, h["docid"]) for h in raw)
    tok = AutoTokenizer.from_pretrained(bundled_minilm_path())
    hits = json.loads(BcpSearchToolHandler(searcher, snippet_max_tokens=6, k=K, tokenizer=tok)._search(QUERY))
    for hit, full in zip(hits, raw):
        tokens = tok.encode(full["text"], add_special_tokens=False)
        assert hit["snippet"] == tok.decode(tokens[:6], skip_special_tokens=True) and len(tokens) > 6


def test_browsecomp_plus_reranker_generation(world):
    class ReverseReranker:  # BrowseComp-Plus's BaseReranker protocol
        first_stage_k = 10

        def __init__(self):
            self.calls = []

        def rerank(self, query, retrieved, query_id=None, k=10):
            self.calls.append((query, query_id, [r["docid"] for r in retrieved]))
            return list(reversed(retrieved))[:k]

    reranker = ReverseReranker()
    searcher, _ = bcp_build(["--searcher-type", "bm25", *world["argv"]["bm25"]], reranker, reranker_generation=True)
    assert searcher.reranker is reranker
    hits = json.loads(BcpSearchToolHandler(searcher, k=K)._search(QUERY, "q42"))
    first_stage = [d for d, _ in world["refs"]["bm25"].search_batch([QUERY], 10)[0]]
    assert reranker.calls == [(QUERY, "q42", first_stage)]
    assert [h["docid"] for h in hits] == first_stage[::-1][:K]
    plain, _ = bcp_build(["--searcher-type", "bm25", *world["argv"]["bm25"]], None, reranker_generation=True)
    assert plain.reranker is None and len(plain.search(QUERY, None, K)) == K


# --- AgentIR -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_agentir_search_tool(world, kind):
    parser = agentir_parser()
    argv = ["--searcher-type", kind, *world["argv"][kind], "--k", str(K)]
    temp, _ = parser.parse_known_args(argv)
    searcher_class = SEARCHERS[temp.searcher_type]
    searcher_class.parse_args(parser)
    args = parser.parse_args(argv)
    searcher = searcher_class(args)
    assert args.model.startswith("Alibaba-NLP") and args.port == 6008  # the harness's own flags are untouched
    ref = world["refs"][kind]
    for aware, thinking in [(False, None), (True, "The company builds ships; find its home port."), (True, None)]:
        turn = AgentIRSearchTool(searcher, k=args.k, reasoning_aware=aware).handle_single(QUERY, thinking)
        sent = format_reasoning_query(QUERY, thinking) if aware else QUERY
        want = [d for d, _ in ref.search_batch([harness_query(sent)], K)[0]]  # read at the edge
        assert turn["response"].startswith(f"A search for '{QUERY}' found {K} results"), turn["response"]
        assert turn["docids"] == want and turn["rerank_output"] is None
        if kind != "remote":  # AgentIR shows each hit's first line as its title: the document's title
            titles = [AgentIRSearchTool.title_of(r["snippet"]) for r in turn["results"]]
            assert [t.removesuffix("...") for t in titles] == [ref.get_document(d)["title"][:50] for d in want]
            assert all(f"[{t}]" in turn["response"] for t in titles)


@pytest.mark.parametrize("kind", ["bm25", "hybrid"])
def test_reasoning_aware_bm25_through_both_harnesses(world, kind):
    """BrowseComp-Plus's ``search(query, k, reasoning)`` expands BM25 with the reasoning (the hybrid's BM25 half
    too); AgentIR's reasoning-aware client sends ``Reasoning: R\\n\\nQuery: Q`` as the query, which BM25 reads back
    as Q expanded with R (the same list), never matching the template's words; ``Reasoning: Empty``: plain Q."""
    parser = agentir_parser()
    # the expansion's flags through the harness's parser (a light query weight, so the reasoning moves a top 4)
    argv = ["--searcher-type", kind, *world["argv"][kind], "--k", str(K), "--bm25-query-weight", "1"]
    SEARCHERS[kind].parse_args(parser)
    searcher = SEARCHERS[kind](parser.parse_args(argv))
    assert searcher.reasoning_input.startswith("bm25 query x1 + ")
    plain = [d for d, _ in searcher.search_batch([QUERY], K)[0]]
    far = searcher.get_document([d for d, _ in searcher.search_batch([QUERY], 40)[0]][-1])   # far down the list
    name = far["title"]
    thinking = f"Everything points to {name}. The founder is {name}; {name}, {name}, {name}: look at {name} next."
    want = [d for d, _ in searcher.search_batch(queries_of([QUERY], [thinking], True), K)[0]]
    assert want != plain and [h["docid"] for h in searcher.search(QUERY, K, thinking)] == want
    if kind == "bm25":
        turn = AgentIRSearchTool(searcher, k=K, reasoning_aware=True).handle_single(QUERY, thinking)
        assert turn["docids"] == want
        empty = AgentIRSearchTool(searcher, k=K, reasoning_aware=True).handle_single(QUERY, None)   # 'Empty'
        assert empty["docids"] == plain
    else:   # the BM25 half got the reasoning, the untrained dense half the query alone
        sparse = searcher.bm25.search_batch(queries_of([QUERY], [thinking], True), searcher.depth)[0]
        dense = searcher.dense.search_batch([QUERY], searcher.depth)[0]
        assert [d for d, _ in searcher.settings.apply(sparse, dense, K)] == want


def test_agentir_prepend_oracle_keeps_the_window(world):
    searcher = SEARCHERS["bm25"](argparse.Namespace(bm25=str(world["bm25"]), corpus=str(world["corpus"])))
    ranked = [d for d, _ in searcher.search_batch([QUERY], 50)[0]]
    oracle = searcher.get_document(ranked[-1])  # far down the list
    turn = AgentIRSearchTool(searcher, k=K).handle_single(QUERY, None, positives=[oracle])
    assert turn["docids"] == [oracle["docid"]] + ranked[:K - 1]
    assert turn["results"][0]["snippet"] == oracle["text"][:len(turn["results"][0]["snippet"])]
    again = AgentIRSearchTool(searcher, k=K).handle_single(QUERY, None, positives=[searcher.get_document(ranked[1])])
    assert again["docids"] == [ranked[1], ranked[0], *ranked[2:K]]  # a prepended hit is not repeated


# --- the calling conventions and flag names behind both ------------------------------------------------------

def test_search_calling_conventions(world):
    dense = world["refs"]["dense"]
    plain = dense.search(QUERY, k=3)
    assert dense.search(QUERY, 3) == dense.search(QUERY, None, 3) == dense.search(QUERY, "q1", 3) == plain
    reasoned = dense.search(QUERY, 3, "I need the harbour city.")
    assert reasoned == dense.search(QUERY, k=3, reasoning="I need the harbour city.") != plain
    assert len(dense.search(QUERY)) == 10
    wrapped = dense.search(QUERY, 3, store_rerank=True, original_query=QUERY, correct_answer="x")
    assert wrapped == {"results": plain, "rerank_output": None}
    with pytest.raises(TypeError, match="positive integer"):
        dense.search(QUERY, "q1", "three")


def test_backend_flags_step_aside_for_a_harness_flag(world):
    from hopscotch.retriever.searchers.adapter.flags import flag

    parser = bcp_parser()
    SEARCHERS["hybrid"].parse_args(parser)
    taken = {s for a in parser._actions for s in a.option_strings}
    assert {"--model", "--hopscotch-model", "--bm25", "--index", "--fusion"} <= taken
    args = parser.parse_args(["--searcher-type", "hybrid", "--model", "o3"])
    assert args.model == "o3" and flag(args, "model") is None and flag(args, "depth") == 100
    args = parser.parse_args(["--searcher-type", "dense", "--hopscotch-model", str(world["tiny"])])
    assert args.model == "gpt-4.1" and flag(args, "model") == str(world["tiny"])
    # the bm25 backend refuses a --model of its own; the harness's LLM name is not one
    args = parser.parse_args(["--searcher-type", "bm25", "--model", "o3", "--bm25", str(world["bm25"])])
    bm25 = SEARCHERS["bm25"](args)
    assert bm25.get_document("anything") is None and len(bm25.search(QUERY, 2)) == 2
    from hopscotch.retriever.errors import UsageError

    with pytest.raises(UsageError, match="--model encodes queries"):
        SEARCHERS["bm25"](argparse.Namespace(model="minilm", bm25=str(world["bm25"])))
