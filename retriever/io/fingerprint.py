"""Content fingerprints of input files, folders and models, and the differences between two manifests.

Every resumable or reusable output (a training run, a sharded index, a synth run, the demo's stages) records
a manifest of what determined it, built from these pieces, and refuses to continue on any difference:

* :func:`file_fingerprint`: a file up to :data:`FULL_HASH_BYTES` is ``{"size", "sha256"}`` (its whole
  content); a bigger one is ``{"size", "mtime_ns", "sha256_sampled"}`` (:data:`SAMPLES` blocks of
  :data:`BLOCK` bytes spread over the file, the mtime catching edits between them), so a 10 GB corpus or
  an 8 GB model costs milliseconds;
* :func:`folder_fingerprint`: every regular file of a folder (hidden entries skipped) by relative path;
* :func:`model_fingerprint`: the files of a model folder that decide what it computes (weights, configs,
  tokenizer), model cards left out; :func:`digest` turns any of these into one sha256 to record;
* :func:`manifest_differences`: one line per dotted field that differs (``corpus_files[/c.jsonl].sha256:
  1a2b3c4d5e6f... in the run, 9f8e7d6c5b4a... now``);
* :func:`input_change`: the same difference said for a person: which file, and whether its size, its mtime
  or its content changed (``--traces t.jsonl: content changed (same size, 12,345 bytes)``).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

FULL_HASH_BYTES = 64 << 20   # files up to this size are hashed whole
BLOCK = 1 << 20              # bytes per sampled block of a bigger file
SAMPLES = 16                 # sampled blocks, the first at offset 0 and the last ending at the file's end
_MODEL_SKIPPED_SUFFIXES = (".md", "golden_vectors.json")  # model cards, golden probe vectors: change no number


def file_fingerprint(path: str | os.PathLike, *, full_hash_bytes: int | None = None, block: int | None = None,
                     samples: int | None = None) -> dict:
    """``{"size", "sha256"}`` of a file up to ``full_hash_bytes`` (default :data:`FULL_HASH_BYTES`);
    ``{"size", "mtime_ns", "sha256_sampled"}`` of a bigger one (``samples`` blocks of ``block`` bytes)."""
    full_hash_bytes = FULL_HASH_BYTES if full_hash_bytes is None else full_hash_bytes
    block = BLOCK if block is None else block
    samples = SAMPLES if samples is None else samples
    stat = os.stat(path)
    sha = hashlib.sha256()
    with open(path, "rb") as f:
        if stat.st_size <= full_hash_bytes:
            for chunk in iter(lambda: f.read(block), b""):
                sha.update(chunk)
            return {"size": stat.st_size, "sha256": sha.hexdigest()}
        sha.update(str(stat.st_size).encode())
        last = stat.st_size - block
        for i in range(samples):
            f.seek(last * i // (samples - 1))
            sha.update(f.read(block))
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256_sampled": sha.hexdigest()}


def folder_fingerprint(folder: str | os.PathLike, skip_suffixes: tuple[str, ...] = ()) -> dict[str, dict]:
    """:func:`file_fingerprint` of every regular file under ``folder`` (links followed, hidden entries and
    names ending in ``skip_suffixes`` skipped), by POSIX relative path, sorted."""
    folder = Path(folder)
    out = {}
    for root, dirs, files in os.walk(folder, followlinks=True):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if not name.startswith(".") and not name.endswith(skip_suffixes):
                path = Path(root) / name
                out[path.relative_to(folder).as_posix()] = file_fingerprint(path)
    return out


def path_fingerprint(path: str | os.PathLike) -> dict:
    """A file's :func:`file_fingerprint` or a folder's :func:`folder_fingerprint`; FileNotFoundError otherwise."""
    if Path(path).is_dir():
        return folder_fingerprint(path)
    if Path(path).is_file():
        return file_fingerprint(path)
    raise FileNotFoundError(path)


def model_fingerprint(model_dir: str | os.PathLike) -> dict[str, dict]:
    """The files of a resolved model folder that decide its outputs (weights ``model.safetensors`` /
    ``pytorch_model.bin``, configs, tokenizer, pooling, a query tower), by relative path; model cards
    (``*.md``) and golden probe vectors (``golden_vectors.json``) are left out. Big weight files are sampled
    (see :func:`file_fingerprint`)."""
    return folder_fingerprint(model_dir, skip_suffixes=_MODEL_SKIPPED_SUFFIXES)


def digest(obj) -> str:
    """The sha256 of ``obj``'s canonical JSON (sorted keys, no spaces): one string to record or compare."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def flatten(obj, prefix: str = "") -> dict[str, object]:
    """``{"a": {"b": 1}, "x": [2]}`` -> ``{"a.b": 1, "x": [2]}``; keys that hold a dot or a slash in brackets."""
    if not isinstance(obj, dict) or not obj:
        return {prefix: obj}
    out: dict[str, object] = {}
    for key, value in obj.items():
        part = f"[{key}]" if ("." in str(key) or "/" in str(key)) else (f".{key}" if prefix else str(key))
        out.update(flatten(value, prefix + part))
    return out


