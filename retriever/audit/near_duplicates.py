"""Duplicate groups of a corpus in cmass's format, streamed and resumable (``hopscotch audit near-duplicates``).

Output: one JSON object per line for every document that has a duplicate, ``{doc_id, exact_duplicates:
[doc_id, ...], near_duplicates: [{doc_id, jaccard}], n_exact, n_near}`` (cmass's ``corpus_duplicates`` rows,
both directions listed), which :func:`hopscotch.retriever.io.qrels.read_duplicate_groups` reads
(``eval --duplicates``, ``synth --duplicate-groups``). The rule is :mod:`.minhash`'s: exact = the same
normal form (case, accents and punctuation ignored); near = exact Jaccard of word 3-gram shingles >= the
threshold, found by MinHash-LSH among one representative per exact class. A document's text is its title and
text joined by a newline.

Stages, each checkpointed in the state folder, so a killed run resumes where it stopped:

1. **signatures** (one streaming pass, :func:`~hopscotch.retriever.io.corpus.read_corpus`): per chunk of
   ``chunk_size`` documents, ``chunk_NNNNNN.sig.npy`` (``uint32 [n, 128]`` MinHash values) and then
   ``chunk_NNNNNN.meta.npz`` (the 64-bit exact hash, whether the text has shingles, the docids); a chunk whose
   meta file exists is done, and on resume its documents are only read to check that their ids are the same;
2. **candidates**: exact classes from the hashes; LSH band keys of the representatives (:func:`~.minhash.band_keys`,
   bands of :func:`~.minhash.band_params`), pairs sharing a band (:func:`~.minhash.bucket_pairs`), pruned by the
   MinHash estimate (signatures memory-mapped) -> ``near_<threshold>.candidates.npz``;
3. **verification**: a second corpus pass computes the shingle sets of the candidates' documents (``verify_batch``
   documents at a time, one pass per batch, each set held as a sorted array of 64-bit shingle hashes) and keeps
   pairs with exact Jaccard >= threshold ->
   ``near_<threshold>.verified_NNN.npz`` per batch;
4. the groups file, written atomically.

``manifest.json`` records the corpus (path and content fingerprint) and the signature settings; a state folder of
another corpus or settings is refused (``fresh=True`` empties it). Signatures do not depend on the threshold: a
rerun with another ``threshold`` reuses stage 1.
"""

from __future__ import annotations

import itertools
import json
import os
import resource
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hopscotch.retriever.audit import minhash as mh
from hopscotch.retriever.audit.report import AuditReport
from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.io.common import atomic_write, write_json, write_jsonl
from hopscotch.retriever.io.corpus import Document, read_corpus
from hopscotch.retriever.io.fingerprint import manifest_differences, path_fingerprint
from hopscotch.retriever.text.normal_form import normalize_text
from hopscotch.retriever.text.shingles import SHINGLE_WORDS, shingles

STATE_VERSION = 1
SIGNATURE_BATCH = 1000   # documents whose shingle sets are held at once in stage 1


@dataclass
class NearDuplicateConfig:
    """``threshold``: exact Jaccard for a near duplicate; ``chunk_size``: documents per checkpoint;
    ``max_bucket``: the most rows one LSH bucket pairs each row with; ``verify_batch``: documents whose shingles
    are held at once in stage 3."""

    threshold: float = mh.DEFAULT_THRESHOLD
    chunk_size: int = 50_000
    max_bucket: int = 1000
    verify_batch: int = 200_000

    def __post_init__(self):
        if not 0.0 < self.threshold <= 1.0:
            raise UsageError(f"the near-duplicate Jaccard threshold must lie in (0, 1], got {self.threshold}")
        if min(self.chunk_size, self.max_bucket, self.verify_batch) < 2:
            raise UsageError("chunk size, max bucket and verify batch must each be at least 2")


def document_text(doc: Document) -> str:
    """What is compared: the title and the text."""
    return mh.doc_text(doc.title, doc.text)


