"""A small OpenAI-compatible chat client: retries with backoff and a content-addressed cache on disk.

Requests go to ``{base_url}/chat/completions`` with ``temperature=0``. Connection errors, timeouts,
HTTP 408/409/429/5xx and malformed response bodies are retried (``Retry-After`` honoured, capped);
other HTTP errors fail at once. Every answer is cached under ``cache_dir/<sha256 of model+messages>.json``
(written atomically), so a resumed or repeated run sends nothing it has sent before.

Example::

    client = ChatClient("http://localhost:8000/v1", "qwen2.5-7b-instruct", cache_dir="llm-cache")
    text = client.complete([{"role": "user", "content": "Say hi"}])
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from hopscotch.retriever.errors import HopscotchError
from hopscotch.retriever.io.common import atomic_write

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


class LLMError(HopscotchError):
    """The chat endpoint failed for good (after retries, or with a non-retryable status)."""


@dataclass(frozen=True)
class Retries:
    """How often a failed request is sent again: ``max_retries`` times, waiting ``backoff * 2 ** attempt``
    seconds (or what ``Retry-After`` asks) but never more than ``max_backoff``."""

    max_retries: int = 4
    backoff: float = 1.0
    max_backoff: float = 30.0

    def wait(self, attempt: int, retry_after: str | None = None) -> float:
        if retry_after and retry_after.strip().isdigit():
            return min(self.max_backoff, float(retry_after))
        return min(self.max_backoff, self.backoff * (2 ** attempt))


class ChatClient:
    """Chat completions against an OpenAI-compatible endpoint, cached on disk."""

    def __init__(self, base_url: str, model: str, api_key: str | None = None, timeout: float = 60.0,
                 retries: Retries | None = None, cache_dir: str | os.PathLike | None = None, max_tokens: int = 512):
        if not base_url or not model:
            raise LLMError("the llm reranker needs --llm-base-url and --llm-model")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.api_key = model, api_key
        self.timeout, self.retries = timeout, retries or Retries()
        self.max_tokens = max_tokens
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.requests_sent = 0
        self.cache_hits = 0

    def _key(self, messages: list[dict]) -> str:
        blob = json.dumps({"model": self.model, "messages": messages, "temperature": 0}, sort_keys=True,
                          ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def _cached(self, key: str) -> str | None:
        if self.cache_dir is None:
            return None
        path = self.cache_dir / key[:2] / f"{key}.json"
        try:
            return json.loads(path.read_text(encoding="utf-8"))["content"]
        except (FileNotFoundError, json.JSONDecodeError, KeyError, TypeError):
            return None

    def _store(self, key: str, content: str) -> None:
        if self.cache_dir is None:
            return
        with atomic_write(self.cache_dir / key[:2] / f"{key}.json") as fh:
            json.dump({"model": self.model, "content": content}, fh, ensure_ascii=False)

    def _post(self, messages: list[dict]) -> str:
        body = json.dumps({"model": self.model, "messages": messages, "temperature": 0,
                           "max_tokens": self.max_tokens}).encode("utf-8")
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        with urllib.request.urlopen(request, timeout=self.timeout) as response:
            payload = json.loads(response.read().decode("utf-8"))
        content = payload["choices"][0]["message"]["content"]
        if not isinstance(content, str):
            raise TypeError("message content is not a string")
        return content

    def complete(self, messages: list[dict]) -> str:
        """The assistant's reply to ``messages`` (from the cache when it has been asked before)."""
        key = self._key(messages)
        cached = self._cached(key)
        if cached is not None:
            self.cache_hits += 1
            return cached
        last_error = "no attempt made"
        max_retries = self.retries.max_retries
        for attempt in range(max_retries + 1):
            retry_after = None
            try:
                self.requests_sent += 1
                content = self._post(messages)
                self._store(key, content)
                return content
            except urllib.error.HTTPError as exc:
                last_error = f"HTTP {exc.code} {exc.reason}"
                if exc.code not in RETRY_STATUS:
                    raise LLMError(f"{self.url}: {last_error}") from None
                retry_after = exc.headers.get("Retry-After") if exc.headers else None
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                last_error = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
            except (ValueError, KeyError, IndexError, TypeError) as exc:  # a malformed response body
                last_error = f"malformed response ({type(exc).__name__}: {exc})"
            if attempt < max_retries:
                time.sleep(self.retries.wait(attempt, retry_after))
        raise LLMError(f"{self.url}: gave up after {max_retries + 1} attempts ({last_error})")
