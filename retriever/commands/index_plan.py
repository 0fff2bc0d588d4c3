"""``hopscotch index --plan``: the memory, disk and time a build and a search need, printed before anything runs
(single-vector FAISS indexes: :mod:`hopscotch.retriever.index.plan`; multi-vector token indexes:
:mod:`hopscotch.retriever.index.multi_vector.plan`); and :data:`INDEX_FLAGS`, the one table of the ``index`` flags
that apply to one kind of model only or to ``--plan`` only, which :func:`check_index_flags` applies to a build and
to a plan alike (a flag given where it does nothing is refused, naming it).
"""

from __future__ import annotations

from dataclasses import dataclass

from hopscotch.retriever.commands.flag_types import configured_dim
from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.index.bm25.plan import bm25_plan_summary
from hopscotch.retriever.index.faiss_spec import auto_layout, auto_spec, is_auto
from hopscotch.retriever.index.multi_vector.plan import MultiVectorPlanOptions, plan_multi_vector, tokens_per_document
from hopscotch.retriever.index.plan import PlanOptions, plan_index
from hopscotch.retriever.index.windows import windows_per_document
from hopscotch.retriever.io.corpus import count_documents
from hopscotch.retriever.model.config import model_settings, refuse_multi_vector
from hopscotch.retriever.model.loading import load_sentence_transformer, resolve_model_path
from hopscotch.retriever.model.matryoshka import truncation, warn_untrained
from hopscotch.retriever.searchers.multi_vector_index import is_multi_vector_index

MULTI, SINGLE = "multi-vector", "single-vector"
_WINDOWS = "drop it (a multi-vector index holds documents' first tokens; rerank with --rerank-windows instead)"
_FAISS = "drop it (it is for the FAISS index of single vectors)"


@dataclass(frozen=True)
class IndexFlag:
    """One row of :data:`INDEX_FLAGS`. ``option`` applies to ``kind`` models only (None: to both kinds), and to
    ``--plan`` only when ``plan_only``; the parser's default is None (False for a switch), so a flag counts as given
    whatever its value, and :func:`check_index_flags` fills in ``default`` once it is checked; ``hint`` ends the
    refusal of the flag given with the other kind; ``bare_plan_any_kind``: a ``--plan`` without ``--model`` takes
    it for either kind (``--dim``: the width planned for)."""

    option: str
    kind: str | None
    default: object = None
    plan_only: bool = False
    hint: str = "drop it"
    bare_plan_any_kind: bool = False

    @property
    def dest(self) -> str:
        return self.option[2:].replace("-", "_")


#: the ``hopscotch index`` flags that do something for one kind of model only, or in ``--plan`` only
INDEX_FLAGS = (
    IndexFlag("--nbits", MULTI, 2),
    IndexFlag("--mv-centroids", MULTI),
    IndexFlag("--tokens-per-doc", MULTI, plan_only=True),
    IndexFlag("--ram-gib", MULTI, 64.0, plan_only=True),
    IndexFlag("--multi-vector", MULTI, False, plan_only=True),
    IndexFlag("--spec", SINGLE, "Flat", hint=_FAISS),
    IndexFlag("--layout", SINGLE, "auto", hint=_FAISS),
    IndexFlag("--train-size", SINGLE, hint=_FAISS),
    IndexFlag("--gpu-index", SINGLE, "auto", hint=_FAISS),
    IndexFlag("--dim", SINGLE, bare_plan_any_kind=True,
              hint="drop it (a multi-vector model's token vectors have no Matryoshka prefixes; its width is the "
                   "recipe's model.dim)"),
    IndexFlag("--max-length", SINGLE, hint="drop it (a multi-vector model cuts documents at its own passage_max_len)"),
    IndexFlag("--windows", SINGLE, hint=_WINDOWS),
    IndexFlag("--window-stride", SINGLE, hint=_WINDOWS),
    IndexFlag("--windows-per-doc", SINGLE, plan_only=True, hint=_WINDOWS),
    IndexFlag("--docs", None, plan_only=True),
    IndexFlag("--avg-doc-bytes", None, 0, plan_only=True),
    IndexFlag("--docs-per-second", None, plan_only=True),
    IndexFlag("--gpus", None, 1, plan_only=True),
)


def _given(value) -> bool:
    return value is not None and value is not False


def check_index_flags(args) -> None:
    """Refuse a flag of :data:`INDEX_FLAGS` given where it does nothing (with the other kind of model than the one
    it applies to, or a plan-only one in a build: one line naming it), then fill in the defaults of those not
    given. The kind is the ``--model``'s (a build; a plan), ``--multi-vector``'s (a plan without ``--model``), or
    single-vector (``--import-tevatron``'s pickles; a plan without either); an export of an existing index has
    the ``--out`` index's."""
    given = [f for f in INDEX_FLAGS if _given(getattr(args, f.dest, None))]
    kind_flags = [f for f in given if f.kind and not (f.bare_plan_any_kind and args.plan and not args.model)]
    if kind_flags:
        kind, subject = _kind(args)
        for f in kind_flags:
            if kind is not None and f.kind != kind:
                raise UsageError(f"{f.option} applies to {f.kind} models only; {subject}: {f.hint}")
    if not args.plan:
        for f in given:
            if f.plan_only:
                raise UsageError(f"{f.option} applies to --plan only (a build does not read it): drop it, or add "
                                 "--plan to print the plan")
    for f in INDEX_FLAGS:
        if getattr(args, f.dest, None) is None:
            setattr(args, f.dest, f.default)


