"""Every knob of DR-Synth in one dataclass (the ``hopscotch synth`` flags map onto it one to one)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from hopscotch.data_synth.first_stage import CANDIDATE_SOURCES, DEFAULT_CANDIDATES
from hopscotch.data_synth.labels import LabelConfig
from hopscotch.data_synth.oracles.base import ORACLES, OracleSpec, OracleWeights
from hopscotch.data_synth.traces import TRACE_FORMATS

# how a tuple's query is written: reasoning in its own field, or AgentIR's 'Reasoning: ...\n\nQuery: ...' string
QUERY_FORMATS = ("separate", "agentir")
# knobs that change how fast a run is, not what it writes (left out of the resume fingerprint)
RUNTIME_ONLY = ("workers", "show_progress", "fresh", "llm_timeout", "llm_max_retries", "llm_cache", "llm_api_key_env",
                "batch_size")


@dataclass
class SynthConfig:
    """Configuration of :func:`hopscotch.data_synth.pipeline.synthesize`.

    Example::

        SynthConfig(reranker="lexical", depth=50, gold=5, positives=1, negatives=7, seed=13, workers=2)
    """

    reranker: str = "lexical"           # lexical | dense | cross-encoder | llm
    candidates: str = DEFAULT_CANDIDATES  # the first stage that mines them: bm25-reasoning | bm25 | hybrid
    depth: int = 50                     # candidate window length (first-stage top-depth, gold put in)
    gold: int = 5                       # at most this many gold documents put into each window
    positives: int = 1                  # positives per tuple (top of the oracle ranking)
    negatives: int = 7                  # hard negatives per tuple (from the lower part)
    negative_start: int = 10            # 0-based oracle rank where the hard-negative pool starts
    near_duplicate: float = 0.8         # word 3-gram Jaccard that collapses two passages
    seed: int = 13
    workers: int = 1
    trace_format: str = "auto"          # auto | ircot | tongyi | browsecomp | world | generic
    include_failed_calls: bool = False  # keep steps whose tool call failed in the original run
    max_questions: int | None = None    # only the first N questions (in trace order)
    weights: OracleWeights = field(default_factory=OracleWeights)
    encoder: str = "minilm"             # dense oracle encoder (alias or folder)
    cross_encoder: str | None = None    # cross-encoder oracle folder
    llm_base_url: str | None = None
    llm_model: str | None = None
    llm_api_key_env: str = "OPENAI_API_KEY"
    llm_cache: str | None = None        # default: <out>.llm-cache/
    llm_window: int = 20
    llm_stride: int = 10
    llm_timeout: float = 60.0
    llm_max_retries: int = 4
    batch_size: int = 64
    show_progress: bool = True
    fresh: bool = False                 # discard the work files of an earlier, different run
    query_format: str = "separate"      # separate: query and reasoning fields | agentir: one AgentIR query string
    query_instruction: str = ""         # prefix of the agentir query string (Tevatron adds its --query_prefix)

    def __post_init__(self):
        if isinstance(self.weights, dict):
            self.weights = OracleWeights(**self.weights)
        if self.candidates not in CANDIDATE_SOURCES:
            raise ValueError(f"unknown candidate source {self.candidates!r}; choose from {', '.join(CANDIDATE_SOURCES)}")
        if self.reranker not in ORACLES:
            raise ValueError(f"unknown oracle {self.reranker!r}; choose from {', '.join(ORACLES)}")
        if self.trace_format not in TRACE_FORMATS:
            raise ValueError(f"unknown trace format {self.trace_format!r}; choose from {', '.join(TRACE_FORMATS)}")
        if self.depth < 1 or not 0 <= self.gold <= self.depth:
            raise ValueError("need depth >= 1 and 0 <= gold <= depth")
        if self.workers < 1:
            raise ValueError("workers must be at least 1")
        if self.max_questions is not None and self.max_questions < 1:
            raise ValueError("max_questions must be at least 1")
        if self.query_format not in QUERY_FORMATS:
            raise ValueError(f"unknown query format {self.query_format!r}; choose from {', '.join(QUERY_FORMATS)}")
        self.label_config()  # validates positives / negatives / near_duplicate

    def label_config(self) -> LabelConfig:
        return LabelConfig(self.positives, self.negatives, self.negative_start, self.near_duplicate)

    def oracle_spec(self) -> OracleSpec:
        return OracleSpec(self.reranker, self.weights, self.encoder, self.cross_encoder, self.llm_base_url,
                          self.llm_model, self.llm_api_key_env, self.llm_cache, self.llm_window,
                          self.llm_stride, self.llm_timeout, self.llm_max_retries, self.batch_size)

    def fingerprint(self) -> dict:
        """The knobs that decide the output bytes (what a resumed run must share)."""
        d = asdict(self)
        for key in RUNTIME_ONLY:
            d.pop(key, None)
        if self.reranker != "llm":
            for key in [k for k in d if k.startswith("llm_")]:
                d.pop(key)
        if self.reranker != "dense":
            d.pop("encoder")
        if self.reranker != "cross-encoder":
            d.pop("cross_encoder")
        if self.candidates == "bm25":  # the candidates before reasoning-aware ones: earlier runs' fingerprints hold
            d.pop("candidates")
        if self.query_format == "separate":  # the default: fingerprints of earlier runs stay valid
            d.pop("query_format")
            d.pop("query_instruction")
        return d
