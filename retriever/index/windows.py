"""Passage windows: a long document indexed as several overlapping windows, scored by its best one (MaxP).

An encoder sees ``max_length`` tokens of a document; on long web pages the evidence usually lies further
in. With ``--windows N`` (or a model's recorded ``passage_windows``) ``hopscotch index`` encodes, besides
each document's usual row (its first window: the document cut at ``max_length``), up to ``N - 1`` more
windows of its text, ``stride`` tokens apart, each shown to the encoder as ``title + " " + window``. They
form a second index folder, ``index_dir/windows/`` (same layout, no docstore), whose ids are
``<docid>#w<i>``. The dense searcher searches both and gives each document the score of its best row
(:func:`best_per_document`), so a document whose evidence sits 2,000 tokens in is found by that window.
Documents that fit one window add nothing; an index of short passages has no ``windows/`` folder.

Example (not run: it needs a tokenizer and long documents)::

    spec = WindowSpec(max_windows=64, stride=128, max_length=160)
    view = TailWindows(tokenizer, spec)
    view(Document("d1", "Title", long_text))   # [Document("d1#w1", "Title", ...), ...]

The ``windows/`` folder is encoded by every rank: each rank encodes the windows of its own document shards, in
parts, and rank 0 gathers the parts into the folder's shards (:func:`encode_parts`, :func:`gather_parts`).

Part ``j`` (``windows/parts/shards/shard_XXXXX.*``, written like any shard, its ``done.json`` naming the rank
that encoded it) holds the windows (:class:`TailWindows`) of document shard ``j``, in corpus order: any number of them, none included. So the ranks split the windows as they split the
documents (:func:`~hopscotch.retriever.index.corpus_shards.rank_block`). Once every part is done, rank 0
records their sizes and ranks in ``windows/parts.json`` and copies their rows, in order, into
``windows/shards/``: shard ``i`` holds the windows at positions ``[i * shard_size, (i + 1) * shard_size)`` of
the corpus's window stream, the layout of any index folder (:mod:`hopscotch.retriever.index.layout`), and the
ids and rows one process streaming the corpus's windows writes. A part is deleted once all its rows lie in
finished shards, so the windows take their own size on disk plus about one part while they are gathered.

Everything resumes: a killed run encodes only the unfinished parts (none once ``parts.json`` exists) and
gathers only the unfinished shards.

Example (the parts)::

    encode_parts(corpus, "idx", "idx/windows", view, 100_000, rank, world, num_docs, encode)  # every rank
    rows = gather_parts("idx/windows", num_shards(num_docs, 100_000), 100_000)                # rank 0, then
"""

from __future__ import annotations

import json
import math
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from itertools import islice
from pathlib import Path

import numpy as np

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.index.corpus_shards import file_row_counts, iter_shards, num_shards, rank_block
from hopscotch.retriever.index.layout import load_shard_embeddings, load_shard_ids, read_done_marker, shard_file
from hopscotch.retriever.index.shard_files import remove_shard, shard_complete, write_rows
from hopscotch.retriever.io.common import write_json
from hopscotch.retriever.io.corpus import Document, read_corpus
from hopscotch.retriever.io.progress import progress
from hopscotch.retriever.model.config import model_settings

SEPARATOR = "#w"


def window_docid(docid: str, i: int) -> str:
    return f"{docid}{SEPARATOR}{i}"


def parent_docid(window_id: str) -> str:
    """The document a window id belongs to (every window id ends in exactly one ``#w<i>``)."""
    return window_id.rsplit(SEPARATOR, 1)[0]


