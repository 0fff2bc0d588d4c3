"""Matryoshka dimensions: nested prefixes of a single-vector embedding that each work as an embedding alone.

A model trained with ``loss.matryoshka_dims: [384, 256, 128, 64]`` (and ``loss.matryoshka_weights``, one
weight > 0 a prefix; default all 1) is trained on the sum over the prefixes of ``weight * InfoNCE(first d
dimensions)`` (:class:`~hopscotch.retriever.training.loss.InfoNCELoss`), each prefix L2-normalised again when
the model normalises; its ``hopscotch_config.json`` records the dims (and weights) it was trained with
(:class:`~hopscotch.retriever.model.config.EncoderConfig`, ``ModelSettings.matryoshka_dims``). ``hopscotch index
--dim D`` and ``hopscotch search --dim D`` keep the first ``D`` dimensions of every vector, renormalised
(:class:`~hopscotch.retriever.model.dense_encoder.DenseEncoder`'s ``truncate_dim``).

This module owns the rules: :func:`check_matryoshka` (the recipe keys), :func:`check_dims_fit` (no prefix wider
than the model), :func:`truncate` (cut, then renormalise), :func:`truncation` (a ``--dim`` against the model's
width) and :func:`warn_untrained` (a ``--dim`` the model was not trained for: one line on stderr).

>>> check_matryoshka([384, 128], None)                 # weights default to 1
([384, 128], None)
>>> import torch
>>> prefix = truncate(torch.randn(2, 384), 128, normalize=True)   # the first 128 dimensions, unit length
>>> prefix.shape, [round(float(n), 4) for n in prefix.norm(dim=-1)]
(torch.Size([2, 128]), [1.0, 1.0])
"""

from __future__ import annotations

import itertools
import math
import sys

from hopscotch.retriever.errors import UsageError

DIMS_KEY, WEIGHTS_KEY = "loss.matryoshka_dims", "loss.matryoshka_weights"


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_matryoshka(dims, weights) -> tuple[list[int] | None, list[float] | None]:
    """``(dims, weights)`` checked: dims null or a non-empty list of whole numbers >= 1 in strictly descending
    order; weights null (all 1) or one number > 0 per dim. A UsageError names the key otherwise."""
    if dims is None:
        if weights is not None:
            raise UsageError(f"recipe key {WEIGHTS_KEY} needs {DIMS_KEY} (the prefixes they weigh), got {weights!r}")
        return None, None
    if not isinstance(dims, (list, tuple)) or not dims or not all(_whole(d) and d >= 1 for d in dims):
        raise UsageError(f"recipe key {DIMS_KEY}: expected a non-empty list of whole numbers >= 1 "
                         f"(e.g. [384, 256, 128, 64]) or null, got {dims!r}")
    if any(a <= b for a, b in itertools.pairwise(dims)):
        raise UsageError(f"recipe key {DIMS_KEY}: expected distinct dimensions in descending order "
                         f"(e.g. [384, 256, 128, 64]), got {list(dims)}")
    if weights is None:
        return list(dims), None
    if not isinstance(weights, (list, tuple)) or len(weights) != len(dims):
        raise UsageError(f"recipe key {WEIGHTS_KEY}: expected one weight per {DIMS_KEY} entry ({len(dims)}), "
                         f"got {weights!r}")
    if not all(isinstance(w, (int, float)) and not isinstance(w, bool) and math.isfinite(w) and w > 0
               for w in weights):
        raise UsageError(f"recipe key {WEIGHTS_KEY}: expected numbers > 0, got {list(weights)}")
    return list(dims), [float(w) for w in weights]


def check_dims_fit(dims, model_dim: int, model: str = "the model") -> None:
    """Refuse a prefix wider than the model's embedding (``model_dim``), naming the recipe key."""
    wide = [d for d in dims or () if d > model_dim]
    if wide:
        raise UsageError(f"recipe key {DIMS_KEY}: each dimension must be <= {model_dim} (the embedding size of "
                         f"{model}), got {list(dims)}")


def prefixes(dims, weights) -> tuple[tuple[int, float], ...]:
    """``((dim, weight), ...)`` of checked keys; ``()`` when off."""
    if not dims:
        return ()
    return tuple(zip(dims, weights or [1.0] * len(dims)))


def truncate(emb, dim: int | None, normalize: bool = True):
    """The first ``dim`` dimensions of each row of a torch tensor (all when None), L2-normalised again when
    ``normalize``: the one rule for training prefixes, indexed documents and searched queries."""
    import torch

    if dim is not None:
        emb = emb[..., :dim]
    return torch.nn.functional.normalize(emb, dim=-1) if normalize else emb


def truncation(dim: int | None, model_dim: int, model: str = "the model", what: str = "--dim") -> int | None:
    """What a ``--dim`` asks for: None (keep every dimension: none given, or the model's own width) or ``dim``;
    wider than the model is a UsageError."""
    if dim is None or dim == model_dim:
        return None
    if not _whole(dim) or dim < 1:
        raise UsageError(f"{what}: expected a whole number >= 1, got {dim!r}")
    if dim > model_dim:
        raise UsageError(f"{what} {dim}: {model} encodes {model_dim}-d vectors; D must be <= {model_dim}")
    return dim


def warn_untrained(dim: int | None, trained, model: str = "the model", what: str = "--dim") -> None:
    """One stderr line when ``dim`` (a truncation) is not among the prefixes the model was trained on."""
    if dim is None or dim in (trained or ()):
        return
    was = f"trained on the prefixes {list(trained)}" if trained else "not trained with Matryoshka prefixes"
    print(f"warning: {what} {dim}: {model} was {was}; its first {dim} dimensions may retrieve worse than "
          "a trained prefix", file=sys.stderr)
