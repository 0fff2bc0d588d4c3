"""What a training run is made of, written as ``OUTPUT/train_manifest.json`` so that ``--resume`` can tell
it continues the same run.

``run_manifest(recipe, model_path, launch)`` is a JSON object of four parts:

* ``recipe``: the resolved recipe (``dataclasses.asdict``);
* ``inputs``: every file the run reads, by recipe key: ``data.train`` (each source as written; a folder's
  ``*.jsonl`` / ``*.jsonl.gz`` by name), ``eval.queries`` / ``eval.corpus`` / ``eval.qrels`` when set, and
  ``model.name`` (every file of the base model's folder by relative path). Files and folders are
  fingerprinted by :func:`hopscotch.retriever.io.fingerprint.file_fingerprint` and
  :func:`~hopscotch.retriever.io.fingerprint.folder_fingerprint` (a small file by its whole content, a big
  one sampled), as the index, synth and demo manifests are; a Hub dataset id is ``{"hub": id}``;
* ``code``: the versions of Hopscotch, Python and the libraries the numbers depend on;
* ``launch``: processes, device type and whether DeepSpeed runs (the batch plan and RNG states depend on them).

:func:`hopscotch.retriever.io.fingerprint.manifest_differences` lists what differs between two manifests, one
dotted field each (``recipe.train.lr``, ``inputs[data.train][t.jsonl].sha256``). A missing input is a
:class:`UsageError` naming its recipe key, raised before any model loads.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import re
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.io.fingerprint import file_fingerprint, folder_fingerprint

FORMAT = 1
_TUPLE_SUFFIXES = (".jsonl", ".jsonl.gz")
_LIBRARIES = ("torch", "transformers", "accelerate", "sentence-transformers", "numpy")


def _train_sources(train: str | list[str]) -> dict[str, dict]:
    """``data.train``'s sources as the tuple reader resolves them: a file, a folder's tuple files, a Hub id."""
    out: dict[str, dict] = {}
    for source in [train] if isinstance(train, str) else train:
        path = Path(source)
        if path.is_dir():
            files = sorted(p for p in path.iterdir() if p.name.endswith(_TUPLE_SUFFIXES) and p.is_file())
            if not files:
                raise UsageError(f"data.train: {source} is a folder without *.jsonl files")
            out[source] = {p.name: file_fingerprint(p) for p in files}
        elif path.is_file():
            out[source] = file_fingerprint(path)
        elif re.fullmatch(r"[\w.-]+/[\w.-]+(:\w+)?", source):
            out[source] = {"hub": source}
        else:
            raise UsageError(f"data.train: {source}: no such file or folder")
    return out


def _input(key: str, value: str) -> dict:
    path = Path(value)
    if path.is_dir():
        return folder_fingerprint(path)
    if path.is_file():
        return file_fingerprint(path)
    raise UsageError(f"recipe key {key}: {value}: no such file or folder")


def code_versions(deepspeed: bool = False, lora: bool = False) -> dict[str, str]:
    """Hopscotch's version, Python's (major.minor) and the installed versions of the libraries a run uses."""
    names = ("hopscotch", *_LIBRARIES, *(("peft",) if lora else ()), *(("deepspeed",) if deepspeed else ()))
    out = {"python": ".".join(platform.python_version_tuple()[:2])}
    for name in names:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    return out


def run_manifest(recipe, model_path: str | os.PathLike, launch: dict) -> dict:
    """The manifest of a run of ``recipe`` from the base model at ``model_path`` (resolved) under ``launch``
    (``{"processes", "device", "deepspeed"}``)."""
    inputs = {"data.train": _train_sources(recipe.data.train)}
    for name in ("queries", "corpus", "qrels"):
        if value := getattr(recipe.eval, name):
            inputs[f"eval.{name}"] = _input(f"eval.{name}", value)
    inputs["model.name"] = folder_fingerprint(Path(model_path))
    return {"format": FORMAT, "recipe": dataclasses.asdict(recipe), "inputs": inputs,
            "code": code_versions(bool(launch.get("deepspeed")), recipe.model.lora.enabled), "launch": dict(launch)}
