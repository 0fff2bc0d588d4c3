"""What a BM25 index costs before building it: disk, build and search RAM, and q/s, for both backends
(``hopscotch bm25-index --plan``, and the BM25 lines of ``hopscotch index --plan``).

Sizes are arithmetic on the folders' formats (bytes a posting, a term, a document) over three corpus figures:
postings a document (distinct terms a document), term occurrences a document and the vocabulary. They come from
the corpus when one is given (its first :data:`SAMPLE_DOCS` documents through the analyzer; the vocabulary grown
to the corpus's size by Heaps' law fitted on the sample), else from the documents' mean bytes scaled from the
cost-curve corpus (:data:`MEASURED`). RAM at build is per phase; q/s is *derived*: measured q/s at 2 threads, k =
100 (docs/scaling.md, "BM25 cost curves") extrapolated in the number of postings (a power law through the two
largest measured sizes; bm25s reads every posting of the query terms: q/s inversely proportional).

Example::

    print(format_bm25_plan(553_000_000, avg_doc_bytes=3000))
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass
from itertools import islice

from hopscotch.retriever.index.bm25.analyzer import Analyzer
from hopscotch.retriever.index.plan import human
from hopscotch.retriever.io.corpus import read_corpus
from hopscotch.retriever.model.query_template import format_document

#: the cost-curve corpus (scripts/bench_scale.py) and what was measured on it, 2 threads, k = 100 (the figures of
#: docs/scaling.md, "BM25 cost curves")
MEASURED = {
    "avg_doc_bytes": 590.3, "postings_per_doc": 54.53, "occurrences_per_doc": 61.1,
    "disk_qps": {100_000: 1869.0, 1_000_000: 562.0, 10_000_000: 91.0},
    "bm25s_qps": {100_000: 416.0, 1_000_000: 42.0},
    # the share of documents holding the most frequent term (its postings are merged in one piece: 0.344 at 1M and
    # at 10M)
    "top_term_share": 0.344,
}
#: what a process holds whatever the size: numba's runtime and the loaded kernel (disk), bm25s and scipy's arrays
FIXED = {"disk_build": 30 * 2 ** 20, "disk_search": 80 * 2 ** 20, "bm25s_build": 20 * 2 ** 20,
         "bm25s_search": 8 * 2 ** 20}
SAMPLE_DOCS = 1_000
#: Heaps' law ``V = K n^beta`` (n term occurrences) when no corpus is given: English text's usual constants
HEAPS_K, HEAPS_BETA = 44.0, 0.5
DOCID_BYTES = 16          # ClimbMix's shard_00045_6622 (the plan's default)
TERM_BYTES = 9.0          # mean bytes of a term and its line break
BLOCK = 64


@dataclass
class CorpusFigures:
    """The corpus figures a plan is computed from (module doc)."""

    avg_doc_bytes: float
    postings_per_doc: float
    occurrences_per_doc: float
    docid_bytes: float = DOCID_BYTES
    heaps_k: float = HEAPS_K
    heaps_beta: float = HEAPS_BETA
    source: str = "scaled from the cost-curve corpus"
    #: the share of documents that hold the most frequent term (a merge range holds at least its postings)
    top_term_share: float = MEASURED["top_term_share"]

    def terms(self, docs: int) -> float:
        return min(self.heaps_k * (docs * self.occurrences_per_doc) ** self.heaps_beta,
                   docs * self.postings_per_doc)


def scaled_figures(avg_doc_bytes: float | None = None) -> CorpusFigures:
    """The cost-curve corpus's figures, postings and occurrences scaled with the documents' bytes."""
    avg = float(avg_doc_bytes or MEASURED["avg_doc_bytes"])
    scale = avg / MEASURED["avg_doc_bytes"]
    return CorpusFigures(avg, MEASURED["postings_per_doc"] * scale, MEASURED["occurrences_per_doc"] * scale)


def measure_figures(corpus, sample: int = SAMPLE_DOCS, stemmer: str | None = "english",
                    stopwords: str | None = "en") -> CorpusFigures:
    """The figures of ``corpus``'s first ``sample`` documents (Heaps' beta fitted between half the sample and all
    of it)."""
    analyzer = Analyzer(stemmer, stopwords)
    docs = list(islice(read_corpus(corpus, unique=False), sample))
    if not docs:
        return scaled_figures()

    vocab, occ, post, size, docid = set(), 0, 0, 0, 0
    df: Counter = Counter()
    half_vocab = half_occ = 0
    for i, d in enumerate(docs):
        terms = analyzer.terms(format_document(d.title, d.text))
        occ, post = occ + len(terms), post + len(set(terms))
        df.update(set(terms))
        vocab.update(terms)
        size += len(json.dumps({"_id": d.docid, "title": d.title, "text": d.text}, ensure_ascii=False)) + 1
        docid += len(d.docid.encode("utf-8"))
        if i + 1 == len(docs) // 2:
            half_vocab, half_occ = len(vocab), occ
    n = len(docs)
    beta = HEAPS_BETA
    if half_vocab and occ > half_occ and len(vocab) > half_vocab:
        beta = min(0.9, max(0.3, math.log(len(vocab) / half_vocab) / math.log(occ / half_occ)))
    k = len(vocab) / max(occ, 1) ** beta
    return CorpusFigures(size / n, post / n, occ / n, docid / n, k, beta,
                         f"measured on the first {n:,} documents of {corpus}",
                         max(df.values(), default=0) / n)


def _qps(measured: dict, postings: float, per_doc: float, exponent: float | None) -> float:
    """q/s at ``postings``, extrapolated from the measured points (their postings: size x ``per_doc``)."""
    pts = sorted(measured.items())
    (n0, q0), (n1, q1) = pts[-2], pts[-1]
    p0, p1 = n0 * per_doc, n1 * per_doc
    alpha = exponent if exponent is not None else math.log(q0 / q1) / math.log(p1 / p0)
    return q1 * (p1 / postings) ** alpha


def plan_bm25(docs: int, avg_doc_bytes: float | None = None, figures: CorpusFigures | None = None,
              batch_docs: int = 100_000, merge_postings: int = 20_000_000) -> dict:
    """Both backends at ``docs`` documents: ``{backend: {"disk", "build_ram", "search_ram", "qps", "rows"}}``
    (bytes; ``rows``: ``(section, item, bytes)``), and ``"figures"``."""
    f = figures or scaled_figures(avg_doc_bytes)
    postings, occurrences, terms = docs * f.postings_per_doc, docs * f.occurrences_per_doc, f.terms(docs)
    docid_files = docs * (f.docid_bytes + 1 + 8 + 8 + 16)  # docids.txt, offsets, hashes, sorted lookup
    disk_rows = [("disk", "postings (uint32 row + float32 impact)", 8 * postings),
                 ("disk", "block maxima (float32 a 64 postings) and pointers", 4 * (postings / BLOCK + terms / 2)
                  + 8 * terms),
                 ("disk", "term table (hash, max, offsets, text, indptr)", terms * (8 + 4 + 8 + TERM_BYTES + 8)),
                 ("disk", "document lengths (uint32)", 4 * docs),
                 ("disk", "docids, offsets, hashes and lookup", docid_files)]
    batch = min(batch_docs, docs)
    run_ram = batch * (50 * f.occurrences_per_doc + 3 * f.avg_doc_bytes) + FIXED["disk_build"]
    ranges = max(1, math.ceil(postings / merge_postings))
    # ranges of about merge_postings, but a term is not split: one range holds at least the most frequent term's
    merge_ram = 40 * max(postings / ranges, f.top_term_share * docs) + FIXED["disk_build"]
    disk_build = [("build", f"runs: a batch of {batch:,} documents (~50 B a term occurrence)", run_ram),
                  ("build", "merge: one range (~40 B a posting; at least the most frequent term's postings)",
                   merge_ram),
                  ("build", "docid lookup sort (32 B a document)", 32 * docs + FIXED["disk_build"])]
    disk_search = [("search", "memory-mapped postings the queries touch (at most all of them)", 8 * postings),
                   ("search", "term and docid tables (mapped)", terms * 20 + docs * 8),
                   ("search", "numba's runtime and the compiled kernel", FIXED["disk_search"])]
    bm25s_rows = [("disk", "score matrix (float32 score + int32 row a posting)", 8 * postings),
                  ("disk", "vocabulary json, docids", terms * 20 + docs * (f.docid_bytes + 1))]
    bm25s_build = [("build", "token id lists and the matrix being built (~44 B a term occurrence)",
                    44 * occurrences + FIXED["bm25s_build"])]
    bm25s_search = [("search", "score matrix in RAM", 8 * postings),
                    ("search", "docids (Python strings) and vocabulary",
                     docs * 70 + terms * 100 + FIXED["bm25s_search"])]
    out = {"figures": f, "postings": postings, "terms": terms}
    for name, rows, build, search, qps in (
            ("disk", disk_rows, disk_build, disk_search,
             _qps(MEASURED["disk_qps"], postings, MEASURED["postings_per_doc"], None)),
            ("bm25s", bm25s_rows, bm25s_build, bm25s_search,
             _qps(MEASURED["bm25s_qps"], postings, MEASURED["postings_per_doc"], 1.0))):
        out[name] = {"disk": sum(b for *_, b in rows), "build_ram": max(b for *_, b in build),
                     "search_ram": sum(b for *_, b in search), "qps": qps, "rows": rows + build + search}
    return out


def format_bm25_plan(docs: int, avg_doc_bytes: float | None = None, figures: CorpusFigures | None = None,
                     batch_docs: int | None = None, merge_postings: int | None = None) -> str:
    """The plan's text; ``batch_docs`` / ``merge_postings``: the disk build's (None: its defaults)."""
    plan = plan_bm25(docs, avg_doc_bytes, figures, **{k: v for k, v in (("batch_docs", batch_docs),
                                                                        ("merge_postings", merge_postings)) if v})
    f = plan["figures"]
    lines = [f"BM25 plan: {docs:,} documents of {f.avg_doc_bytes:,.0f} B ({f.source}): "
             f"{f.postings_per_doc:,.1f} postings and {f.occurrences_per_doc:,.1f} term occurrences a document, "
             f"{plan['postings']:,.0f} postings, ~{plan['terms']:,.0f} terms (Heaps: {f.heaps_k:,.1f} n^"
             f"{f.heaps_beta:.2f})"]
    for name, what in (("disk", "disk backend (memory-mapped postings, block-max MaxScore)"),
                       ("bm25s", "bm25s backend (the score matrix in RAM)")):
        p = plan[name]
        lines.append(f"{what}: disk {human(p['disk'])}, build RAM {human(p['build_ram'])} (largest phase), "
                     f"search RAM {human(p['search_ram'])}, ~{p['qps']:,.1f} q/s at k=100 on 2 threads (derived)")
        lines += [f"  {section:<7} {item:<82} {human(b):>11}" for section, item, b in p["rows"]]
    lines.append("note: q/s is extrapolated from the cost-curve corpus (docs/scaling.md, 'BM25 cost curves') in the "
                 "number of postings; measure on a sample of the real corpus before sizing hardware")
    return "\n".join(lines)


def bm25_plan_summary(docs: int, avg_doc_bytes: float | None = None) -> str:
    """The BM25 lines ``hopscotch index --plan`` prints beside the dense plan (``bm25-index --plan`` has the
    detail)."""
    plan = plan_bm25(docs, avg_doc_bytes or None)
    lines = [f"BM25 beside it ({docs:,} documents of {plan['figures'].avg_doc_bytes:,.0f} B, "
             f"~{plan['postings']:,.0f} postings; detail: hopscotch bm25-index --plan):"]
    for name in ("disk", "bm25s"):
        p = plan[name]
        lines.append(f"  {name:<6} disk {human(p['disk'])}, build RAM {human(p['build_ram'])}, search RAM "
                     f"{human(p['search_ram'])}{' (mapped)' if name == 'disk' else ''}, ~{p['qps']:,.1f} q/s "
                     "(derived)")
    return "\n".join(lines)