@dataclass(frozen=True)
class WindowSpec:
    """:param max_windows: windows a document is indexed as, its first (usual) row included; 1 is off
    :param stride: tokens between the starts of consecutive windows (at most one window's text budget)
    :param max_length: encoder tokens per window, special tokens, passage prefix and title included"""

    max_windows: int
    stride: int
    max_length: int

    def __post_init__(self):
        for name in ("max_windows", "stride", "max_length"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UsageError(f"--{name.replace('_', '-')}: expected a whole number >= 1, got {value!r}")

    @property
    def enabled(self) -> bool:
        return self.max_windows > 1

    def to_json(self) -> dict:
        return asdict(self)

    def encode_config(self) -> dict:
        """What decides the windows, as the index's ``encode_config.json`` records it (named as the flags)."""
        return {"windows": self.max_windows, "window_stride": self.stride}


def window_spec(max_windows: int | None, stride: int | None, max_length: int,
                stride_from: str = "--window-stride") -> WindowSpec:
    """The spec of ``--windows`` / ``--window-stride`` (None: off; a stride of None is 80% of ``max_length``).

    The one check of the settings together: a stride longer than a window (``stride_from``: where it came
    from) would skip the text between windows, so it is a :class:`UsageError`, windows on or not.
    """
    spec = WindowSpec(max_windows or 1, stride or max(1, math.floor(0.8 * max_length)), max_length)
    if stride is not None and stride > max_length:
        raise UsageError(f"{stride_from} {stride} > --max-length {max_length}: windows that far apart would leave "
                         f"the text between them unindexed; give a stride of at most {max_length} tokens")
    return spec


def passage_length(settings, max_length: int | None = None) -> int:
    """``--max-length`` of ``hopscotch index`` with a model (its :class:`ModelSettings`): ``max_length``, else
    the model's recorded ``passage_max_len``, else 256."""
    return (settings.passage_max_len or 256) if max_length is None else max_length


def model_window_spec(settings, max_windows: int | None = None, stride: int | None = None,
                      max_length: int | None = None) -> WindowSpec:
    """The windows ``hopscotch index`` cuts with a model: ``--windows`` / ``--window-stride`` / ``--max-length``,
    each None falling back to the model's recorded ``passage_windows`` / ``window_stride`` / passage length."""
    windows = settings.passage_windows if max_windows is None else max_windows
    source = "--window-stride"
    if stride is None and (windows or 1) > 1:  # the model's stride matters only when its windows are on
        stride, source = settings.window_stride, f"{settings.path}: the model's recorded window_stride"
    return window_spec(windows, stride, passage_length(settings, max_length), source)


class TailWindows:
    """A corpus view: each document -> its windows after the first (none when the document fits one).

    Windows are cut from ``text`` by tokenizer offsets, so each holds whole tokens, exactly the text
    budget ``max_length - special tokens - tokens(prefix + title)``; the first window (start 0) is the
    document's usual row and is not repeated here. Window ``i`` starts at ``i * stride``, the last one is
    moved back to end at the text's end (so no window is a short scrap whose few words score high by
    chance), and ``stride`` is capped at the budget, so no text between windows is skipped.
    """

    def __init__(self, tokenizer, spec: WindowSpec, passage_prefix: str = ""):
        if not getattr(tokenizer, "is_fast", False):
            raise UsageError("--windows needs a fast (Rust) tokenizer that returns character offsets")
        self.tokenizer, self.spec, self.passage_prefix = tokenizer, spec, passage_prefix
        self.specials = tokenizer.num_special_tokens_to_add(pair=False)

    def _tokens(self, text: str, offsets: bool = False):
        out = self.tokenizer(text, add_special_tokens=False, truncation=False, verbose=False,
                             return_offsets_mapping=offsets, return_attention_mask=False,
                             return_token_type_ids=False)
        return out["offset_mapping"] if offsets else out["input_ids"]

    def __call__(self, doc: Document) -> list[Document]:
        if not self.spec.enabled or not doc.text:
            return []
        head = self.passage_prefix + (f"{doc.title} " if doc.title else "")
        budget = max(self.spec.max_length - self.specials - (len(self._tokens(head)) if head else 0), 8)
        offsets = self._tokens(doc.text, offsets=True)
        if len(offsets) <= budget:
            return []
        stride, last = min(self.spec.stride, budget), len(offsets) - budget
        out: list[Document] = []
        start = stride
        while len(out) < self.spec.max_windows - 1:
            start = min(start, last)  # the last window ends at the text's end and is as long as the others
            span = offsets[start:start + budget]
            out.append(Document(window_docid(doc.docid, len(out) + 1), doc.title,
                                doc.text[span[0][0]:span[-1][1]]))
            if start >= last:
                break
            start += stride
        return out


def windows_per_document(corpus, model, max_windows: int | None = None, stride: int | None = None,
                         max_length: int | None = None, sample: int = 1000) -> tuple[float, int]:
    """Mean windows beyond the first over the first ``sample`` documents of ``corpus``, as ``hopscotch index``
    would cut them with ``model`` (None: the model's recorded ``passage_windows`` / ``window_stride`` /
    ``passage_max_len``), and the number of documents read (what ``index --plan`` sizes ``windows/`` by)."""
    from transformers import AutoTokenizer

    settings = model_settings(model)
    spec = model_window_spec(settings, max_windows, stride, max_length)
    if not spec.enabled:
        return 0.0, 0
    view = TailWindows(AutoTokenizer.from_pretrained(settings.path), spec, settings.passage_prefix)
    counts = [len(view(doc)) for doc in islice(read_corpus(corpus, unique=False), sample)]
    return (sum(counts) / len(counts) if counts else 0.0), len(counts)


def best_per_document(main: Sequence[tuple[str, float]], windows: Sequence[tuple[str, float]], k: int
                      ) -> list[tuple[str, float]]:
    """Merge a query's document hits and window hits (ids ``<docid>#w<i>``) into the top ``k`` documents, each
    scored by its best row (MaxP); ties keep the documents' first appearance order."""
    best: dict[str, float] = {}
    for docid, score in list(main) + [(parent_docid(w), s) for w, s in windows]:
        if docid not in best or score > best[docid]:
            best[docid] = score
    order = {d: i for i, d in enumerate(best)}
    return sorted(best.items(), key=lambda item: (-item[1], order[item[0]]))[:k]


def search_windows(search: Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray]],
                   docid_of: Callable[[int], str], total: int, queries: np.ndarray, k: int
                   ) -> list[list[tuple[str, float]]]:
    """Each query's top window hits, enough of them to name ``k`` distinct documents (or every window):
    with them and the top ``k`` document rows, :func:`best_per_document` is the exact MaxP top ``k``."""
    depth = min(total, 4 * k)
    while True:
        scores, rows = search(queries, depth)
        hits = [[(docid_of(int(r)), float(s)) for s, r in zip(srow, rrow) if r >= 0]
                for srow, rrow in zip(scores, rows)]
        enough = all(len({parent_docid(w) for w, _ in h}) >= k for h in hits)
        if enough or depth >= total:
            return hits
        depth = min(total, depth * 4)


