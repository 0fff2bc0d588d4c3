"""A hybrid searcher's BM25 half answered by a Pyserini-compatible REST endpoint (``--bm25-url``).

The endpoint is any service with Pyserini's ``GET /v1/{index}/search?query=&hits=`` (Pyserini's own
``server/rest``, the cmass ClimbMix BM25 service, ``hopscotch serve``); ``--bm25-url`` is the index's URL,
``ROOT/v1/NAME`` (what ``hopscotch serve`` prints; a trailing ``/search`` is dropped), e.g.
``http://api.castorini.uwaterloo.ca/v1/climbmix-400b``. :class:`RemoteBM25Index` answers the two calls the BM25
searcher makes of its index (:meth:`~RemoteBM25Index.search`, :meth:`~RemoteBM25Index.search_weighted`), so a
:class:`~hopscotch.retriever.searchers.bm25.BM25Searcher` over it reads queries exactly as over a local index
(AgentIR's template, the reasoning-aware expansion), and the hybrid fuses its list with the local dense one.

**Reasoning-aware expansion, remotely.** Pyserini's search route runs ``LuceneSearcher.search(query, hits)``:
Anserini's ``BagOfWordsQueryGenerator``, one SHOULD term clause per analysed token of the text. The text is not
parsed as a Lucene query (``term^w`` is no boost: the analyser drops the ``^`` and indexes ``w`` as a word; cmass's
REPRODUCING.md: "use ordinary text queries"), but a token that occurs n times scores n times. So the weighted bag
of :mod:`~hopscotch.retriever.searchers.bm25_expansion` (``query_weight x`` the query's terms ``+ 1 x`` the
reasoning text's) is sent as plain text, each part repeated in proportion to its weight: the weight as a fraction
``p/q`` (``q <= 10``), the query ``p`` times and the reasoning text ``q`` times, and the scores divided by ``q``
(weight 7, the default: the query 7 times then the text; 2.5: the query 5 times, the text twice, scores
halved). That is the local weighted score, ``sum_t w_t * bm25(t, d)``, under the endpoint's own BM25 parameters
and analyser; ``hopscotch serve``'s BM25 counts a repeated term alike. A weight that is no such fraction
(``--bm25-query-weight 0.37``) is refused before anything is searched. ``reason=`` is never sent: a ``hopscotch
serve`` BM25 service would expand the query a second time.

**Documents and docids.** The endpoint's docids are read in their canonical spelling
(:func:`~hopscotch.retriever.io.docids.canonical_docid`), and each must be a document of the dense index (its docid
lookup): a docid the dense index lacks means the two sides index different corpora, and is a one-line error
naming the endpoint (fusing the lists would silently favour one side). Hits are asked for without their text
(``max_doc_length=0``); the hybrid's documents come from the dense index's docstore, or from the endpoint's
``/doc/`` route when the index has none. Failures (the endpoint down, a refused token, a timeout, an answer that
is not Pyserini's JSON) are one-line errors naming the endpoint (:func:`~hopscotch.retriever.searchers.remote.
get_json`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction
from typing import Any
from urllib.parse import unquote, urlsplit

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.index.bm25.analyzer import Analyzer
from hopscotch.retriever.index.docstore import DocidLookup
from hopscotch.retriever.io.docids import canonical_docid
from hopscotch.retriever.searchers.bm25_expansion import TermStats
from hopscotch.retriever.searchers.remote import DEFAULT_TIMEOUT, RemoteSearcher, search_candidates

#: the largest denominator of a query weight sent as repetitions (the reasoning text is repeated that often)
MAX_REPEAT_DENOMINATOR = 10
#: the query the endpoint is probed with when the searcher is built (one hit, no text)
PROBE_QUERY = "hopscotch"


def split_index_url(url: str) -> tuple[str, str]:
    """``(root, name)`` of an index URL ``ROOT/v1/NAME`` (``/search`` after it dropped; NAME may hold ``/``, as
    Pyserini's path-style index names do); a UsageError saying the expected form otherwise."""
    text = str(url).strip().rstrip("/")
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(f"--bm25-url {url}: expected the index's URL, http(s)://HOST[:PORT]/v1/NAME (e.g. "
                         "http://127.0.0.1:8000/v1/default)")
    path = parts.path
    if path.endswith("/search"):
        path = path[: -len("/search")]
    head, sep, name = path.partition("/v1/")
    if not sep or not name.strip("/"):
        raise UsageError(f"--bm25-url {url}: name the index: ROOT/v1/NAME (e.g. {parts.scheme}://{parts.netloc}"
                         f"{head}/v1/default; Pyserini's /v1/{{index}}/search route)")
    if parts.query or parts.fragment:
        raise UsageError(f"--bm25-url {url}: give the index's URL without a query string (ROOT/v1/NAME)")
    return f"{parts.scheme}://{parts.netloc}{head}", unquote(name)


def repetitions(weights: Sequence[float]) -> tuple[list[int], int]:
    """``(counts, divisor)``: how many times each weighted part is repeated so that the counts are proportional to
    ``weights``, and the factor the scores are then divided by. Each weight must be a fraction with a denominator
    up to :data:`MAX_REPEAT_DENOMINATOR` (UsageError otherwise)."""
    fractions = []
    for w in weights:
        frac = Fraction(w).limit_denominator(MAX_REPEAT_DENOMINATOR)
        if not (math.isfinite(w) and w > 0 and math.isclose(float(frac), w, rel_tol=1e-9, abs_tol=0.0)):
            raise UsageError(f"--bm25-query-weight {w:g}: a remote BM25 endpoint weighs terms by repeating them, so "
                             f"the weight must be a fraction with a denominator up to {MAX_REPEAT_DENOMINATOR} "
                             "(e.g. 7, 2.5, 0.4)")
        fractions.append(frac)
    divisor = math.lcm(*(f.denominator for f in fractions))
    return [int(f * divisor) for f in fractions], divisor


def weighted_text(parts: Sequence[tuple[str, float]]) -> tuple[str, int]:
    """``(text, divisor)``: the weighted bag ``parts`` (``(text, weight)`` pairs) written as one bag-of-words query,
    each text repeated in proportion to its weight (:func:`repetitions`); its scores divided by ``divisor`` are
    the weighted scores."""
    counts, divisor = repetitions([w for _, w in parts])
    words = [" ".join(text.split()) for text, _ in parts]
    return " ".join(w for word, n in zip(words, counts) for w in [word] * n if w), divisor


#: a term query's weights are sent as repetitions in steps of 1 / TERM_REPEAT_STEPS of the smallest query-term weight
TERM_REPEAT_STEPS = 4


def term_text(query) -> tuple[str, int]:
    """``(text, divisor)``: a term query (:class:`~hopscotch.retriever.searchers.bm25_expansion.TermQuery`) written
    as one bag-of-words text: each term's word (as the text had it, so the endpoint's analyser makes the term again)
    repeated ``round(weight x divisor)`` times (at least once), the divisor being :data:`TERM_REPEAT_STEPS`; the
    scores divided by it approximate the weighted scores to a quarter of a query term's weight."""
    divisor = TERM_REPEAT_STEPS
    words = []
    for term, weight in query.weights.items():
        if weight > 0:
            words.extend([query.words.get(term, term)] * max(1, round(weight * divisor)))
    return " ".join(words), divisor


class RemoteBM25Index:
    """The search calls of a :class:`~hopscotch.retriever.index.bm25.BM25Index` answered by an endpoint.

    :param url: the index's URL, ``ROOT/v1/NAME`` (:func:`split_index_url`)
    :param token: sent as ``Authorization: Bearer TOKEN``
    :param timeout: seconds to wait for each answer (``--remote-timeout``)
    :param threads: requests in flight for a batch of queries (a shared service wants few)
    :param known: ``docid -> bool``, whether the other side (the dense index) holds a document; a hit it does not
        hold is an error. None: not checked (the hybrid sets it to its dense index's lookup).
    """

    #: the BM25 searcher needs no lock around it (each call is its own HTTP requests)
    thread_safe = True

    def __init__(self, url: str, token: str | None = None, timeout: float = DEFAULT_TIMEOUT, threads: int = 4,
                 known: Callable[[str], bool] | None = None, known_what: str = "the dense index"):
        root, name = split_index_url(url)
        self.url = f"{root}/v1/{name}"
        self.client = RemoteSearcher(root, index=name, token=token, timeout=timeout, threads=threads)
        self.client.token_flag = "--bm25-token"
        self.threads, self.known, self.known_what = threads, known, known_what

    def check(self) -> None:
        """Probe the endpoint with one query (one hit, no text): a one-line error now rather than at the first
        search when it is down, refuses the token, or does not answer Pyserini's shape."""
        self.client.search_raw(PROBE_QUERY, 1, max_doc_length=0)

    def _one(self, text: str, k: int, divisor: int = 1) -> list[tuple[str, float]]:
        if not text.strip():
            return []  # a query with no words: what a local index returns (Pyserini refuses an empty query)
        answer = self.client.search_raw(text, k, max_doc_length=0)
        where = self.client.url + self.client.search_path
        hits: dict[str, float] = {}
        for cand in search_candidates(answer, where):
            docid = canonical_docid(str(cand["docid"]))
            if self.known is not None and not self.known(docid):
                raise UsageError(f"{where} returned document {docid!r}, which {self.known_what} does not hold: "
                                 "the BM25 endpoint and the dense index must index the same corpus (same docids)")
            hits.setdefault(docid, float(cand["score"]) / divisor)
        return list(hits.items())[:k]

    def _map(self, jobs: list[tuple[str, int]], k: int) -> list[list[tuple[str, float]]]:
        if len(jobs) <= 1 or self.threads <= 1:
            return [self._one(text, k, divisor) for text, divisor in jobs]
        with ThreadPoolExecutor(max_workers=min(self.threads, len(jobs))) as pool:
            return list(pool.map(lambda job: self._one(job[0], k, job[1]), jobs))

    def search(self, queries: Sequence[str], k: int = 100, show_progress: bool = False
               ) -> list[list[tuple[str, float]]]:
        """Top-``k`` ``(docid, score)`` per query text, as the endpoint ranks them."""
        return self._map([(q, 1) for q in queries], k)

    def search_weighted(self, queries: Sequence[Sequence[tuple[str, float]]], k: int = 100
                        ) -> list[list[tuple[str, float]]]:
        """Top-``k`` per weighted query (``(text, weight)`` parts), each sent as one repeated-text query
        (:func:`weighted_text`) and its scores scaled back."""
        return self._map([weighted_text(parts) for parts in queries], k)

    def search_terms(self, queries: Sequence, k: int = 100) -> list[list[tuple[str, float]]]:
        """Top-``k`` per term query (:class:`~hopscotch.retriever.searchers.bm25_expansion.TermQuery`), each sent as
        one repeated-word text (:func:`term_text`) and its scores scaled back."""
        return self._map([term_text(q) for q in queries], k)

    def term_stats(self):
        """What the expansion reads of this index: no document frequencies (an endpoint does not say), so the
        reasoning's terms are chosen by saturated frequency alone; the analyser is the local default (English
        Snowball stems, NLTK stopwords), as ``hopscotch bm25-index`` builds."""
        return TermStats(Analyzer(), words=True)

    def get_document(self, docid: str) -> dict[str, Any] | None:
        """The endpoint's ``/v1/NAME/doc/DOCID`` as ``{docid, text[, title]}`` (None: unknown there)."""
        return self.client.get_document(docid)


def dense_docids(dense) -> Callable[[str], bool]:
    """``docid -> bool``: whether the dense (or multi-vector) searcher's index holds the document (its docid lookup,
    opened on first use)."""
    lookup: list[Any] = []

    def known(docid: str) -> bool:
        if not lookup:
            lookup.append(DocidLookup(dense.index_dir, dense.meta))
        return lookup[0].row(docid) is not None

    return known


def remote_index_from_flags(url: str, token: str | None, timeout: float | None, expansion) -> RemoteBM25Index:
    """The endpoint of ``--bm25-url`` (``--bm25-token``, ``--remote-timeout``), checked before any model loads: the
    URL's form, ``--bm25-query-weight`` as repetitions (when the expansion is on), and one probe query."""
    index = RemoteBM25Index(url, token=token, timeout=DEFAULT_TIMEOUT if timeout is None else timeout)
    if expansion.enabled and expansion.raw_bag:   # a term query is sent in quarter steps of a query term's weight
        repetitions([expansion.query_weight, 1.0])
    index.check()
    return index
