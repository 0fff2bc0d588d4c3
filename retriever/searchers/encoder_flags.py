"""The flags of the backends that encode queries with a model over a ``--index`` folder (``dense`` and
``multi_vector``; ``hybrid`` through them), declared here once so that both declare them identically
(:func:`~hopscotch.retriever.searchers.base.add_option` refuses a flag declared twice with other settings)."""

from __future__ import annotations

from hopscotch.retriever.model.query_input import ALLOWED
from hopscotch.retriever.model.query_mix import LATE_FUSION_FLAG, QUERY_MIX_FLAG
from hopscotch.retriever.searchers.arg_types import positive_int
from hopscotch.retriever.searchers.base import add_index_option, add_option


def add_encoder_options(parser) -> None:
    """``--index``, ``--model``, ``--query-input``, ``--query-mix`` (``--late-fusion``: a deprecated alias),
    ``--nprobe``."""
    add_index_option(parser)
    add_option(parser, "--model", help="query encoder (default: the model recorded in --index)")
    add_option(parser, "--query-input", metavar="VARIANT",
               help=f"what reasoning-aware queries show the encoder: {ALLOWED} (default: the trained model's "
                    "own variant, else reasoning); implies --reasoning unless 'query'")
    add_option(parser, QUERY_MIX_FLAG, type=float, metavar="W", dest="late_fusion", aliases=(LATE_FUSION_FLAG,),
               help="the query mix: score reasoning-aware queries by W * reasoning-aware + (1 - W) * query-only "
                    "similarity (0..1; one search with the weighted query vector; default: the trained model's "
                    "recorded weight when --query-input is not given either, else off)")
    add_option(parser, "--nprobe", type=positive_int,
               help="IVF lists probed per query (a multi-vector index: centroids per query token, default 4)")
