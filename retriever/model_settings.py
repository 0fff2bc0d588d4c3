"""What a model folder says about how to encode for it (read from a Hopscotch training output).

A folder saved by :func:`retriever.model_io.save_model` carries ``hopscotch_config.json``: the passage
prefix and length, the query instruction and length, whether queries are reasoning-aware, and a separate
``query_encoder/`` tower when the towers were not shared. A plain sentence-transformers folder (the
bundled ``minilm``) has none of these and gets the defaults.

Example::

    s = model_settings("runs/agentir/final")
    s.passage_prefix, s.instruction, s.query_max_len, s.query_tower
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from retriever.encoder import resolve_model_path


@dataclass
class ModelSettings:
    path: str
    passage_prefix: str = ""
    passage_max_len: int | None = None
    instruction: str = ""
    query_max_len: int | None = None
    reasoning_aware: bool = False
    query_tower: str | None = None   # folder of a separate query encoder
    trained: bool = False            # the folder came from Hopscotch training


def model_settings(model: str | os.PathLike) -> ModelSettings:
    from retriever.model_io import HOPSCOTCH_CONFIG, read_saved_config

    path = resolve_model_path(model)
    if not (Path(path) / HOPSCOTCH_CONFIG).is_file():
        return ModelSettings(path)
    c = read_saved_config(path)
    tower = Path(path) / "query_encoder"
    return ModelSettings(path, passage_prefix=c.passage_prefix, passage_max_len=c.passage_max_len,
                         instruction=c.instruction, query_max_len=c.query_max_len,
                         reasoning_aware=c.reasoning_aware,
                         query_tower=str(tower) if not c.shared_towers and tower.is_dir() else None, trained=True)
