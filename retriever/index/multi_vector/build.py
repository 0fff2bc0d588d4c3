"""Build a multi-vector (late-interaction) index over the token vectors of an encoded index folder.

``hopscotch index --model M`` with a multi-vector model folder (``model.kind: multi_vector``) encodes the corpus
into the usual resumable shards (:mod:`hopscotch.retriever.index.encode`), each shard also holding its documents'
token vectors (``tok.npy``, float16 ``[tokens, dim]``) and token counts (``doclens.npy``, int32); its ``emb.npy``
holds each document's mean token vector (normalised), so the folder is also an ordinary dense index. Then rank 0
builds, under ``mv/``, every step resumable:

1. the residual codec (:mod:`hopscotch.retriever.index.multi_vector.codec`): k-means centroids over a seeded sample
   of the token vectors and the residual buckets (``codec.json``, ``centroids.npy``);
2. each shard's compressed tokens (``shard_XXXXX.codes.npy`` int32, ``shard_XXXXX.residuals.npy`` uint8), its
   ``shard_XXXXX.done.json`` marker written last and naming the codec it was compressed with;
3. the inverted file centroid -> documents (``ivf.npy`` int64 rows grouped by centroid, ``ivf_offsets.npy``) and,
   from the same distinct (document, centroid) pairs, each shard's document -> centroids table
   (``shard_XXXXX.doc_centroids.npy``, ``shard_XXXXX.doc_centroid_counts.npy``);

and records ``multi_vector`` in ``index.json`` (what :class:`~.store.MultiVectorStore` reads). A rerun skips every
finished step. A rerun asking other codec settings (``nbits``, centroids, seed, sample) than the saved codec was
trained with is refused, naming both, unless ``overwrite`` (``index --overwrite``, which also starts the encoding
again): the rule of :func:`~hopscotch.retriever.index.shard_files.check_encode_config` for
the encode settings, so an index is never recompressed in place by a rerun that only meant to resume.

Example (not run: it needs an encoded multi-vector index folder)::

    meta = build_multi_vector_index("index_dir", IndexMeta.load("index_dir"), MultiVectorOptions(nbits=2))
    meta.multi_vector["num_tokens"], meta.multi_vector["bytes_per_token"]
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.index.layout import IndexMeta, _load_shard_npy, save_npy, shard_file, shard_name
from hopscotch.retriever.index.multi_vector.codec import (
    CODEC_FILE,
    COMPRESS_CHUNK,
    ResidualCodec,
    default_num_centroids,
    token_bytes,
)
from hopscotch.retriever.io.common import write_json
from hopscotch.retriever.io.fingerprint import digest
from hopscotch.retriever.io.progress import progress

MV_DIR = "mv"
TOKEN_FILES = ("tok.npy", "doclens.npy")
IVF_FILE, IVF_OFFSETS_FILE = "ivf.npy", "ivf_offsets.npy"
IVF_FORMAT = 2  # 2: the per-shard document -> centroids tables are written with the inverted file


@dataclass
class MultiVectorOptions:
    """:param nbits: bits per residual dimension (1, 2, 4 or 8); :param num_centroids: k-means centroids (None:
    :func:`~hopscotch.retriever.index.multi_vector.codec.default_num_centroids` of the token count);
    :param sample_tokens: token vectors the codec is trained on (None: 64 per centroid, at most all);
    :param seed: of the sample and of k-means; :param overwrite: retrain a saved codec trained with other settings
    (and recompress every shard) instead of refusing the run."""

    nbits: int = 2
    num_centroids: int | None = None
    sample_tokens: int | None = None
    seed: int = 13
    show_progress: bool = True
    overwrite: bool = False


def shard_tokens(index_dir: str | os.PathLike, shard: int) -> tuple[np.ndarray, np.ndarray]:
    """One shard's float16 token vectors ``[T, dim]`` (memory-mapped) and int32 token counts ``[n]``."""
    return (_load_shard_npy(shard_file(index_dir, shard, "tok.npy"), True),
            _load_shard_npy(shard_file(index_dir, shard, "doclens.npy"), False))