# --- the windows/ folder encoded by every rank, in parts -------------------------------------------------------

PARTS_DIR = "parts"
SIZES_FILE = "parts.json"


def parts_dir(windows_dir: str | Path) -> Path:
    return Path(windows_dir) / PARTS_DIR


def parts_gathered(windows_dir: str | Path) -> bool:
    """Every part was done once (their sizes are recorded); encoding them is over, gathering may not be."""
    return (Path(windows_dir) / SIZES_FILE).is_file()


def encode_parts(corpus, index_dir: Path, windows_dir: Path, view: Callable[[Document], list[Document]],
                 shard_size: int, rank: int, world_size: int, num_docs: int,
                 encode: Callable[[list[Document]], np.ndarray], show_progress: bool = True) -> tuple[list[int], int]:
    """Encode this rank's unfinished parts: the windows (``view``) of its block of document shards, each with
    ``encode`` (documents -> embeddings); returns the parts encoded and the windows in them."""
    if parts_gathered(windows_dir):
        return [], 0
    folder = parts_dir(windows_dir)
    counts, block = None, None
    if world_size > 1:  # the same contiguous block of shards as this rank's documents
        counts = file_row_counts(corpus, cache=Path(index_dir) / "corpus_counts.json")
        block = rank_block(num_shards(num_docs, shard_size), rank, world_size)
    size = num_docs if block is None else min(block.stop * shard_size, num_docs) - block.start * shard_size
    bar = progress(desc=f"windows rank {rank}/{world_size}", unit="doc", total=size, show=show_progress)
    encoded, windows = [], 0
    for shard, docs, n in iter_shards(corpus, shard_size, block, counts,
                                      wanted=lambda s: not shard_complete(folder, s)):
        if docs is not None:
            t0 = time.perf_counter()
            ids, emb = _encode_windows(docs, view, encode, shard_size)
            write_rows(folder, shard, ids, emb, time.perf_counter() - t0, marker={"rank": rank, "documents": len(docs)})
            encoded.append(shard)
            windows += len(ids)
            bar.set_postfix(shard=shard, windows=windows)
        bar.update(n)
    bar.close()
    return encoded, windows


