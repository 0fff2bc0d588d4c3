"""Multi-vector (ColBERT-style, late-interaction) models, built as a real ``sentence_transformers.MultiVectorEncoder``.

A query or a document becomes one vector per token: the backbone's token embeddings, a bias-free linear
projection to ``dim`` (128 by default, as ColBERT) and L2 normalisation; a query scores a document by MaxSim
(for each query vector the best document vector's inner product, summed). The model is sentence-transformers'
own module stack, so a saved folder loads unchanged with ``MultiVectorEncoder(path)``:

``Transformer`` (``query_length``, ``document_length``, ``query_expansion``) -> ``Dense`` (no bias, identity
activation, on ``token_embeddings``) -> ``MultiVectorMask`` (the skiplist) -> ``Normalize``.

* Markers: ``[Q]`` and ``[D]`` (PyLate's) are registered as special tokens of the tokenizer (the embedding
  table grows when they are new: mean-initialised rows) and put in front of every query and document through
  the model's ``prompts`` (``{"query": "[Q] " + instruction, "document": "[D] "}``), the mechanism
  ``MultiVectorEncoder.encode_query`` / ``encode_document`` apply themselves. Give ``markers=("[unused0]",
  "[unused1]")`` on a BERT backbone to use Stanford ColBERT's (no new rows).
* Query augmentation (ColBERT's): queries shorter than ``query_augmentation`` tokens are padded to that
  length with ``[MASK]`` (the tokenizer's mask token, else its end-of-sequence token), which the encoder does
  not attend to but which are scored (sentence-transformers' ``query_expansion``, strategy ``min``: longer
  queries keep up to ``query_max_len`` tokens). None: no augmentation.
* Skiplist: the vectors of punctuation tokens (``string.punctuation``, each a single vocabulary token) are
  dropped from documents, never from queries (``MultiVectorMask``, ``skiplist_tasks=["document"]``).
* Query text: :func:`~hopscotch.retriever.model.query_template.format_queries`, the one formatter of every
  Hopscotch encoder (query input variants, the reasoning cut from the left), measured with the query prompt
  in front, so ``query_max_len`` is never exceeded and the query itself is never cut.

``hopscotch_config.json`` records ``kind: multi_vector`` with ``dim``, the lengths, markers, instruction,
augmentation, skiplist, ``query_input`` and ``late_fusion`` (:class:`MultiVectorConfig`); the module files
are the source of truth for encoding and the record is read back for the Hopscotch-only settings.

The query mix (:func:`late_fusion_scores`): a reasoning-aware query encoded twice, with its reasoning
(``q_r``) and alone (``q_q``), scores ``w * MaxSim(q_r, d) / |q_r| + (1 - w) * MaxSim(q_q, d) / |q_q|``: each
MaxSim over its number of query vectors, so a long reasoning does not outvote the query by its length.

Example (not run: it builds and saves a model)::

    model = build_multi_vector_model("minilm", dim=128)
    q = model.encode_queries(["who directed Gummo"], ["The film came out in 1997."])   # [Tensor (n, 128)]
    d = model.encode_documents([("Gummo", "Gummo is a 1997 film by Harmony Korine.")])
    maxsim(q[0], d)                                    # tensor([score])
    model.save("out/colbert")                          # MultiVectorEncoder("out/colbert") loads it
"""

from __future__ import annotations

import hashlib
import json
import os
import string
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.io.fingerprint import digest, model_fingerprint
from hopscotch.retriever.model.config import MULTI_VECTOR, checked_count, checked_weight, saved_hopscotch_config
from hopscotch.retriever.model.loading import quiet_loading_bars, resolve_model_path
from hopscotch.retriever.model.query_input import QueryInput
from hopscotch.retriever.model.query_template import format_documents, format_queries, model_variants

PUNCTUATION = list(string.punctuation)
DEFAULT_MARKERS = ("[Q]", "[D]")