def mv_file(index_dir: str | os.PathLike, shard: int, kind: str) -> Path:
    """``mv/shard_XXXXX.<kind>`` (``codes.npy``, ``residuals.npy`` or ``done.json``)."""
    return Path(index_dir) / MV_DIR / f"{shard_name(shard)}.{kind}"


def _codec_key(codec_about: dict) -> str:
    return digest({k: codec_about.get(k) for k in ("nbits", "num_centroids", "dim", "cutoffs", "values",
                                                  "encode_sha256", "seed", "sample_tokens")})


def _sample(index_dir: Path, meta: IndexMeta, counts: list[int], size: int, seed: int) -> np.ndarray:
    """``size`` token vectors drawn uniformly without replacement across the shards (seeded)."""
    total = sum(counts)
    picks = np.sort(np.random.default_rng(seed).choice(total, size=min(size, total), replace=False))
    out, start = [], 0
    for shard, count in enumerate(counts):
        local = picks[(picks >= start) & (picks < start + count)] - start
        if len(local):
            out.append(np.asarray(shard_tokens(index_dir, shard)[0][local], dtype=np.float32))
        start += count
    return np.concatenate(out)


def _train_codec(index_dir: Path, meta: IndexMeta, counts: list[int], opts: MultiVectorOptions) -> ResidualCodec:
    folder = index_dir / MV_DIR
    total = sum(counts)
    centroids = opts.num_centroids or default_num_centroids(total)
    if opts.num_centroids and opts.num_centroids > total:   # never clamped quietly: the codec would differ
        raise UsageError(f"--mv-centroids {opts.num_centroids:,}: more centroids than the {total:,} token vectors "
                         f"of this corpus; give at most {total:,} (or leave it out: {default_num_centroids(total):,})")
    wanted = _wanted(opts, total, meta.encode_sha256)
    sample = wanted["sample_tokens"]
    if sample < centroids:
        raise UsageError(f"{sample:,} sampled token vectors cannot train {centroids:,} centroids: sample at least as "
                         "many tokens as centroids")
    saved = ResidualCodec.saved(folder)
    if saved is not None and all(saved.get(k) == v for k, v in wanted.items()):
        return ResidualCodec.load(folder)
    if saved is not None and not opts.overwrite:
        raise UsageError(_codec_refusal(folder, saved, wanted, opts))
    if opts.show_progress:
        print(f"multi-vector codec: k-means of {centroids:,} centroids over {sample:,} of {total:,} token vectors, "
              f"{opts.nbits}-bit residuals", file=sys.stderr)
    codec = ResidualCodec.train(_sample(index_dir, meta, counts, sample, opts.seed), centroids, opts.nbits, opts.seed)
    (folder / CODEC_FILE).unlink(missing_ok=True)  # every shard compressed with the old codec is redone
    codec.save(folder, **wanted)
    return codec


def _wanted(opts: MultiVectorOptions, total: int, encode_sha256: str | None) -> dict:
    """The settings a codec trained for ``opts`` over ``total`` token vectors records (a saved codec is reused only
    when it records the same)."""
    centroids = opts.num_centroids or default_num_centroids(total)
    return {"nbits": opts.nbits, "requested_centroids": centroids, "seed": opts.seed,
            "sample_tokens": opts.sample_tokens or min(total, 64 * centroids), "encode_sha256": encode_sha256,
            "num_tokens": total}


