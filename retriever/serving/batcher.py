"""The micro-batcher: concurrent single-query searches become batched ``search_batch`` calls.

Example (not run: it needs a searcher)::

    batcher = QueryBatcher(searcher, max_batch=64, max_wait=0.002)
    ranked = batcher.search(Query("who directed Gummo"), k=10)   # blocking
    future = batcher.submit(Query("who directed Gummo"), k=10)   # concurrent.futures.Future of the same
    batcher.close()
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field

from hopscotch.retriever.io.queries import Query, as_query
from hopscotch.retriever.searchers.base import BaseSearcher, Ranked


@dataclass
class _Request:
    query: Query
    k: int
    future: Future = field(default_factory=Future)


class QueryBatcher:
    """Funnels concurrent single-query searches into batched ``search_batch`` calls on one worker thread.

    The worker takes the first waiting request, then everything else already queued (waiting at most
    ``max_wait`` seconds for more), up to ``max_batch``; requests with the same ``k`` share one call. Each
    request is a :class:`~hopscotch.retriever.io.queries.Query` (reasoning-aware or plain). A failing
    call fails every request of that call. ``stats`` counts calls and queries, so ``queries / calls`` is the
    mean batch size.
    """

    def __init__(self, searcher: BaseSearcher, max_batch: int = 64, max_wait: float = 0.002):
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, got {max_batch}")
        self.searcher, self.max_batch, self.max_wait = searcher, max_batch, max_wait
        self.stats = {"calls": 0, "queries": 0, "max_batch": 0}
        self._queue: queue.Queue = queue.Queue()
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="query-batcher", daemon=True)
        self._thread.start()

    def submit(self, query: Query | str, k: int) -> Future:
        """Queue one search (a string: a plain query); the future resolves to its ranked ``(docid, score)`` list
        (or its error)."""
        if self._closed:
            raise RuntimeError("the query batcher is closed")
        req = _Request(as_query(query), k)
        self._queue.put(req)
        return req.future

    def search(self, query: Query | str, k: int, timeout: float | None = 300) -> Ranked:
        """:meth:`submit` and wait (at most ``timeout`` seconds) for the result."""
        return self.submit(query, k).result(timeout=timeout)

    def close(self) -> None:
        """Finish the queued requests, then stop the worker."""
        if not self._closed:
            self._closed = True
            self._queue.put(None)
            self._thread.join(timeout=10)

    def _collect(self, first: _Request) -> tuple[list[_Request], bool]:
        batch, stop = [first], False
        deadline = time.monotonic() + self.max_wait
        while len(batch) < self.max_batch:
            try:
                item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if item is None:
                stop = True
                break
            batch.append(item)
        return batch, stop

    def _loop(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch, stop = self._collect(first)
            by_k: dict[int, list[_Request]] = {}
            for req in batch:
                by_k.setdefault(req.k, []).append(req)
            for k, reqs in by_k.items():
                self._run(k, reqs)
            if stop:
                return

    def _run(self, k: int, reqs: list[_Request]) -> None:
        try:
            results = self.searcher.search_batch([r.query for r in reqs], k)
        except BaseException as exc:  # noqa: BLE001 - hand any failure to every waiting request
            for r in reqs:
                r.future.set_exception(exc)
            return
        self.stats["calls"] += 1
        self.stats["queries"] += len(reqs)
        self.stats["max_batch"] = max(self.stats["max_batch"], len(reqs))
        for r, res in zip(reqs, results):
            r.future.set_result(res)