def shown(value) -> str:
    """A value as a difference line shows it: a sha256 cut to 12 digits, anything else ``repr`` up to 60."""
    if isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value):
        return value[:12] + "..."
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def manifest_differences(old: dict, new: dict, defaults: dict | None = None, first: str = "recipe.",
                         then: str = "in the run") -> list[str]:
    """``["recipe.train.lr: 0.001 in the run, 0.002 now", ...]``: every field whose value differs, fields
    starting with ``first`` listed first, except a field the old manifest lacks whose new value is its value
    in ``defaults`` (a key added to the code since the old manifest was written, at its default)."""
    a, b = flatten(old), flatten(new)
    absent = object()
    base = flatten(defaults or {})
    a |= {k: b[k] for k in b if k not in a and k in base and base[k] == b[k]}

    def show(value):
        return "absent" if value is absent else shown(value)

    keys = sorted(set(a) | set(b), key=lambda k: (not k.startswith(first), k))
    return [f"{k}: {show(a.get(k, absent))} {then}, {show(b.get(k, absent))} now"
            for k in keys if a.get(k, absent) != b.get(k, absent)]


def file_change(old, new) -> str | None:
    """What differs between two :func:`file_fingerprint` dicts, in words; None when they are equal."""
    if old == new:
        return None
    if not isinstance(old, dict) or not isinstance(new, dict):
        return "added" if old is None else "removed" if new is None else "changed"
    if old.get("size") != new.get("size"):
        return f"size changed ({old.get('size')} -> {new.get('size')} bytes)"
    size = f"same size, {new.get('size'):,} bytes" if isinstance(new.get("size"), int) else "same size"
    hashes = ("sha256", "sha256_sampled")
    if any(old.get(h) != new.get(h) for h in hashes):
        sampled = "sampled " if "sha256_sampled" in new else ""
        return f"{sampled}content changed ({size})"
    if old.get("mtime_ns") != new.get("mtime_ns"):
        return f"mtime changed ({size}, sampled content equal: a big file is trusted by its mtime)"
    return "changed"


def input_change(label: str, old, new) -> str | None:
    """One input's change in words, or None: ``old`` / ``new`` are ``{"path", "content"}`` records (a file's
    or a folder's fingerprint; ``"files"`` for a model folder) or None (not given).
    ``--traces t.jsonl: content changed (same size, 12,345 bytes)``, ``--bm25-index idx: data.npz size
    changed (10 -> 12 bytes)``, ``--bm25-index: another path (a then, b now)``."""
    if old == new:
        return None
    if not isinstance(old, dict) or not isinstance(new, dict):
        return f"{label}: {'not given then, given now' if not isinstance(old, dict) else 'given then, not now'}"
    if old.get("path") != new.get("path"):
        return f"{label}: another path ({old.get('path')} then, {new.get('path')} now)"
    key = "content" if "content" in new else "files"
    a, b = old.get(key), new.get(key)
    where = f"{label} {new.get('path')}"
    if isinstance(b, dict) and "size" in b or isinstance(a, dict) and "size" in a:  # one file
        return f"{where}: {file_change(a, b)}"
    a, b = a if isinstance(a, dict) else {}, b if isinstance(b, dict) else {}
    changed = [f"{name} {file_change(a.get(name), b.get(name))}" for name in sorted(set(a) | set(b))
               if a.get(name) != b.get(name)]
    more = f"; and {len(changed) - 3} more files" if len(changed) > 3 else ""
    return f"{where}: {'; '.join(changed[:3])}{more}" if changed else f"{where}: changed"
