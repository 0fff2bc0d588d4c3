"""Searcher client of a ``hopscotch serve`` (or any Pyserini-compatible ``/v1`` REST) service."""

from __future__ import annotations

import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.error import HTTPError, URLError
from urllib.parse import quote, urlencode
from urllib.request import Request, urlopen

from hopscotch.retriever.errors import HopscotchError, UsageError
from hopscotch.retriever.searchers.base import (
    BaseSearcher,
    Ranked,
    add_option,
    flag,
    hit_dict,
    per_query,
)
from hopscotch.retriever.searchers.rerank import add_rerank_options
from hopscotch.retriever.searchers.registry import register_searcher


class RemoteSearchError(HopscotchError):
    """The service answered with an error (its status and JSON message are kept)."""

    def __init__(self, status: int, message: str):
        super().__init__(f"search service error {status}: {message}")
        self.status = status


@register_searcher("remote")
class RemoteSearcher(BaseSearcher):
    """:param url: the service root, e.g. ``http://127.0.0.1:8000``
    :param name: the index name the service serves (``default``)
    :param token: bearer token when the service was started with ``--token``
    :param threads: parallel requests for :meth:`search_batch` (the service batches them again)

    Flags: ``--url URL [--name NAME] [--token T]``, named like ``hopscotch serve``'s own, and the reranker's
    ``--rerank-*``: the service's candidates are reranked locally, each one's text read with :meth:`get_document`.
    """

    local = False

    def __init__(self, url: str, index: str = "default", token: str | None = None, timeout: float = 60,
                 threads: int = 8):
        self.url, self.index, self.token, self.timeout, self.threads = url.rstrip("/"), index, token, timeout, threads

    @classmethod
    def parse_args(cls, parser) -> None:
        add_option(parser, "--url", help="remote: root of a hopscotch serve (or Pyserini /v1) service, "
                                         "e.g. http://127.0.0.1:8000")
        add_option(parser, "--name", default="default", help="remote: the index name the service serves "
                                                             "(/v1/NAME/...)")
        add_option(parser, "--token", help="remote: bearer token when the service requires one")
        add_rerank_options(parser)  # the service's candidates reranked here, their text from /doc (get_document)

    @classmethod
    def selected_by(cls, args) -> bool:
        return bool(flag(args, "url"))

    @classmethod
    def from_args(cls, args) -> RemoteSearcher:
        if not flag(args, "url"):
            raise UsageError("the remote searcher needs a service url (--url)")
        return cls(flag(args, "url"), index=flag(args, "name") or "default", token=flag(args, "token"))

    def _get(self, path: str, params: dict | None = None) -> dict:
        url = f"{self.url}{path}" + (f"?{urlencode(params)}" if params else "")
        req = Request(url, headers={"Authorization": f"Bearer {self.token}"} if self.token else {})
        try:
            with urlopen(req, timeout=self.timeout) as resp:
                return json.loads(resp.read())
        except HTTPError as exc:
            try:
                message = json.loads(exc.read()).get("error", exc.reason)
            except (ValueError, AttributeError):
                message = exc.reason
            raise RemoteSearchError(exc.code, str(message)) from None
        except URLError as exc:
            raise HopscotchError(f"cannot reach the search service at {self.url}: {exc.reason}") from None

    def search_raw(self, query: str, k: int = 10, reasoning: str | None = None,
                   max_doc_length: int | None = None) -> dict:
        """The service's JSON answer for one query."""
        params = {"query": query, "hits": k}
        if reasoning is not None:
            params["reason"] = reasoning
        if max_doc_length is not None:
            params["max_doc_length"] = max_doc_length
        return self._get(f"/v1/{quote(self.index, safe='')}/search", params)

    def search_batch(self, queries: Sequence[str], k: int = 10, reasonings: Sequence[str | None] | None = None,
                     reasoning_aware: bool | Sequence[bool] = False) -> list[Ranked]:
        reasonings = per_query(reasonings, len(queries), "reasonings")
        aware = per_query(reasoning_aware, len(queries), "reasoning_aware")
        # the service encodes reasoning-aware exactly when 'reason' is sent (blank reads as 'Empty')
        sent = [(r or "") if a else None for r, a in zip(reasonings, aware)]

        def one(i: int) -> Ranked:
            answer = self.search_raw(queries[i], k, sent[i], max_doc_length=0)
            return [(c["docid"], float(c["score"])) for c in answer["candidates"]]

        with ThreadPoolExecutor(max_workers=max(1, min(self.threads, len(queries)))) as pool:
            return list(pool.map(one, range(len(queries))))

    def hits_with_text(self, query: str, k: int, reasoning: str | None = None) -> list[dict[str, Any]]:
        """One request: the service sends each hit's whole document with it (a ``{docid, title, text}``
        object, or a string as Pyserini's ``doc``), so :meth:`search` needs no ``get_document`` calls."""
        answer = self.search_raw(query, k, reasoning)
        return [hit_dict(c["docid"], c["score"], c.get("doc"), self.snippet_chars) for c in answer["candidates"]]

    def get_document(self, docid: str) -> dict[str, Any] | None:
        """``/v1/NAME/doc/DOCID?parse=false``: the document as ``{docid, text[, title]}`` whether the service
        answers with an object or (Pyserini style) a string, raw JSON or plain text; None when it is unknown."""
        try:
            answer = self._get(f"/v1/{quote(self.index, safe='')}/doc/{quote(docid, safe='')}", {"parse": "false"})
        except RemoteSearchError as exc:
            if exc.status == 404 and "document not found" in str(exc).lower():
                return None
            raise
        doc = answer.get("doc", answer.get("text"))
        if isinstance(doc, str):
            try:
                parsed = json.loads(doc)
            except ValueError:
                parsed = None
            doc = parsed if isinstance(parsed, dict) and "text" in parsed else {"docid": docid, "text": doc}
        return {key: value for key, value in doc.items() if key != "title" or value} if doc else None