@dataclass
class MultiVectorConfig:
    """A multi-vector model's settings, recorded in its ``hopscotch_config.json`` (``kind: multi_vector``)."""

    dim: int = 128                        # projection size of every token vector
    query_max_len: int = 128              # query tokens (prompt and specials included); the reasoning is cut
    passage_max_len: int = 256            # document tokens, cut from the right
    query_marker: str = DEFAULT_MARKERS[0]     # "" for none
    document_marker: str = DEFAULT_MARKERS[1]  # "" for none
    instruction: str = ""                 # after the query marker, before the query text
    query_augmentation: int | None = 32   # pad shorter queries to this many tokens with [MASK]; None: off
    skiplist: list[str] = field(default_factory=lambda: list(PUNCTUATION))  # tokens dropped from documents
    query_input: str = "reasoning"        # the query input variant of reasoning-aware queries
    late_fusion: float | None = None      # default weight w of the reasoning-aware MaxSim (None: off)
    kind: str = MULTI_VECTOR

    def __post_init__(self):
        for name in ("dim", "query_max_len", "passage_max_len"):
            checked_count(getattr(self, name), f"model.{name}")
        checked_count(self.query_augmentation, "model.query_augmentation")
        if self.query_augmentation is not None and self.query_augmentation > self.query_max_len:
            raise UsageError(f"model.query_augmentation={self.query_augmentation} exceeds model.query_max_len="
                             f"{self.query_max_len} (queries are padded to it, and never beyond query_max_len)")
        self.query_input = str(QueryInput.parse(self.query_input, "model.query_input"))
        self.late_fusion = checked_weight(self.late_fusion, "model.late_fusion")
        self.skiplist = list(self.skiplist or [])
        if self.kind != MULTI_VECTOR:
            raise UsageError(f"model.kind: a multi-vector config has kind {MULTI_VECTOR!r}, got {self.kind!r}")

    @property
    def prompts(self) -> dict[str, str]:
        """sentence-transformers' prompts: what goes in front of every query and document text."""
        marker = lambda m: f"{m} " if m else ""  # noqa: E731
        return {"query": marker(self.query_marker) + self.instruction, "document": marker(self.document_marker)}

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, saved: dict) -> MultiVectorConfig:
        known = cls.__dataclass_fields__
        return cls(**{k: v for k, v in saved.items() if k in known})


class MultiVectorModel:
    """A ``sentence_transformers.MultiVectorEncoder`` (:attr:`st`) with Hopscotch's query formatting.

    :param st: the encoder; :param config: its :class:`MultiVectorConfig`; :param path: the folder it was
    loaded from or saved to (its fingerprint names the model in caches), None when only in memory.
    """

    def __init__(self, st, config: MultiVectorConfig, path: str | os.PathLike | None = None):
        self.st, self.config = st, config
        self.path = None if path is None else str(path)
        self._fingerprint = None

    @property
    def tokenizer(self):
        return self.st.tokenizer

    @property
    def dim(self) -> int:
        return int(self.st.get_embedding_dimension())

    @property
    def query_prompt(self) -> str:
        return self.st.prompts.get("query") or ""

    def format_queries(self, queries: Sequence[str], reasonings: Sequence | None = None, query_input=None,
                       reasoning_aware: bool | Sequence[bool] | None = None) -> list[str]:
        """Query texts as :meth:`encode_queries` gives them to ``st.encode_query`` (which adds the query prompt).

        ``query_input``: the variant (None: the model's), or one per query (None entries: the model's; a training
        mixture); ``reasoning_aware``: one flag or one per query (None: whether the variant reads the reasoning).
        The reasoning is cut from the left so that prompt + text fit ``query_max_len`` tokens, specials included.
        """
        variant, aware = model_variants(query_input, self.config.query_input, reasoning_aware)
        prompt = self.query_prompt
        texts = format_queries(self.tokenizer, self.config.query_max_len, queries, reasonings, instruction=prompt,
                               reasoning_aware=aware, query_input=variant)
        return [t[len(prompt):] for t in texts]  # every formatted text starts with its instruction

    def encode_queries(self, queries: Sequence[str], reasonings: Sequence | None = None, query_input=None,
                       reasoning_aware: bool | Sequence[bool] | None = None, batch_size: int = 32
                       ) -> list[torch.Tensor]:
        """One float32 CPU tensor ``(n_tokens, dim)`` per query (marker, text, specials, [MASK] padding)."""
        texts = self.format_queries(queries, reasonings, query_input, reasoning_aware)
        return self._encode(texts, "query", batch_size)

    @staticmethod
    def format_documents(documents: Sequence) -> list[str]:
        """Document texts: strings as given, ``(title, text)`` pairs and records with ``title`` and ``text``
        as ``title + " " + text`` (:func:`~hopscotch.retriever.model.query_template.format_documents`)."""
        return format_documents(documents)

    def encode_documents(self, documents: Sequence, batch_size: int = 32) -> list[torch.Tensor]:
        """One float32 CPU tensor ``(n_tokens, dim)`` per document, punctuation dropped (the skiplist)."""
        return self._encode(self.format_documents(documents), "document", batch_size)

    def _encode(self, texts: list[str], task: str, batch_size: int) -> list[torch.Tensor]:
        if not texts:
            return []
        encode = self.st.encode_query if task == "query" else self.st.encode_document
        return [e.float().cpu() for e in encode(texts, batch_size=batch_size, show_progress_bar=False)]

    def save(self, path: str | os.PathLike) -> str:
        """Write the folder (sentence-transformers' files + ``hopscotch_config.json``) atomically."""
        from hopscotch.retriever.model.saving import save_multi_vector

        self.path = save_multi_vector(self.st, path, self.config.to_json())
        self._fingerprint = None
        return self.path

    @property
    def fingerprint(self) -> str:
        """A sha256 naming what the model computes: its folder's files (sampled hashes of big ones) when it has
        a folder, else its weights and module settings (costly for a big model: save it and load it instead)."""
        if self._fingerprint is None:
            if self.path is not None:
                self._fingerprint = digest({"kind": MULTI_VECTOR, "files": model_fingerprint(self.path)})
            else:
                sha = hashlib.sha256(json.dumps([self.config.to_json(), self.st.prompts, [str(m) for m in self.st]],
                                                sort_keys=True, default=str).encode())
                for name, tensor in self.st.state_dict().items():
                    sha.update(name.encode())
                    sha.update(tensor.detach().float().cpu().contiguous().numpy().tobytes())
                self._fingerprint = sha.hexdigest()
        return self._fingerprint