def checked_codec_options(index_dir: str | os.PathLike, options: MultiVectorOptions | None, overwrite: bool,
                          encode_sha256: str) -> MultiVectorOptions:
    """``options`` (None: the defaults) with ``overwrite``, once checked before any encoding: a run whose codec
    settings differ from the codec saved in ``index_dir/mv`` is refused unless ``overwrite`` (the rule
    :func:`_train_codec` applies once the tokens are counted), decided early where the saved codec was trained on
    these very shards (``encode_sha256``: the token count it records holds)."""
    opts = replace(options or MultiVectorOptions(), overwrite=overwrite)
    folder = Path(index_dir) / MV_DIR
    saved = ResidualCodec.saved(folder) if not overwrite else None
    if isinstance(saved, dict) and saved.get("encode_sha256") == encode_sha256 and \
            isinstance(saved.get("num_tokens"), int) and saved["num_tokens"] > 0:
        wanted = _wanted(opts, saved["num_tokens"], encode_sha256)
        if any(saved.get(k) != v for k, v in wanted.items()):
            raise UsageError(_codec_refusal(folder, saved, wanted, opts))
    return opts


#: how a codec setting is named in a refusal (the flag that sets it, where there is one)
_CODEC_SETTINGS = {"nbits": "--nbits", "requested_centroids": "--mv-centroids", "seed": "seed",
                   "sample_tokens": "sample_tokens", "num_tokens": "num_tokens", "encode_sha256": "encode_sha256"}


def _codec_refusal(folder: Path, saved: dict, wanted: dict, opts: MultiVectorOptions) -> str:
    """Why a rerun may not replace the codec saved in ``folder``: the old and the new settings (the flags always,
    the other settings where they differ; the sample size only where it was asked, else it follows the others)."""
    keys = [k for k in _CODEC_SETTINGS if k in ("nbits", "requested_centroids")
            or (saved.get(k) != wanted[k] and (k != "sample_tokens" or opts.sample_tokens))]

    def said(about: dict) -> str:
        values = {k: "unrecorded" if about.get(k) is None else str(about[k]) for k in keys}
        return " ".join(f"{_CODEC_SETTINGS[k]} {v[:12] if k == 'encode_sha256' else v}" for k, v in values.items())

    return (f"{folder} holds a codec trained with {said(saved)}; this run asks {said(wanted)}: rerun with "
            "--overwrite to build the index again with these settings (or use another --out)")