def rss_mb() -> float:
    """This process's peak resident memory so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def is_state_folder(folder: Path) -> bool:
    """Whether ``folder`` is a state folder this audit made: its ``manifest.json`` names the state version and the
    MinHash settings (what :class:`StateFolder` writes), so ``--fresh`` may empty it."""
    try:
        manifest = json.loads((Path(folder) / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and {"version", "shingles", "num_perm", "chunk_size"} <= set(manifest)


class StateFolder:
    """The checkpoint files of one corpus (module doc)."""

    def __init__(self, folder: str | os.PathLike, corpus: str | os.PathLike, chunk_size: int, fresh: bool):
        self.folder = Path(folder)
        self.corpus = Path(corpus)
        if not self.corpus.exists():
            raise UsageError(f"--corpus {corpus}: no such file or folder")
        manifest = {"version": STATE_VERSION, "corpus": {"path": str(self.corpus.resolve()),
                                                         "content": path_fingerprint(self.corpus)},
                    "shingles": f"word {SHINGLE_WORDS}-grams of the normal form", "num_perm": mh.NUM_PERM,
                    "seed": mh.SEED, "chunk_size": chunk_size}
        file = self.folder / "manifest.json"
        if self.folder.exists() and not is_state_folder(self.folder):
            if not self.folder.is_dir():
                raise UsageError(f"--state {self.folder}: a file, not a state folder; give a new folder")
            if any(self.folder.iterdir()):   # never write into, or empty, a folder this audit did not make
                raise UsageError(f"--state {self.folder}: holds files but no state of this audit (no {file.name} "
                                 f"it wrote); refusing to {'empty' if fresh else 'write into'} it: give a new folder")
        if fresh and self.folder.is_dir():
            shutil.rmtree(self.folder)
        if file.is_file():
            old = json.loads(file.read_text(encoding="utf-8"))
            diffs = manifest_differences(old, json.loads(json.dumps(manifest)), first="corpus", then="then")
            if diffs:
                raise UsageError(f"{self.folder}: a state folder of another corpus or settings "
                                 f"({'; '.join(diffs[:3])}); use another --state folder or --fresh")
        self.folder.mkdir(parents=True, exist_ok=True)
        write_json(file, manifest)
        self.chunk_size = chunk_size

    def sig_path(self, k: int) -> Path:
        return self.folder / f"chunk_{k:06d}.sig.npy"

    def meta_path(self, k: int) -> Path:
        return self.folder / f"chunk_{k:06d}.meta.npz"

    def save_chunk(self, k: int, sigs: np.ndarray, hashes: np.ndarray, nonempty: np.ndarray, ids: list[str]) -> None:
        with atomic_write(self.sig_path(k), "wb") as fh:
            np.save(fh, sigs)
        with atomic_write(self.meta_path(k), "wb") as fh:  # written last: its presence marks the chunk done
            np.savez(fh, hashes=hashes, nonempty=nonempty,
                     ids=np.frombuffer("\n".join(ids).encode("utf-8"), dtype=np.uint8))

    def chunk_ids(self, k: int) -> list[str]:
        with np.load(self.meta_path(k)) as z:
            return z["ids"].tobytes().decode("utf-8").split("\n")

    def chunk_meta(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        with np.load(self.meta_path(k)) as z:
            return z["hashes"], z["nonempty"]

    def signatures(self, k: int) -> np.ndarray:
        return np.load(self.sig_path(k), mmap_mode="r")

    def stage_path(self, threshold: float, max_bucket: int, name: str) -> Path:
        return self.folder / f"near_{threshold:.4f}_b{max_bucket}.{name}.npz"


def _signature_chunks(state: StateFolder, on_chunk=None) -> tuple[int, int, int]:
    """Stage 1: ``(documents, chunks, chunks computed now)``; ``on_chunk(k)`` after each new chunk is saved.
    Only :data:`SIGNATURE_BATCH` documents (and their shingle sets) are held at once; a chunk keeps its ids,
    signatures and hashes until it is saved."""
    done_file = state.folder / "signatures.done"
    if done_file.is_file():
        done = json.loads(done_file.read_text())
        return done["documents"], done["chunks"], 0
    docs = read_corpus(state.corpus)
    n_docs, k, computed = 0, 0, 0
    while True:
        done = state.meta_path(k).is_file()
        ids, sigs, hashes, nonempty = [], [], [], []
        chunk = itertools.islice(docs, state.chunk_size)
        while batch := list(itertools.islice(chunk, SIGNATURE_BATCH)):
            ids.extend(d.docid for d in batch)
            if not done:  # shingle sets of a few documents at a time
                norms = [normalize_text(document_text(d)) for d in batch]
                sets = [shingles(n, normalized=True) for n in norms]
                sigs.append(mh.signatures(sets))
                hashes.extend(mh.text_hash(n, normalized=True) for n in norms)
                nonempty.extend(bool(x) for x in sets)
        if not ids:
            break
        n_docs += len(ids)
        if done:
            if state.chunk_ids(k) != ids:
                raise UsageError(f"{state.folder}: chunk {k} was written for other documents; rerun with --fresh")
        else:
            state.save_chunk(k, np.concatenate(sigs), np.array(hashes, dtype=np.uint64), np.array(nonempty), ids)
            computed += 1
            if on_chunk is not None:
                on_chunk(k)
        k += 1
    write_json(done_file, {"documents": n_docs, "chunks": k})
    return n_docs, k, computed


def _exact_classes(state: StateFolder, n_chunks: int) -> tuple[np.ndarray, np.ndarray]:
    """``(class_of, nonempty)`` per document position: the position of its exact class's first member."""
    metas = [state.chunk_meta(k) for k in range(n_chunks)]
    hashes = np.concatenate([m[0] for m in metas]) if metas else np.zeros(0, np.uint64)
    nonempty = np.concatenate([m[1] for m in metas]) if metas else np.zeros(0, bool)
    positions = np.flatnonzero(nonempty)
    class_of = np.arange(len(hashes), dtype=np.int64)
    _, first, inverse = np.unique(hashes[positions], return_index=True, return_inverse=True)
    class_of[positions] = positions[first][inverse]
    return class_of, nonempty


