"""Searcher client of a ``hopscotch serve`` (or any Pyserini-compatible ``/v1`` REST) service.

:func:`get_json` is the one HTTP path of every client of such a service (this backend, and the hybrid's remote
BM25 half, :mod:`hopscotch.retriever.searchers.remote_bm25`): a failure is a one-line :class:`RemoteSearchError`
(a :class:`~hopscotch.retriever.errors.UsageError`: exit code 2 in the CLI) naming the service and what was
expected: the service down, a refused token (401 / 403), no answer within the timeout, an answer that is not
JSON or not Pyserini's shape (:func:`search_candidates`). ``429`` and ``502`` / ``503`` / ``504`` are retried
twice with a bounded exponential backoff (``Retry-After`` honoured up to 5 s), as cmass asks of clients of its
shared service.
"""

from __future__ import annotations

import http.client
import json
import socket
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.error import HTTPError, URLError
from urllib.parse import quote, urlencode
from urllib.request import Request, urlopen

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.io.queries import Query, as_query
from hopscotch.retriever.searchers.arg_types import positive_float
from hopscotch.retriever.searchers.base import (
    BaseSearcher,
    Ranked,
    add_option,
    hit_dict,
)
from hopscotch.retriever.searchers.adapter.flags import options_of
from hopscotch.retriever.searchers.rerank import add_rerank_options
from hopscotch.retriever.searchers.registry import register_searcher

#: seconds a request waits for the service's answer unless ``--remote-timeout`` says otherwise
DEFAULT_TIMEOUT = 60.0
#: answers retried (rate limit, a busy or restarting service), and how many times
RETRIED_STATUSES = frozenset({429, 502, 503, 504})
RETRIES = 2


def reason_of(query: Query) -> str | None:
    """The ``reason`` a query sends: its reasoning when it is reasoning-aware (blank: the service reads ``Empty``),
    else none (the service encodes reasoning-aware exactly when ``reason`` is sent)."""
    return (query.reasoning or "") if query.reasoning_aware else None


class RemoteSearchError(UsageError):
    """The service failed or answered with an error (its HTTP ``status`` is kept; None: no HTTP answer)."""

    def __init__(self, status: int | None, message: str):
        super().__init__(message)
        self.status = status


def add_timeout_option(parser) -> None:
    """``--remote-timeout SECONDS``: declared alike by every backend that calls a search service."""
    add_option(parser, "--remote-timeout", type=positive_float, metavar="SECONDS",
               help=f"seconds to wait for a search service's answer (--url, --bm25-url; default {DEFAULT_TIMEOUT:g})")


def _error_message(exc: HTTPError) -> str:
    try:
        answer = json.loads(exc.read())
        message = answer.get("error") or answer.get("detail") or exc.reason
    except (ValueError, AttributeError, OSError):
        message = exc.reason
    return " ".join(str(message).split())[:200]


def _retry_after(exc: HTTPError, attempt: int) -> float:
    try:
        wait = float(exc.headers.get("Retry-After", ""))
    except (TypeError, ValueError, AttributeError):
        wait = 0.5 * 2 ** attempt
    return min(max(wait, 0.0), 5.0)


def get_json(root: str, path: str, params: dict | None = None, token: str | None = None,
             timeout: float = DEFAULT_TIMEOUT, token_flag: str = "--token", timeout_flag: str = "--remote-timeout"
             ) -> Any:
    """``GET root + path?params`` (``Authorization: Bearer TOKEN`` when a token is given) as parsed JSON.

    Every failure is a :class:`RemoteSearchError` naming ``root + path`` (never the query string: it holds the
    query) and what was expected; ``token_flag`` / ``timeout_flag`` are the flags the message suggests."""
    where = f"{root}{path}"
    url = where + (f"?{urlencode(params)}" if params else "")
    req = Request(url, headers={"Authorization": f"Bearer {token}", "Accept": "application/json"} if token
                  else {"Accept": "application/json"})
    for attempt in range(RETRIES + 1):
        try:
            with urlopen(req, timeout=timeout) as resp:
                body = resp.read()
            break
        except HTTPError as exc:
            if exc.code in RETRIED_STATUSES and attempt < RETRIES:
                time.sleep(_retry_after(exc, attempt))
                continue
            message = _error_message(exc)
            if exc.code in (401, 403):
                hint = (f"give the service's token with {token_flag}" if not token
                        else f"check the token given with {token_flag}")
                raise RemoteSearchError(exc.code, f"{where}: the search service refused the request ({exc.code} "
                                                  f"{message}): {hint}") from None
            raise RemoteSearchError(exc.code, f"{where}: search service error {exc.code}: {message}") from None
        except (TimeoutError, socket.timeout):
            raise RemoteSearchError(None, f"{where}: no answer within {timeout:g} s (raise it with "
                                          f"{timeout_flag})") from None
        except URLError as exc:
            reason = exc.reason
            if isinstance(reason, (TimeoutError, socket.timeout)):
                raise RemoteSearchError(None, f"{where}: no answer within {timeout:g} s (raise it with "
                                              f"{timeout_flag})") from None
            raise RemoteSearchError(None, f"cannot reach the search service at {root}: {reason}") from None
        except (http.client.HTTPException, OSError) as exc:
            raise RemoteSearchError(None, f"{where}: the search service broke off the answer "
                                          f"({type(exc).__name__}: {exc})") from None
    try:
        return json.loads(body)
    except ValueError:
        shown = body[:80].decode("utf-8", "replace")
        raise RemoteSearchError(200, f"{where}: expected a JSON answer (Pyserini's /v1 REST shape), got "
                                     f"{shown!r}") from None


