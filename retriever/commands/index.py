"""``hopscotch index``: encode a corpus into resumable shards and build a FAISS index over them.

    hopscotch index --corpus PATH --model M --out DIR [--batch-size B] [--max-length L]
                    [--shard-size N] [--spec SPEC] [--layout auto|shards|merged]
    hopscotch index --plan --docs 553000000 --dim 384 --spec OPQ64,IVF262144,PQ64

Run it under ``torchrun --nproc_per_node G -m hopscotch.retriever.cli index ...`` (or ``accelerate launch``) to split
the shards across processes/GPUs; rerun the same command after a crash to resume.
"""

from __future__ import annotations

import sys
import time


def register(sub) -> None:
    p = sub.add_parser("index", help="encode a corpus into shards and build a FAISS index",
                       description="Encode a corpus into resumable float16 shards (multi-process under torchrun) "
                                   "and build a FAISS index over them; --plan prints the memory and disk a build "
                                   "and a search need.")
    p.add_argument("--corpus", help="corpus JSONL/parquet file, BEIR folder or ClimbMix shard folder")
    p.add_argument("--model", help="'minilm' (bundled) or a model / training output folder")
    p.add_argument("--out", help="index folder to write (rerun with the same flags to resume)")
    p.add_argument("--batch-size", type=int, default=64, help="documents per encoder forward pass")
    p.add_argument("--max-length", type=int, help="encoder max tokens per document (default: a trained "
                                                  "model's passage length, else 256)")
    p.add_argument("--shard-size", type=int, default=100_000, help="documents per shard")
    p.add_argument("--spec", default="Flat", help="FAISS index_factory spec: Flat, IVF4096,PQ64, "
                                                  "OPQ64,IVF262144,PQ64, HNSW32, ...")
    p.add_argument("--layout", choices=["auto", "shards", "merged"], default="auto",
                   help="one FAISS index per shard or one merged index (auto: shards for Flat, else merged)")
    p.add_argument("--train-size", type=int, help="vectors sampled to train the FAISS index")
    p.add_argument("--reasoning-aware", action="store_true",
                   help="record that this model expects reasoning-aware queries (search --reasoning)")
    p.add_argument("--no-docstore", action="store_true", help="do not store document texts (no doc lookup)")
    p.add_argument("--overwrite", action="store_true", help="discard shards encoded with other settings")
    p.add_argument("--device", help="torch device (default: cuda:LOCAL_RANK when available, else cpu)")
    p.add_argument("--precision", choices=["auto", "fp32", "fp16", "bf16"], default="auto",
                   help="forward-pass precision (auto: fp16 autocast on CUDA, fp32 on CPU)")
    p.add_argument("--wait-timeout", type=float, help="seconds rank 0 waits for the other ranks' shards")
    p.add_argument("--gpu-index", choices=["auto", "yes", "no"], default="auto",
                   help="train the FAISS index on GPUs (faiss-gpu) when available")
    plan = p.add_argument_group("planning (--plan prints estimates and builds nothing)")
    plan.add_argument("--plan", action="store_true", help="print the memory / disk / time plan of the index and exit")
    plan.add_argument("--docs", type=int, help="number of documents (default: count --corpus)")
    plan.add_argument("--dim", type=int, help="embedding dimension (default: the --model's)")
    plan.add_argument("--avg-doc-bytes", type=int, default=0, help="average document size for the docstore")
    plan.add_argument("--docs-per-second", type=float, help="measured encoder throughput per GPU")
    plan.add_argument("--gpus", type=int, default=1, help="GPUs/processes for the encode-time estimate")
    p.set_defaults(func=run)


def _layout(args) -> str:
    from hopscotch.retriever.index.faiss_index import is_flat

    if args.layout != "auto":
        return args.layout
    return "shards" if is_flat(args.spec) else "merged"


def _run_plan(args) -> int:
    from hopscotch.retriever.errors import UsageError
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
        from hopscotch.retriever.model.loading import load_sentence_transformer
        m = load_sentence_transformer(args.model, device="cpu")
        dim = int((getattr(m, "get_embedding_dimension", None) or m.get_sentence_embedding_dimension)())
    if docs <= 0 or dim <= 0:
        raise UsageError("--docs and --dim must be positive")
    options = PlanOptions(shard_size=args.shard_size, layout=_layout(args), train_size=args.train_size,
                          avg_doc_bytes=args.avg_doc_bytes, docs_per_second=args.docs_per_second, gpus=args.gpus)
    print(plan_index(docs, dim, args.spec, options).format())
    return 0


def run(args) -> int:
    from hopscotch.retriever.errors import UsageError

    if args.plan:
        return _run_plan(args)
    missing = [f"--{n}" for n in ("corpus", "model", "out") if not getattr(args, n)]
    if missing:
        raise UsageError(f"missing {', '.join(missing)} (or use --plan)")
    from hopscotch.retriever.index.encode import EncodeOptions, encode_corpus
    from hopscotch.retriever.index.faiss_index import build_faiss_index, check_spec_syntax

    check_spec_syntax(args.spec)  # reject a malformed spec before hours of encoding
    t0 = time.perf_counter()
    result = encode_corpus(args.corpus, args.model, args.out, EncodeOptions(
        shard_size=args.shard_size, batch_size=args.batch_size, max_length=args.max_length, device=args.device,
        docstore=not args.no_docstore, reasoning_aware=args.reasoning_aware, overwrite=args.overwrite,
        wait_timeout=args.wait_timeout, precision=args.precision))
    print(f"rank {result.rank}/{result.world_size}: encoded {len(result.encoded_shards)} shards "
          f"({result.encoded_docs:,} documents, {result.docs_per_second:,.0f} docs/s), "
          f"{len(result.skipped_shards)} already done", file=sys.stderr)
    if result.meta is None:
        return 0  # not rank 0: rank 0 finishes the index
    use_gpu = {"auto": None, "yes": True, "no": False}[args.gpu_index]
    build_faiss_index(args.out, args.spec, layout=_layout(args), train_size=args.train_size, use_gpu=use_gpu)
    meta = result.meta
    print(f"index of {meta.num_docs:,} documents ({meta.num_shards} shards, dim {meta.dim}, {args.spec}) "
          f"written to {args.out} in {time.perf_counter() - t0:.1f}s")
    return 0