def _kind(args) -> tuple[str | None, str]:
    """The kind of index ``args`` builds or plans, and how to say why (None: no model, nothing to check)."""
    if getattr(args, "import_tevatron", None) and not args.plan:
        return SINGLE, "--import-tevatron builds a single-vector index from the pickles"
    if args.model:
        kind = MULTI if _is_multi_vector(args.model) else SINGLE
        return kind, f"{args.model} is a {kind} model"
    if args.plan:
        return (MULTI, "--multi-vector plans a multi-vector index") if args.multi_vector else \
            (SINGLE, "this --plan is of a single-vector index (add --multi-vector, or give a multi-vector --model, "
                     "to plan a token index)")
    return None, ""


def check_export_kind(args) -> None:
    """``--export-tevatron`` writes one vector a document (Tevatron's encode pickles): refused in a plan and for a
    multi-vector model or index, whose vectors are per token."""
    if not getattr(args, "export_tevatron", None):
        return
    if args.plan:
        raise UsageError("--export-tevatron writes an index's embeddings; --plan builds nothing: drop one of them")
    subject = (f"{args.model} is a multi-vector model" if args.model and _is_multi_vector(args.model) else
               f"{args.out} is a multi-vector index" if not args.model and args.out and is_multi_vector_index(args.out)
               else None)
    if subject:
        raise UsageError(f"--export-tevatron writes one vector a document (Tevatron's encode pickles); {subject} "
                         "(token vectors): drop it")


def layout_of(args) -> str:
    """``--layout``; auto: shards for Flat, else merged (left ``auto`` for ``--spec auto``: the build decides)."""
    if args.layout != "auto" or is_auto(args.spec):
        return args.layout
    return auto_layout(args.spec)


def run_plan(args) -> int:
    docs, dim = args.docs, args.dim
    if docs is None:
        if not args.corpus:
            raise UsageError("--plan needs --docs N (or --corpus to count)")
        docs = count_documents(args.corpus)
    if dim is None:
        if not args.model:
            raise UsageError("--plan needs --dim D (or --model to read it from)")
        dim = model_dim(args.model)
    if docs <= 0 or dim <= 0:
        raise UsageError("--docs and --dim must be positive")
    if args.multi_vector or _is_multi_vector(args.model):
        return _run_multi_vector_plan(args, docs, dim)
    if args.dim is not None and args.model:  # a build with --dim D: the vectors are D wide (index_dim's rule)
        index_dim(args)
    per_doc = args.windows_per_doc
    if per_doc is None and args.corpus and args.model:
        per_doc, read = windows_per_document(args.corpus, args.model, args.windows, args.window_stride, args.max_length)
        if read:
            print(f"windows: {per_doc:.2f} a document beyond the first, measured on the first {read:,} documents")
    if is_auto(args.spec):
        args.spec, defaults = auto_spec(docs, dim)
        print(f"--spec auto for {docs:,} documents of dim {dim}: {args.spec}"
              + (f", searched with {defaults}" if defaults else ""))
    options = PlanOptions(shard_size=args.shard_size, layout=layout_of(args), train_size=args.train_size,
                          avg_doc_bytes=args.avg_doc_bytes, docs_per_second=args.docs_per_second, gpus=args.gpus,
                          windows_per_doc=per_doc or 0.0)
    print(plan_index(docs, dim, args.spec, options).format())
    print(_bm25_beside(docs, args))
    return 0


def _bm25_beside(docs: int, args) -> str:
    """The BM25 backends at the same size (:func:`~hopscotch.retriever.index.bm25.plan.bm25_plan_summary`)."""
    return bm25_plan_summary(docs, args.avg_doc_bytes or None)


def _is_multi_vector(model) -> bool:
    from hopscotch.retriever.model.multi_vector import is_multi_vector_folder

    return bool(model) and is_multi_vector_folder(resolve_model_path(model))


def _run_multi_vector_plan(args, docs: int, dim: int) -> int:
    per_doc = args.tokens_per_doc
    if per_doc is None and args.corpus and _is_multi_vector(args.model):
        per_doc, read = tokens_per_document(args.corpus, args.model)
        print(f"tokens: {per_doc:.1f} a document, measured on the first {read:,} documents")
    mv = MultiVectorPlanOptions(tokens_per_doc=per_doc or 160.0, nbits=args.nbits, ram_gib=args.ram_gib)
    options = PlanOptions(shard_size=args.shard_size, avg_doc_bytes=args.avg_doc_bytes,
                          docs_per_second=args.docs_per_second, gpus=args.gpus)
    print(plan_multi_vector(docs, dim, mv, options).format())
    print(_bm25_beside(docs, args))
    return 0


def model_dim(model) -> int:
    """The embedding dimension of a query/passage encoder: from its configs, else loaded on the CPU."""
    dim = configured_dim(model)
    if dim is not None:
        return dim

    refuse_multi_vector(resolve_model_path(model))
    m = load_sentence_transformer(model, device="cpu")
    return int((getattr(m, "get_embedding_dimension", None) or m.get_sentence_embedding_dimension)())


def index_dim(args) -> int | None:
    """``--dim D`` of a build: None (whole vectors: none given, or the model's own width) or D, checked against the
    --model's width (refused when wider; a warning on stderr when the model was not trained on the prefix D:
    :mod:`hopscotch.retriever.model.matryoshka`). Imported vectors are not cut; a multi-vector model's tokens neither
    (:data:`INDEX_FLAGS` refuses --dim with one before this runs)."""
    if args.dim is None or not args.model:
        return None
    if getattr(args, "import_tevatron", None):
        raise UsageError("--dim cuts the vectors 'hopscotch index' encodes; --import-tevatron keeps the pickles' own")
    dim = truncation(args.dim, model_dim(args.model), str(args.model))
    warn_untrained(dim, model_settings(args.model).matryoshka_dims, str(args.model))
    return dim