def _register_markers(transformer, markers: Sequence[str], seed: int) -> None:
    """Make each marker one special token of the tokenizer (new ones get embedding rows)."""
    from transformers import AddedToken

    tokenizer = transformer.tokenizer
    tokenizer.add_tokens([AddedToken(m, special=True, normalized=False) for m in markers if m])
    embeddings = transformer.auto_model.get_input_embeddings()
    if len(tokenizer) > embeddings.num_embeddings:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            transformer.auto_model.resize_token_embeddings(len(tokenizer))


def build_multi_vector_model(backbone: str | os.PathLike = "minilm", dim: int = 128, *, query_max_len: int = 128,
                             passage_max_len: int = 256, markers: tuple[str, str] = DEFAULT_MARKERS,
                             instruction: str = "", query_augmentation: int | None = 32,
                             skiplist: Sequence[str] | None = PUNCTUATION, query_input: str = "reasoning",
                             late_fusion: float | None = None, seed: int = 0, device: str | None = None
                             ) -> MultiVectorModel:
    """A new multi-vector model over ``backbone`` (``minilm``, an HF folder or Hub id, as
    :func:`~hopscotch.retriever.model.loading.resolve_model_path` takes it), the projection initialised
    orthogonal from ``seed`` (so an untrained model's MaxSim approximates the backbone's token cosines)."""
    from sentence_transformers import MultiVectorEncoder
    from sentence_transformers.base.modules import Dense, Normalize, Transformer
    from sentence_transformers.multi_vector_encoder.modules import MultiVectorMask

    config = MultiVectorConfig(dim=dim, query_max_len=query_max_len, passage_max_len=passage_max_len,
                               query_marker=markers[0] or "", document_marker=markers[1] or "",
                               instruction=instruction, query_augmentation=query_augmentation,
                               skiplist=list(skiplist or []), query_input=query_input, late_fusion=late_fusion)
    quiet_loading_bars()
    path = resolve_model_path(backbone)
    local = {"local_files_only": True}
    expansion = (None if query_augmentation is None else
                 {"strategy": "min", "length": query_augmentation, "attend": False})
    transformer = Transformer(path, model_kwargs=dict(local), processor_kwargs=dict(local),
                              config_kwargs=dict(local), query_length=query_max_len, document_length=passage_max_len,
                              query_expansion=expansion, max_seq_length=max(query_max_len, passage_max_len))
    _register_markers(transformer, markers, seed)
    projection = Dense(transformer.get_embedding_dimension(), dim, bias=False,
                       activation_function=torch.nn.Identity(), module_input_name="token_embeddings")
    with torch.no_grad():
        torch.nn.init.orthogonal_(projection.linear.weight, generator=torch.Generator().manual_seed(seed))
    modules = [transformer, projection, MultiVectorMask(skiplist_words=config.skiplist, skiplist_tasks=["document"]),
               Normalize(module_input_name="token_embeddings")]
    st = MultiVectorEncoder(modules=modules, prompts=config.prompts, device=device or _device(),
                            similarity_fn_name="maxsim")
    return MultiVectorModel(st, config)


def _device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def is_multi_vector_folder(path: str | os.PathLike) -> bool:
    """Whether ``path`` holds a multi-vector model: ``kind: multi_vector`` in its ``hopscotch_config.json``, a
    sentence-transformers ``MultiVectorEncoder`` folder (``model_type`` in ``config_sentence_transformers.json``),
    a PyLate folder (``pylate`` modules) or a Stanford-NLP ColBERT checkpoint (``HF_ColBERT``), as
    ``MultiVectorEncoder`` loads them all."""
    path = Path(path)
    if (saved_hopscotch_config(path) or {}).get("kind") == MULTI_VECTOR:
        return True

    def text(name: str) -> str:
        try:
            return (path / name).read_text()
        except OSError:
            return ""

    try:
        if json.loads(text("config_sentence_transformers.json") or "{}").get("model_type") == "MultiVectorEncoder":
            return True
    except (ValueError, AttributeError):
        pass
    return "pylate." in text("modules.json") or "HF_ColBERT" in text("config.json")


