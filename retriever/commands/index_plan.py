"""``hopscotch index --plan``: the memory, disk and time a build and a search need, printed before anything runs
(single-vector FAISS indexes: :mod:`hopscotch.retriever.index.plan`; multi-vector token indexes:
:mod:`hopscotch.retriever.index.plan_multi_vector`)."""

from __future__ import annotations


def layout_of(args) -> str:
    """``--layout``; auto: shards for Flat, else merged (left ``auto`` for ``--spec auto``: the build decides)."""
    from hopscotch.retriever.index.faiss_spec import auto_layout, is_auto

    if args.layout != "auto" or is_auto(args.spec):
        return args.layout
    return auto_layout(args.spec)


def run_plan(args) -> int:
    from hopscotch.retriever.errors import UsageError
    from hopscotch.retriever.index.faiss_spec import auto_spec, is_auto
    from hopscotch.retriever.index.plan import PlanOptions, plan_index

    docs, dim = args.docs, args.dim
    if docs is None:
        if not args.corpus:
            raise UsageError("--plan needs --docs N (or --corpus to count)")
        from hopscotch.retriever.io.corpus import count_documents
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
        from hopscotch.retriever.index.windows import windows_per_document
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
    return 0


def _is_multi_vector(model) -> bool:
    from hopscotch.retriever.model.loading import resolve_model_path
    from hopscotch.retriever.model.multi_vector import is_multi_vector_folder

    return bool(model) and is_multi_vector_folder(resolve_model_path(model))


def _run_multi_vector_plan(args, docs: int, dim: int) -> int:
    from hopscotch.retriever.index.plan import PlanOptions
    from hopscotch.retriever.index.plan_multi_vector import (MultiVectorPlanOptions, plan_multi_vector,
                                                             tokens_per_document)

    per_doc = args.tokens_per_doc
    if per_doc is None and args.corpus and _is_multi_vector(args.model):
        per_doc, read = tokens_per_document(args.corpus, args.model)
        print(f"tokens: {per_doc:.1f} a document, measured on the first {read:,} documents")
    mv = MultiVectorPlanOptions(tokens_per_doc=per_doc or 160.0, nbits=args.nbits, ram_gib=args.ram_gib)
    options = PlanOptions(shard_size=args.shard_size, avg_doc_bytes=args.avg_doc_bytes,
                          docs_per_second=args.docs_per_second, gpus=args.gpus)
    print(plan_multi_vector(docs, dim, mv, options).format())
    return 0


def model_dim(model) -> int:
    """The embedding dimension of a query/passage encoder: from its configs, else loaded on the CPU."""
    from hopscotch.retriever.commands.flag_types import configured_dim
    from hopscotch.retriever.model.loading import load_sentence_transformer

    dim = configured_dim(model)
    if dim is not None:
        return dim
    from hopscotch.retriever.model.config import refuse_multi_vector
    from hopscotch.retriever.model.loading import resolve_model_path

    refuse_multi_vector(resolve_model_path(model))
    m = load_sentence_transformer(model, device="cpu")
    return int((getattr(m, "get_embedding_dimension", None) or m.get_sentence_embedding_dimension)())


def index_dim(args) -> int | None:
    """``--dim D`` of a build: None (whole vectors: none given, or the model's own width) or D, checked against the
    --model's width (refused when wider; a warning on stderr when the model was not trained on the prefix D:
    :mod:`hopscotch.retriever.model.matryoshka`). Imported vectors and multi-vector token indexes are not cut."""
    from hopscotch.retriever.errors import UsageError
    from hopscotch.retriever.model.config import model_settings
    from hopscotch.retriever.model.matryoshka import truncation, warn_untrained

    if args.dim is None or not args.model:
        return None
    if getattr(args, "import_tevatron", None):
        raise UsageError("--dim cuts the vectors 'hopscotch index' encodes; --import-tevatron keeps the pickles' own")
    if _is_multi_vector(args.model):
        raise UsageError("--dim: a multi-vector model's token vectors have no Matryoshka prefixes (its width is "
                         "the recipe's model.dim)")
    dim = truncation(args.dim, model_dim(args.model), str(args.model))
    warn_untrained(dim, model_settings(args.model).matryoshka_dims, str(args.model))
    return dim
