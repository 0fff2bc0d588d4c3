"""The oracles of DR-Synth (scorers that see the question and its answers), chosen by name (``hopscotch synth --oracle``)."""

from __future__ import annotations

import os

from hopscotch.data_synth.oracles.base import (
    ORACLES,
    Candidate,
    FeatureOracle,
    Oracle,
    OracleInput,
    OracleSpec,
    OracleWeights,
)
from hopscotch.data_synth.oracles.cross_encoder import CrossEncoderOracle
from hopscotch.data_synth.oracles.dense import DenseOracle
from hopscotch.data_synth.oracles.lexical import LexicalOracle
from hopscotch.data_synth.oracles.llm import LLMOracle
from hopscotch.data_synth.oracles.llm_client import ChatClient, Retries
from hopscotch.retriever.errors import UsageError


def build_oracle(spec: OracleSpec, bm25_index=None) -> Oracle:
    """Instantiate the oracle ``spec.name`` (models load here, so call it inside the worker)."""
    if spec.name == "lexical":
        if bm25_index is None:
            raise UsageError("the lexical oracle needs the BM25 index of the corpus")
        return LexicalOracle(bm25_index, spec.weights)
    if spec.name == "dense":
        return DenseOracle(spec.encoder, spec.weights, batch_size=spec.batch_size)
    if spec.name == "cross-encoder":
        if not spec.cross_encoder:
            raise UsageError("--oracle cross-encoder needs --cross-encoder FOLDER")
        return CrossEncoderOracle(spec.cross_encoder, spec.weights, batch_size=spec.batch_size)
    if spec.name == "llm":
        if not spec.llm_base_url or not spec.llm_model:
            raise UsageError("--oracle llm needs --llm-base-url and --llm-model")
        client = ChatClient(spec.llm_base_url, spec.llm_model, api_key=os.environ.get(spec.llm_api_key_env),
                            timeout=spec.llm_timeout, retries=Retries(max_retries=spec.llm_max_retries),
                            cache_dir=spec.llm_cache)
        return LLMOracle(client, window=spec.llm_window, stride=spec.llm_stride)
    raise UsageError(f"unknown oracle {spec.name!r}; choose from {', '.join(ORACLES)}")


__all__ = ["ORACLES", "Candidate", "FeatureOracle", "Oracle", "OracleInput", "OracleSpec", "OracleWeights",
           "build_oracle"]