def _encode_windows(docs: list[Document], view, encode, chunk: int) -> tuple[np.ndarray, np.ndarray]:
    """The ids and float16 embeddings of ``docs``' windows, encoded about ``chunk`` at a time (as much as a shard of
    documents), so a part of many windows holds no more texts or float32 vectors than a shard does."""
    ids, embs, pending = [], [], []
    for i, doc in enumerate(docs):
        pending += view(doc)
        if pending and (len(pending) >= chunk or i == len(docs) - 1):
            embs.append(encode(pending).astype(np.float16))
            ids += [w.docid.encode("utf-8") for w in pending]
            pending = []
    return np.array(ids, dtype=bytes), np.concatenate(embs) if embs else np.zeros((0, 0), dtype=np.float16)


def _part_sizes(windows_dir: Path, num_parts: int) -> list[dict]:
    """``parts.json``'s ``[{rows, rank}]`` of each part, written from the parts' markers the first time."""
    path = windows_dir / SIZES_FILE
    if not path.is_file():
        folder = parts_dir(windows_dir)
        markers = [read_done_marker(folder, j) for j in range(num_parts)]
        missing = [j for j, m in enumerate(markers) if m is None or not shard_complete(folder, j)]
        if missing:
            raise UsageError(f"{shard_file(folder, missing[0], 'done.json')}: window parts {missing[:10]} are not "
                             "finished; rerun 'hopscotch index' with the same flags to encode them")
        write_json(path, {"parts": [{"rows": m["num_docs"], "rank": m.get("rank")} for m in markers]})
    try:
        parts = json.loads(path.read_text())["parts"]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise UsageError(f"{path}: unreadable window part sizes ({exc}); rerun with --overwrite") from None
    if len(parts) != num_parts:
        raise UsageError(f"{path}: records {len(parts)} window parts, the documents have {num_parts} shards; "
                         "rerun with --overwrite")
    return parts


def gather_parts(windows_dir: str | Path, num_parts: int, shard_size: int, show_progress: bool = True) -> int:
    """Copy the finished parts' rows, in order, into ``windows_dir``'s shards of ``shard_size`` (the unfinished
    ones), deleting each part once its rows are all in finished shards; returns the number of windows."""
    windows_dir = Path(windows_dir)
    parts = _part_sizes(windows_dir, num_parts)
    folder = parts_dir(windows_dir)
    ends = np.cumsum([0] + [p["rows"] for p in parts])
    total = int(ends[-1])
    gone = 0  # parts [0, gone) are deleted
    for shard in progress(range(num_shards(total, shard_size)), desc="gather windows", unit="shard",
                          show=show_progress):
        lo, hi = shard * shard_size, min((shard + 1) * shard_size, total)
        if not shard_complete(windows_dir, shard):
            _gather_shard(windows_dir, shard, parts, ends, lo, hi)
        while gone < num_parts and ends[gone + 1] <= hi:
            remove_shard(folder, gone)
            gone += 1
    shutil.rmtree(folder, ignore_errors=True)
    return total


def _gather_shard(windows_dir: Path, shard: int, parts: list[dict], ends: np.ndarray, lo: int, hi: int) -> None:
    """Write shard ``shard`` of ``windows_dir``: window rows ``[lo, hi)``, read from the parts holding them."""
    t0 = time.perf_counter()
    folder = parts_dir(windows_dir)
    embs, ids, used = [], [], []
    for j in range(int(np.searchsorted(ends, lo, side="right")) - 1, len(parts)):
        if ends[j] >= hi:
            break
        if ends[j + 1] <= max(lo, ends[j]):  # a part without windows
            continue
        a, b = max(lo, ends[j]) - ends[j], min(hi, ends[j + 1]) - ends[j]
        emb, part_ids = load_shard_embeddings(folder, j), load_shard_ids(folder, j)
        if len(emb) != ends[j + 1] - ends[j] or len(part_ids) != len(emb):
            raise UsageError(f"{shard_file(folder, j, 'emb.npy')}: {len(emb)} rows and {len(part_ids)} ids, "
                             f"{windows_dir / SIZES_FILE} says {ends[j + 1] - ends[j]}; rerun with --overwrite")
        embs.append(np.asarray(emb[a:b]))
        ids.append(np.asarray(part_ids[a:b]))
        used.append(j)
    ids = np.concatenate(ids)  # as wide as the widest part: narrowed to this shard's longest id, as encoding writes it
    ids = ids.astype(f"S{max(1, int(np.char.str_len(ids).max()))}")
    write_rows(windows_dir, shard, ids, np.concatenate(embs), time.perf_counter() - t0,
               marker={"parts": used, "ranks": sorted({parts[j]["rank"] for j in used} - {None})})
