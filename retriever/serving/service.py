"""The search service's request logic, apart from HTTP: parameters, tokens, batching, the Pyserini payloads.

:class:`SearchService` answers Pyserini's ``/v1`` routes as plain dicts (the HTTP layer in
:mod:`hopscotch.retriever.serving.app` only moves them): ``search(index, params)`` and
``document(index, docid, params)`` return the response body or raise :class:`ApiError` (status + message).

Payloads (Pyserini's ``SearchResponse`` / ``DocumentResponse``)::

    {"api": "v1", "index": NAME, "query": {"text": Q}, "candidates": [{"docid", "score", "rank", "doc"}]}
    {"api": "v1", "index": NAME, "docid": DOCID, "doc": DOC}

``doc`` is always a string: with ``parse=true`` (the default) the document's text, ``title\\ntext`` when it
has a title; with ``parse=false`` the stored record as a JSON string (``{"docid", "title", "text"}``);
``max_doc_length=N`` cuts it to N characters; a hit whose document is missing gets ``null``.

``reason`` (cmass's tool argument, the agent's reasoning): it is always logged (logger
``hopscotch.serve.reason``, one JSON line); it is encoded with the query (AgentIR's
``Reasoning: ...\\n\\nQuery: ...``) only when the index's searcher reads reasoning
(:attr:`~hopscotch.retriever.searchers.base.BaseSearcher.takes_reasoning`: a trained reasoning-aware model,
or ``--query-input`` given; BM25 expands the query with it unless ``--bm25-reasoning query``), otherwise the
query is matched alone. The response says which:
``"query": {"text", "reason_used": bool[, "query_input": VARIANT]}`` (only when a ``reason`` was sent).
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from hopscotch.retriever.io.docids import canonical_docid
from hopscotch.retriever.searchers.base import BaseSearcher, Ranked
from hopscotch.retriever.searchers.harness import harness_query
from hopscotch.retriever.serving.batcher import QueryBatcher

API_VERSION = "v1"
DEFAULT_HITS = 10
MAX_HITS = 1000

reason_log = logging.getLogger("hopscotch.serve.reason")


class ApiError(Exception):
    """An answer other than 200: ``status``, the ``{"error": message}`` body, and extra response ``headers``."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


@dataclass(frozen=True)
class SearchRequest:
    """One validated search: ``reasoning`` is what the encoder gets (None: the query alone)."""

    index: str
    query: str
    hits: int
    parse: bool
    max_doc_length: int | None
    reason: str | None
    reasoning: str | None


def int_param(params: Mapping[str, str], name: str, default: int | None, lo: int, hi: int | None = None) -> int | None:
    """An integer query parameter in ``[lo, hi]`` (absent or blank: ``default``), else ApiError 400."""
    raw = params.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(400, f"Parameter '{name}' must be an integer, got {raw!r}") from None
    if value < lo or (hi is not None and value > hi):
        bounds = f"between {lo} and {hi}" if hi is not None else f"at least {lo}"
        raise ApiError(400, f"Parameter '{name}' must be {bounds}, got {value}")
    return value


def bool_param(params: Mapping[str, str], name: str, default: bool) -> bool:
    """``true`` / ``false`` (any case; absent: ``default``), else ApiError 400 (Pyserini's ``parse``)."""
    raw = params.get(name)
    if raw is None:
        return default
    lowered = raw.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise ApiError(400, f"Parameter '{name}' must be 'true' or 'false', got {raw!r}")


def document_string(doc: Mapping[str, Any] | None, parse: bool = True, max_len: int | None = None) -> str | None:
    """A document as the ``doc`` string: its text (``title\\ntext`` with a title) or, with ``parse=False``, its
    stored record as JSON; cut to ``max_len`` characters; None for a missing document."""
    if doc is None:
        return None
    title, text = doc.get("title") or "", doc.get("text") or ""
    if parse:
        out = f"{title}\n{text}" if title else text
    else:
        out = json.dumps({"docid": doc.get("docid"), "title": title, "text": text}, ensure_ascii=False)
    return out if max_len is None else out[:max_len]


def request_token(headers: Mapping[str, str]) -> list[str]:
    """The credentials a request carries (header names lower-case): ``x-api-key: T`` and
    ``Authorization: Bearer T`` (the scheme in any case), in that order, without duplicates."""
    found = []
    key = (headers.get("x-api-key") or "").strip()
    if key:
        found.append(key)
    scheme, _, value = (headers.get("authorization") or "").strip().partition(" ")
    if scheme.lower() == "bearer" and value.strip() and value.strip() not in found:
        found.append(value.strip())
    return found


def token_matches(headers: Mapping[str, str], token: str | None) -> bool:
    """The one credential check of REST and MCP: True without a token, else when :func:`request_token` of the
    (lower-case) headers holds it (constant-time comparison)."""
    if not token:
        return True
    want = token.encode()
    return any(hmac.compare_digest(given.encode(), want) for given in request_token(headers))