def search_candidates(answer: Any, where: str) -> list[dict]:
    """The ``candidates`` of a Pyserini search answer, each checked to have a string ``docid`` and a finite numeric
    ``score`` (a :class:`RemoteSearchError` naming ``where`` otherwise)."""
    expected = "Pyserini's search answer {\"candidates\": [{\"docid\": str, \"score\": number, ...}]}"
    candidates = answer.get("candidates") if isinstance(answer, dict) else None
    if not isinstance(candidates, list):
        raise RemoteSearchError(200, f"{where}: expected {expected}, got {json.dumps(answer)[:80]}")
    for cand in candidates:
        score = cand.get("score") if isinstance(cand, dict) else None
        if (not isinstance(cand, dict) or not isinstance(cand.get("docid"), (str, int)) or isinstance(score, bool)
                or not isinstance(score, (int, float)) or score != score or abs(score) == float("inf")):
            raise RemoteSearchError(200, f"{where}: expected {expected}, got the candidate "
                                         f"{json.dumps(cand)[:80]}")
    return candidates


def document_of(answer: Any, docid: str) -> dict[str, Any] | None:
    """A ``/doc/`` answer's document as ``{docid, text[, title]}``: an object (``hopscotch serve``'s stored record,
    or Pyserini's parsed fields: the first of ``text``, ``contents``, ``content``, ``body``, as cmass normalises
    it) or a string (Pyserini's raw stored document: a JSON record read as such, else the text itself)."""
    doc = answer.get("doc", answer.get("text")) if isinstance(answer, dict) else None
    if isinstance(doc, str):
        try:
            parsed = json.loads(doc)
        except ValueError:
            parsed = None
        doc = parsed if isinstance(parsed, dict) and _text_of(parsed) is not None else {"docid": docid, "text": doc}
    if not isinstance(doc, dict) or _text_of(doc) is None:
        return None
    out = {"docid": str(doc.get("docid", doc.get("id", docid))), "text": _text_of(doc)}
    if isinstance(doc.get("title"), str) and doc["title"]:
        out["title"] = doc["title"]
    return out


def _text_of(doc: dict) -> str | None:
    return next((doc[key] for key in ("text", "contents", "content", "body") if isinstance(doc.get(key), str)), None)


@dataclass(frozen=True)
class RemoteOptions:
    """The ``remote`` backend's options (its flags' destinations): the service's root ``url`` (``--url``), the
    index ``name`` (None: ``default``), its bearer ``token`` and ``remote_timeout`` in seconds (None:
    :data:`DEFAULT_TIMEOUT`)."""

    url: str | None = None
    name: str | None = None
    token: str | None = None
    remote_timeout: float | None = None