def load_multi_vector_model(name: str | os.PathLike, device: str | None = None) -> MultiVectorModel:
    """A saved multi-vector folder (Hopscotch's, or any ``MultiVectorEncoder`` folder: PyLate's, a Hub id in
    the cache) as a :class:`MultiVectorModel`. Encoding follows the folder's modules; ``query_input``,
    ``instruction`` and ``late_fusion`` come from its ``hopscotch_config.json`` (defaults without one)."""
    from sentence_transformers import MultiVectorEncoder

    quiet_loading_bars()
    path = resolve_model_path(name)
    if not is_multi_vector_folder(path):
        raise UsageError(f"model {str(name)!r}: not a multi-vector (MultiVectorEncoder) folder; build one with "
                         "hopscotch.retriever.model.multi_vector.build_multi_vector_model(backbone) and save it")
    st = MultiVectorEncoder(path, device=device or _device(), local_files_only=True)
    return MultiVectorModel(st, config_of(st, saved_hopscotch_config(path) or {}), path)


def config_of(st, saved: dict) -> MultiVectorConfig:
    """The :class:`MultiVectorConfig` of a loaded encoder: what encodes (dim, lengths, augmentation, skiplist)
    read from its modules, the rest from ``saved`` (a ``hopscotch_config.json``)."""
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.multi_vector_encoder.modules import MultiVectorMask

    transformer = next(m for m in st if isinstance(m, Transformer))
    mask = next((m for m in st if isinstance(m, MultiVectorMask)), None)
    longest = transformer.max_seq_length or 512
    expansion = transformer.query_expansion
    query_len = transformer.query_length or (expansion or {}).get("length") or longest
    values = {**saved, "dim": int(st.get_embedding_dimension()), "query_max_len": int(query_len),
              "passage_max_len": int(transformer.document_length or longest),
              "query_augmentation": expansion["length"] if expansion else None,
              "skiplist": list(mask.skiplist_words) if mask is not None else []}
    if "kind" not in saved:  # a plain MultiVectorEncoder folder: its prompts are all the markers it has
        values.update(query_marker=(st.prompts.get("query") or "").strip(), instruction="",
                      document_marker=(st.prompts.get("document") or "").strip())
    return MultiVectorConfig.from_json(values)


def _padded(docs: Sequence[torch.Tensor], dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Documents as one zero-padded ``(n, longest, dim)`` float32 tensor and its ``(n, longest)`` mask."""
    longest = max((d.shape[0] for d in docs), default=0)
    out = torch.zeros(len(docs), max(longest, 1), dim)
    mask = torch.zeros(len(docs), max(longest, 1), dtype=torch.bool)
    for i, d in enumerate(docs):
        out[i, :d.shape[0]] = d.float()
        mask[i, :d.shape[0]] = True
    return out, mask


def maxsim(query: torch.Tensor, docs: Sequence[torch.Tensor], normalize: bool = False) -> torch.Tensor:
    """MaxSim of one query ``(n_q, dim)`` against each document ``(n_i, dim)``: ``sum_q max_i <q, d_i>``, a
    float32 tensor ``(len(docs),)``; with ``normalize`` divided by ``n_q`` (MeanMaxSim). Equals
    ``sentence_transformers.util.similarity.maxsim([query], docs)[0]`` (``mean_maxsim`` with ``normalize``)."""
    if not len(docs):
        return torch.zeros(0)
    query = query.float()
    padded, mask = _padded(docs, query.shape[1])
    sims = torch.einsum("qd,nld->nql", query, padded).masked_fill(~mask[:, None, :], float("-inf"))
    best = sims.max(dim=2).values
    best = torch.where(torch.isinf(best), torch.zeros_like(best), best)  # an empty document scores 0
    scores = best.sum(dim=1)
    return scores / max(query.shape[0], 1) if normalize else scores


def late_fusion_scores(q_reasoning: torch.Tensor, q_query: torch.Tensor, docs: Sequence[torch.Tensor],
                       w: float = 0.5) -> torch.Tensor:
    """``w * MaxSim(q_reasoning, d) / |q_reasoning| + (1 - w) * MaxSim(q_query, d) / |q_query|`` per document:
    the reasoning-aware and the query-only encodings of one query, each MaxSim normalised by its number of
    query vectors (so a long reasoning does not outvote the query); ``w`` in [0, 1]."""
    w = checked_weight(w, "query mix weight")
    out = torch.zeros(len(docs))
    if w > 0:
        out += w * maxsim(q_reasoning, docs, normalize=True)
    if w < 1:
        out += (1 - w) * maxsim(q_query, docs, normalize=True)
    return out