class SearchService:
    """Index names -> searchers, with the token check and one :class:`QueryBatcher` per index.

    :param searchers: ``{name: searcher}``; names are non-empty and contain no ``/``
    :param token: when set, :meth:`authorized` requires it (``x-api-key`` or a bearer token)
    :param max_batch, max_wait: the batchers' settings
    """

    def __init__(self, searchers: Mapping[str, BaseSearcher], token: str | None = None, max_batch: int = 64,
                 max_wait: float = 0.002):
        for name in searchers:
            if not name.strip() or "/" in name:
                raise ValueError(f"index name {name!r}: use a non-empty name without '/'")
        self.searchers = dict(searchers)
        self.token = token or None
        self.batchers = {name: QueryBatcher(s, max_batch, max_wait) for name, s in self.searchers.items()}
        self.reads_reasoning = {name: bool(getattr(s, "takes_reasoning", False)) for name, s in self.searchers.items()}

    # -- access -------------------------------------------------------------------------------------
    def authorized(self, headers: Mapping[str, str]) -> bool:
        """Whether a request with these (lower-case) headers may use ``/v1/``: always without a token."""
        return token_matches(headers, self.token)

    def searcher(self, name: str) -> BaseSearcher:
        if name not in self.searchers:
            raise ApiError(400, f"Index {name!r} not available; this service serves: {', '.join(sorted(self.searchers))}")
        return self.searchers[name]

    def query_input(self, name: str) -> str | None:
        """The query input variant ``reason`` is encoded with on ``name`` (None when it is not used)."""
        if not self.reads_reasoning.get(name):
            return None
        return getattr(self.searchers[name], "reasoning_input", None)

    # -- search ---------------------------------------------------------------------------------------
    def parse_search(self, name: str, params: Mapping[str, str]) -> SearchRequest:
        """Validate a search's parameters (ApiError 400) and log its ``reason``."""
        self.searcher(name)
        query = params.get("query")
        if query is None or not query.strip():
            raise ApiError(400, "Parameter 'query' is required")
        hits = int_param(params, "hits", DEFAULT_HITS, 1, MAX_HITS)
        parse = bool_param(params, "parse", True)
        max_len = int_param(params, "max_doc_length", None, 0)
        reason = params.get("reason")
        used = reason is not None and self.reads_reasoning[name]
        if reason is not None:
            reason_log.info(json.dumps({"index": name, "query": query, "reason": reason, "used": used},
                                       ensure_ascii=False))
        return SearchRequest(name, query, hits, parse, max_len, reason, reason if used else None)

    def submit(self, req: SearchRequest) -> Future:
        """Queue the search on its index's batcher: a future of the ranked ``(docid, score)`` list. The request's
        query is read at the harness edge (:func:`~hopscotch.retriever.searchers.harness.harness_query`: a query
        in AgentIR's template carries its reasoning)."""
        return self.batchers[req.index].submit(harness_query(req.query, req.reasoning), req.hits)

    def render_search(self, req: SearchRequest, ranked: Ranked) -> dict[str, Any]:
        """The ``SearchResponse`` body: each hit's document read from the searcher (blocking reads)."""
        searcher = self.searchers[req.index]
        candidates = [{"docid": docid, "score": float(score), "rank": rank,
                       "doc": document_string(searcher.get_document(docid), req.parse, req.max_doc_length)}
                      for rank, (docid, score) in enumerate(ranked, start=1)]
        query: dict[str, Any] = {"text": req.query}
        if req.reason is not None:
            query["reason_used"] = req.reasoning is not None
            if req.reasoning is not None:
                query["query_input"] = self.query_input(req.index)
        return {"api": API_VERSION, "index": req.index, "query": query, "candidates": candidates}

    def search(self, name: str, params: Mapping[str, str], timeout: float | None = 300) -> dict[str, Any]:
        """One search, blocking: :meth:`parse_search`, :meth:`submit`, :meth:`render_search`."""
        req = self.parse_search(name, params)
        return self.render_search(req, self.submit(req).result(timeout=timeout))

    # -- documents and listing ----------------------------------------------------------------------
    def document(self, name: str, docid: str, params: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The ``DocumentResponse`` body (ApiError 400 for a bad parameter or index, 404 for an unknown docid)."""
        searcher = self.searcher(name)
        if not docid.strip():
            raise ApiError(400, "Path parameter 'docid' is required")
        params = params or {}
        parse = bool_param(params, "parse", True)
        max_len = int_param(params, "max_doc_length", None, 0)
        docid = canonical_docid(docid)
        doc = searcher.get_document(docid)
        if doc is None:
            raise ApiError(404, f"Document not found: {docid}")
        return {"api": API_VERSION, "index": name, "docid": docid, "doc": document_string(doc, parse, max_len)}

    def indexes(self) -> dict[str, Any]:
        """``{"indexes": [names]}`` and, per index, its search type and whether it reads ``reason``."""
        return {"indexes": sorted(self.searchers),
                "details": {name: {"search_type": s.search_type or s.name, "reason_used": self.reads_reasoning[name],
                                   "query_input": self.query_input(name)}
                            for name, s in sorted(self.searchers.items())}}

    def close(self) -> None:
        for b in self.batchers.values():
            b.close()
        for s in self.searchers.values():
            s.close()