def _compress_shards(index_dir: Path, meta: IndexMeta, codec: ResidualCodec, key: str, show: bool) -> None:
    bar = progress(total=meta.num_shards, desc="compress token vectors", unit="shard", show=show)
    for shard in range(meta.num_shards):
        try:
            done = json.loads(mv_file(index_dir, shard, "done.json").read_text())
        except (OSError, ValueError):
            done = None
        if not (done and done.get("codec") == key and mv_file(index_dir, shard, "codes.npy").is_file()
                and mv_file(index_dir, shard, "residuals.npy").is_file()):
            mv_file(index_dir, shard, "done.json").unlink(missing_ok=True)
            tok, doclens = shard_tokens(index_dir, shard)
            codes, packed = [], []
            for start in range(0, len(tok), COMPRESS_CHUNK):
                c, p = codec.compress(np.asarray(tok[start:start + COMPRESS_CHUNK], dtype=np.float32))
                codes.append(c)
                packed.append(p)
            save_npy(mv_file(index_dir, shard, "codes.npy"), np.concatenate(codes) if codes else np.zeros(0, np.int32))
            save_npy(mv_file(index_dir, shard, "residuals.npy"), np.concatenate(packed) if packed
                     else np.zeros((0, -(-codec.dim * codec.nbits // 8)), np.uint8))
            write_json(mv_file(index_dir, shard, "done.json"), {"shard": shard, "codec": key,
                                                                  "num_tokens": int(doclens.sum())})
        bar.update(1)
    bar.close()


def _build_ivf(index_dir: Path, meta: IndexMeta, codec: ResidualCodec) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (document, centroid) pairs of every shard, written per shard document-major
    (``shard_XXXXX.doc_centroids.npy`` int32 and ``.doc_centroid_counts.npy``: what centroid interaction scores),
    and the same pairs centroid-major: per centroid, the global rows of its documents (ascending)."""
    C = codec.num_centroids
    cents, rows = [], []
    for shard in range(meta.num_shards):
        _, doclens = shard_tokens(index_dir, shard)
        local = np.repeat(np.arange(len(doclens), dtype=np.int64), doclens)
        keys = np.unique(local * C + np.load(mv_file(index_dir, shard, "codes.npy")))
        counts = np.bincount(keys // C, minlength=len(doclens))
        save_npy(mv_file(index_dir, shard, "doc_centroids.npy"), (keys % C).astype(np.int32))
        save_npy(mv_file(index_dir, shard, "doc_centroid_counts.npy"), counts.astype(np.int64))
        cents.append((keys % C).astype(np.int32))
        rows.append(keys // C + shard * meta.shard_size)
    cent = np.concatenate(cents) if cents else np.zeros(0, np.int32)
    order = np.argsort(cent, kind="stable")  # rows ascend within each shard and shards in order: stays sorted
    offsets = np.zeros(C + 1, dtype=np.int64)
    np.cumsum(np.bincount(cent, minlength=C), out=offsets[1:])
    return (np.concatenate(rows)[order] if rows else np.zeros(0, np.int64)), offsets


def build_multi_vector_index(index_dir: str | os.PathLike, meta: IndexMeta,
                             options: MultiVectorOptions | None = None) -> IndexMeta:
    """Codec, compressed shards and inverted file of a finished token-vector index folder (the module doc's
    steps), recorded in ``index.json``; returns the updated manifest."""
    opts = options or MultiVectorOptions()
    index_dir = Path(index_dir)
    counts = []
    for shard in range(meta.num_shards):
        for kind in TOKEN_FILES:
            if not shard_file(index_dir, shard, kind).is_file():
                raise UsageError(f"{shard_file(index_dir, shard, kind)}: missing; {index_dir} was not encoded by a "
                                 "multi-vector model (rebuild it with --overwrite)")
        counts.append(int(shard_tokens(index_dir, shard)[1].sum()))
    if sum(counts) == 0:
        raise UsageError(f"{index_dir}: the documents hold no token vectors (all empty?)")
    (index_dir / MV_DIR).mkdir(exist_ok=True)
    codec = _train_codec(index_dir, meta, counts, opts)
    key = _codec_key(ResidualCodec.saved(index_dir / MV_DIR) or {})
    _compress_shards(index_dir, meta, codec, key, opts.show_progress)
    ivf_done = index_dir / MV_DIR / "ivf.done.json"
    try:
        fresh = json.loads(ivf_done.read_text()).get("codec") == key and \
            json.loads(ivf_done.read_text()).get("format") == IVF_FORMAT
    except (OSError, ValueError):
        fresh = False
    if not fresh:
        ivf_done.unlink(missing_ok=True)
        rows, offsets = _build_ivf(index_dir, meta, codec)
        save_npy(index_dir / MV_DIR / IVF_FILE, rows)
        save_npy(index_dir / MV_DIR / IVF_OFFSETS_FILE, offsets)
        write_json(ivf_done, {"codec": key, "entries": int(len(rows)), "format": IVF_FORMAT})
    total = sum(counts)
    meta.multi_vector = {"dir": MV_DIR, "codec": key, "nbits": codec.nbits, "num_centroids": codec.num_centroids,
                         "dim": codec.dim, "num_tokens": total, "tokens_per_doc": round(total / meta.num_docs, 2),
                         "bytes_per_token": token_bytes(codec.dim, codec.nbits)}
    meta.save(index_dir)
    if opts.show_progress:
        print(f"multi-vector index: {total:,} tokens ({total / meta.num_docs:.1f} per document), "
              f"{codec.num_centroids:,} centroids, {token_bytes(codec.dim, codec.nbits):g} bytes per token",
              file=sys.stderr)
    return meta