@register_searcher("remote")
class RemoteSearcher(BaseSearcher):
    """:param url: the service root, e.g. ``http://127.0.0.1:8000``
    :param name: the index name the service serves (``default``)
    :param token: bearer token when the service was started with ``--token``
    :param timeout: seconds to wait for each answer
    :param threads: parallel requests for :meth:`search_batch` (the service batches them again)

    Flags: ``--url URL [--name NAME] [--token T] [--remote-timeout S]``, named like ``hopscotch serve``'s own, and
    the reranker's ``--rerank-*``: the service's candidates are reranked locally, each one's text read with
    :meth:`get_document`. Failures are one-line errors (:func:`get_json`).
    """

    #: its options dataclass (:meth:`from_options`; ``build_searcher(RemoteOptions(...))``)
    options_type = RemoteOptions

    local = False
    #: the flags error messages suggest (the hybrid's remote BM25 half has its own)
    token_flag = "--token"

    def __init__(self, url: str, index: str = "default", token: str | None = None, timeout: float = DEFAULT_TIMEOUT,
                 threads: int = 8):
        self.url, self.index, self.token, self.timeout, self.threads = url.rstrip("/"), index, token, timeout, threads

    @classmethod
    def parse_args(cls, parser) -> None:
        add_option(parser, "--url", help="remote: root of a hopscotch serve (or Pyserini /v1) service, "
                                         "e.g. http://127.0.0.1:8000")
        add_option(parser, "--name", default="default", help="remote: the index name the service serves "
                                                             "(/v1/NAME/...)")
        add_option(parser, "--token", help="remote: bearer token when the service requires one")
        add_timeout_option(parser)
        add_rerank_options(parser)  # the service's candidates reranked here, their text from /doc (get_document)

    @classmethod
    def selected_by(cls, flags) -> bool:
        return bool(flags.get("url"))

    @classmethod
    def from_flags(cls, flags) -> RemoteSearcher:
        return cls.from_options(options_of(RemoteOptions, flags))

    @classmethod
    def from_options(cls, options: RemoteOptions) -> RemoteSearcher:
        if not options.url:
            raise UsageError("the remote searcher needs a service url (--url)")
        timeout = options.remote_timeout
        return cls(options.url, index=options.name or "default", token=options.token,
                   timeout=DEFAULT_TIMEOUT if timeout is None else timeout)

    def _get(self, path: str, params: dict | None = None) -> Any:
        return get_json(self.url, path, params, self.token, self.timeout, token_flag=self.token_flag)

    @property
    def search_path(self) -> str:
        """``/v1/NAME/search`` (the name URL-quoted: Pyserini decodes a path segment)."""
        return f"/v1/{quote(self.index, safe='')}/search"

    def search_raw(self, query: str, k: int = 10, reasoning: str | None = None,
                   max_doc_length: int | None = None) -> dict:
        """The service's JSON answer for one query (its ``candidates`` checked: :func:`search_candidates`)."""
        params = {"query": query, "hits": k}
        if reasoning is not None:
            params["reason"] = reasoning
        if max_doc_length is not None:
            params["max_doc_length"] = max_doc_length
        answer = self._get(self.search_path, params)
        search_candidates(answer, self.url + self.search_path)
        return answer

    def search_batch(self, queries: Sequence[Query | str], k: int = 10) -> list[Ranked]:
        queries = [as_query(q) for q in queries]

        def one(q: Query) -> Ranked:
            answer = self.search_raw(q.text, k, reason_of(q), max_doc_length=0)
            return [(str(c["docid"]), float(c["score"])) for c in answer["candidates"]]

        if not queries:
            return []
        with ThreadPoolExecutor(max_workers=max(1, min(self.threads, len(queries)))) as pool:
            return list(pool.map(one, queries))

    def hits_with_text(self, query: Query | str, k: int) -> list[dict[str, Any]]:
        """One request: the service sends each hit's whole document with it (a ``{docid, title, text}``
        object, or a string as Pyserini's ``doc``), so :meth:`search` needs no ``get_document`` calls."""
        query = as_query(query)
        answer = self.search_raw(query.text, k, reason_of(query))
        return [hit_dict(str(c["docid"]), c["score"], c.get("doc"), self.snippet_chars) for c in answer["candidates"]]

    def get_document(self, docid: str) -> dict[str, Any] | None:
        """``/v1/NAME/doc/DOCID?parse=false``: the document as ``{docid, text[, title]}`` whether the service
        answers with an object or (Pyserini style) a string, raw JSON or plain text (:func:`document_of`); None
        when it is unknown."""
        try:
            answer = self._get(f"/v1/{quote(self.index, safe='')}/doc/{quote(str(docid), safe='')}", {"parse": "false"})
        except RemoteSearchError as exc:
            if exc.status == 404 and "document not found" in str(exc).lower():
                return None
            raise
        return document_of(answer, str(docid))