def _gather(state: StateFolder, positions: np.ndarray) -> np.ndarray:
    """Signature rows at global ``positions`` (memory-mapped chunks, read in position order)."""
    out = np.empty((len(positions), mh.NUM_PERM), dtype=np.uint32)
    chunk = positions // state.chunk_size
    for k in np.unique(chunk):
        rows = np.flatnonzero(chunk == k)
        out[rows] = state.signatures(int(k))[positions[rows] - k * state.chunk_size]
    return out


def _candidates(state: StateFolder, cfg: NearDuplicateConfig, reps: np.ndarray) -> dict:
    """Stage 2: LSH pairs of representatives, pruned by the MinHash estimate."""
    path = state.stage_path(cfg.threshold, cfg.max_bucket, "candidates")
    if path.is_file():
        with np.load(path) as z:
            return {k: z[k] for k in z.files}
    bands, rows = mh.band_params(cfg.threshold)
    keys = np.concatenate([mh.band_keys(_gather(state, block), bands, rows)
                           for block in np.array_split(reps, max(1, len(reps) // state.chunk_size))]) \
        if len(reps) else np.zeros((0, bands), np.uint64)
    pairs = [mh.bucket_pairs(keys[:, b], cfg.max_bucket) for b in range(bands)]
    pairs = np.unique(np.concatenate(pairs), axis=0) if pairs else np.zeros((0, 2), np.uint64)
    i, j = reps[pairs[:, 0].astype(np.int64)], reps[pairs[:, 1].astype(np.int64)]
    est = np.concatenate([mh.estimated_jaccard(_gather(state, a), _gather(state, b))
                          for a, b in zip(np.array_split(i, max(1, len(i) // 100_000)),
                                          np.array_split(j, max(1, len(j) // 100_000)))]) if len(i) else np.zeros(0)
    keep = est >= cfg.threshold - mh.ESTIMATE_SLACK
    out = {"i": i[keep], "j": j[keep], "estimate": est[keep], "lsh_pairs": np.array(len(i)),
           "bands": np.array([bands, rows])}
    with atomic_write(path, "wb") as fh:
        np.savez(fh, **out)
    return out


def _verify(state: StateFolder, cfg: NearDuplicateConfig, i: np.ndarray, j: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray]:
    """Stage 3: exact Jaccard of every candidate pair; ``(jaccard, batches)``."""
    order = np.argsort(np.maximum(i, j), kind="stable")
    jac = np.zeros(len(i))
    batch_rows, needed, batches = [], set(), []
    for r in order:  # batches of pairs whose documents number at most verify_batch
        new = {int(i[r]), int(j[r])} - needed
        if len(needed) + len(new) > cfg.verify_batch and batch_rows:
            batches.append(batch_rows)
            batch_rows, needed = [], set()
            new = {int(i[r]), int(j[r])}
        batch_rows.append(r)
        needed |= new
    if batch_rows:
        batches.append(batch_rows)
    for b, rows in enumerate(batches):
        path = state.stage_path(cfg.threshold, cfg.max_bucket, f"verified_{b:03d}")
        if not path.is_file():
            want = {int(x) for r in rows for x in (i[r], j[r])}
            last = max(want)
            sets = {}
            for pos, doc in enumerate(read_corpus(state.corpus, unique=False)):
                if pos in want:
                    sets[pos] = mh.shingle_array(shingles(document_text(doc)))
                if pos >= last:
                    break
            values = np.array([mh.array_jaccard(sets[int(i[r])], sets[int(j[r])]) for r in rows])
            with atomic_write(path, "wb") as fh:
                np.savez(fh, rows=np.array(rows, dtype=np.int64), jaccard=values)
        with np.load(path) as z:
            jac[z["rows"]] = z["jaccard"]
    return jac, np.array(len(batches))


def _rows(state: StateFolder, n_chunks: int, class_of: np.ndarray, near: list[tuple[int, int, float]]):
    """The groups rows, in corpus order: every member of an exact class of two or more, and every member of a
    class whose representative has a near duplicate."""
    classes: dict[int, list[int]] = {}
    for pos in np.flatnonzero(class_of != np.arange(len(class_of))).tolist():
        classes.setdefault(int(class_of[pos]), [int(class_of[pos])]).append(pos)
    links: dict[int, dict[int, float]] = {}
    for a, b, jac in near:
        links.setdefault(a, {})[b] = jac
        links.setdefault(b, {})[a] = jac
    involved = np.array(sorted({p for m in classes.values() for p in m}
                               | {p for c in links for p in classes.get(c, [c])}), dtype=np.int64)
    docid: dict[int, str] = {}
    for k in range(n_chunks):
        base = k * state.chunk_size
        lo, hi = np.searchsorted(involved, [base, base + state.chunk_size])
        if hi > lo:
            chunk = state.chunk_ids(k)
            docid.update({int(p): chunk[int(p) - base] for p in involved[lo:hi]})
    for pos in involved.tolist():
        c = int(class_of[pos])
        exact = [docid[p] for p in classes.get(c, [c]) if p != pos]
        nears = [{"doc_id": docid[p], "jaccard": round(jac, 4)}
                 for other, jac in sorted(links.get(c, {}).items()) for p in classes.get(other, [other])]
        yield {"doc_id": docid[pos], "exact_duplicates": exact, "near_duplicates": nears,
               "n_exact": len(exact), "n_near": len(nears)}


def find_near_duplicates(corpus: str | os.PathLike, out: str | os.PathLike, state: str | os.PathLike,
                         config: NearDuplicateConfig | None = None, fresh: bool = False, on_chunk=None) -> AuditReport:
    """Write the duplicate groups of ``corpus`` to ``out`` (module doc); the report counts them."""
    cfg = config or NearDuplicateConfig()
    started = time.perf_counter()
    folder = StateFolder(state, corpus, cfg.chunk_size, fresh)
    n_docs, n_chunks, computed = _signature_chunks(folder, on_chunk)
    if n_docs == 0:
        raise UsageError(f"--corpus {corpus}: no documents; nothing to audit")
    rss = {"signatures": rss_mb()}
    class_of, nonempty = _exact_classes(folder, n_chunks)
    reps = np.flatnonzero(nonempty & (class_of == np.arange(len(class_of))))
    cand = _candidates(folder, cfg, reps)
    rss["candidates"] = rss_mb()
    jac, batches = _verify(folder, cfg, cand["i"], cand["j"])
    rss["verification"] = rss_mb()
    keep = jac >= cfg.threshold
    near = [(int(a), int(b), float(x)) for a, b, x in zip(cand["i"][keep], cand["j"][keep], jac[keep])]
    n_rows = write_jsonl(out, _rows(folder, n_chunks, class_of, near))
    rss["groups"] = rss_mb()
    in_exact = int(np.sum(np.bincount(class_of[nonempty])[class_of[nonempty]] > 1)) if nonempty.any() else 0
    n_classes = int(np.sum(np.bincount(class_of[nonempty]) > 1)) if nonempty.any() else 0
    bands, rows = (int(x) for x in cand["bands"])
    details = {"corpus": str(corpus), "out": str(out), "state": str(state), "documents": n_docs,
               "documents_without_shingles": int((~nonempty).sum()), "exact_classes": n_classes,
               "documents_in_exact_classes": in_exact, "representatives": int(len(reps)),
               "lsh_pairs": int(cand["lsh_pairs"]), "candidates_after_estimate": int(len(cand["i"])),
               "near_pairs": len(near), "rows_written": n_rows, "chunks": n_chunks, "chunks_computed_now": computed,
               "verify_batches": int(batches), "seconds": round(time.perf_counter() - started, 1),
               "peak_rss_mb": round(rss_mb(), 1), "peak_rss_mb_after": {k: round(v, 1) for k, v in rss.items()},
               "rule": {"shingles": f"word {SHINGLE_WORDS}-grams of the normal form (title + text)",
                        "num_perm": mh.NUM_PERM, "seed": mh.SEED, "bands": bands, "rows": rows,
                        "estimate_slack": mh.ESTIMATE_SLACK, "threshold": cfg.threshold,
                        "max_bucket": cfg.max_bucket, "chunk_size": cfg.chunk_size}}
    summary = [f"{n_docs:,} documents of {corpus}: {n_rows:,} have a duplicate (rows in {out})",
               f"exact (same normal form): {n_classes:,} classes holding {in_exact:,} documents",
               f"near (word 3-gram Jaccard >= {cfg.threshold}): {len(near):,} pairs of representatives "
               f"({int(cand['lsh_pairs']):,} LSH pairs, {len(cand['i']):,} after the MinHash estimate; "
               f"{bands} bands x {rows} rows)",
               f"state {state}: {n_chunks} chunks ({computed} computed now); "
               f"{details['seconds']}s, peak RSS {details['peak_rss_mb']:.0f} MiB"]
    return AuditReport("near-duplicates", "ok", summary, details)
