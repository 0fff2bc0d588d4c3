"""``hopscotch index``: encode a corpus into resumable shards and build a FAISS index over them.

    hopscotch index --corpus PATH --model M --out DIR [--batch-size B] [--max-length L]
                    [--shard-size N] [--spec SPEC] [--layout auto|shards|merged] [--dim D]
    hopscotch index --plan --docs 553000000 --dim 384 --spec OPQ64,IVF262144,PQ64
    hopscotch index --import-tevatron 'corpus.*.pkl' --out DIR [--corpus PATH] [--model M] [--spec SPEC]
    hopscotch index --out DIR --export-tevatron OUT_PREFIX     # writes OUT_PREFIX.<shard>.pkl

Tevatron's encode pickles ``(reps, lookup)`` (the published BrowseComp-Plus dense indexes) are read only
when named with ``--import-tevatron``, through the restricted unpickler of
:mod:`hopscotch.retriever.io.tevatron` (numpy arrays, lists and strings; anything else is refused unrun); the
import and the export are :mod:`hopscotch.retriever.index.tevatron_index`.

Run it under ``torchrun --nproc_per_node G -m hopscotch.retriever.cli index ...`` (or ``accelerate launch``) to split
the shards across processes/GPUs; rerun the same command after a crash to resume. A rerun whose corpus content,
model files or encode flags differ from the folder's ``encode_config.json`` is refused with the difference named
(``--overwrite`` starts again), so one index never mixes shards of two corpora, models or settings; a
multi-vector index rerun with other codec settings (``--nbits``, ``--mv-centroids``) is refused alike.

A flag that does nothing for the kind of model given is refused, naming it, in a build and in ``--plan`` alike
(``--nbits`` with a single-vector model, ``--spec`` with a multi-vector one, ...; plan-only flags in a build): the
one table is :data:`hopscotch.retriever.commands.index_plan.INDEX_FLAGS`.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from hopscotch.retriever.commands.arg_groups import add_device_flag, add_output_flags
from hopscotch.retriever.commands.bm25_index import CORPUS_FILES
from hopscotch.retriever.commands.flag_types import (
    check_device,
    clamp_max_length,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
)
from hopscotch.retriever.commands.index_plan import (
    check_export_kind,
    check_index_flags,
    index_dim,
    layout_of,
    model_dim,
    run_plan,
)
from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.index.encode import EncodeOptions, encode_corpus
from hopscotch.retriever.index.faiss_index import build_faiss_index
from hopscotch.retriever.index.faiss_spec import check_spec, is_auto
from hopscotch.retriever.index.layout import IndexMeta
from hopscotch.retriever.index.multi_vector.build import MultiVectorOptions
from hopscotch.retriever.index.tevatron_index import export_tevatron, import_tevatron
from hopscotch.retriever.io.atomic import check_target
from hopscotch.retriever.io.outputs import check_outputs, named_inputs, output_folder, prefixed_outputs
from hopscotch.retriever.io.progress import rate_text
from hopscotch.retriever.io.tevatron import tevatron_export_path, tevatron_pickle_paths


def register(sub) -> None:
    p = sub.add_parser("index", help="encode a corpus into shards and build a FAISS index",
                       description="Encode a corpus into resumable float16 shards (multi-process under torchrun) "
                                   "and build a FAISS index over them (a multi-vector --model: a token index); "
                                   "--plan prints the memory and disk a build and a search need. A flag that does "
                                   "nothing for the kind of model given (single- or multi-vector) is refused, "
                                   "and so is a plan-only flag in a build.")
    p.add_argument("--corpus", help="corpus JSONL/parquet file, BEIR folder or ClimbMix shard folder")
    p.add_argument("--model", help="'minilm' (bundled) or a model / training output folder")
    add_output_flags(p, "index folder to write (rerun with the same flags to resume)", overwrite_help=(
        "start again: discard shards encoded from another corpus content, model or settings (a rerun that differs "
        "in any of them, or in a multi-vector index's codec settings, is refused otherwise, naming the difference); "
        "also write into a folder another command "
        "made, and replace other runs' Tevatron exports"))
    p.add_argument("--batch-size", type=positive_int, default=64, help="documents per encoder forward pass")
    p.add_argument("--max-length", type=positive_int,
                   help="encoder max tokens per document (default: a trained model's passage length, else 256; "
                        "more than the model's positions is cut to them, with a note)")
    p.add_argument("--dim", type=positive_int, metavar="D",
                   help="keep the first D dimensions of every vector, renormalised (Matryoshka prefixes; recorded "
                        "in index.json as truncate_dim: searches cut their queries alike and refuse another "
                        "--dim); a warning when --model was not trained on that prefix. With --plan: the "
                        "dimension planned for (default: the --model's)")
    p.add_argument("--shard-size", type=positive_int, default=100_000, help="documents per shard")
    p.add_argument("--windows", type=positive_int, metavar="N",
                   help="index a document longer than --max-length as up to N overlapping windows (its first "
                        "included) and score it by its best one (MaxP; encoded into DIR/windows/ after the "
                        "documents, each rank the windows of its own shards); 1: first window only (default: a "
                        "trained model's recorded passage_windows, else 1)")
    p.add_argument("--window-stride", type=positive_int, metavar="T",
                   help="tokens between window starts (default: a trained model's window_stride, else 80%% of "
                        "--max-length)")
    p.add_argument("--spec", help="FAISS index_factory spec (single-vector models): Flat (the default), "
                                  "IVF4096,PQ64, OPQ64,IVF262144,PQ64, HNSW32, ...; auto: Flat up to 250,000 "
                                  "documents, else an IVF fast-scan PQ with recorded search defaults (nprobe, "
                                  "refine 4) chosen by the document count")
    p.add_argument("--layout", choices=["auto", "shards", "merged"],
                   help="one FAISS index per shard or one merged index (default auto: shards for Flat, else merged)")
    p.add_argument("--train-size", type=positive_int, help="vectors sampled to train the FAISS index")
    p.add_argument("--reasoning-aware", action="store_true",
                   help="record that this model expects reasoning-aware queries (search --reasoning); part of "
                        "the encode settings, so flipping it on a rerun is refused (--overwrite re-encodes)")
    p.add_argument("--no-docstore", action="store_true", help="do not store document texts (no doc lookup)")
    add_device_flag(p, "torch device (default: cuda:LOCAL_RANK when available, else cpu; one this machine lacks "
                       "is refused)")
    p.add_argument("--precision", choices=["auto", "fp32", "fp16", "bf16"], default="auto",
                   help="forward-pass precision (auto: fp16 autocast on CUDA, fp32 on CPU; bf16 on a CPU "
                        "without bfloat16 instructions runs fp32, with a warning)")
    p.add_argument("--wait-timeout", type=positive_float, help="seconds rank 0 waits for the other ranks' shards")
    p.add_argument("--gpu-index", choices=["auto", "yes", "no"],
                   help="train the FAISS index on GPUs (faiss-gpu) when available (default: auto)")
    tev = p.add_argument_group("Tevatron encode pickles (reps, lookup)")
    tev.add_argument("--import-tevatron", metavar="GLOB",
                     help="build --out from Tevatron encode pickles (a quoted glob, e.g. 'corpus.*.pkl') instead "
                          "of encoding; --corpus (optional) gives the documents' texts, --model the query encoder "
                          "to record. WARNING: pickles run code; they are read only when named here, with a "
                          "restricted unpickler that accepts numpy arrays, lists and strings and refuses the rest")
    tev.add_argument("--export-tevatron", metavar="OUT_PREFIX",
                     help="write the --out index's embeddings as Tevatron pickles OUT_PREFIX.<shard>.pkl (float32 "
                          "reps, docid list); without --corpus/--model the existing --out index is exported")
    plan = p.add_argument_group("planning (--plan prints estimates and builds nothing)")
    plan.add_argument("--plan", action="store_true", help="print the memory / disk / time plan of the index and exit")
    plan.add_argument("--docs", type=positive_int, help="number of documents (default: count --corpus)")
    plan.add_argument("--avg-doc-bytes", type=non_negative_int,
                      help="average document size for the docstore (default: 0)")
    plan.add_argument("--docs-per-second", type=positive_float, help="measured encoder throughput per GPU")
    plan.add_argument("--gpus", type=positive_int, help="GPUs/processes for the encode-time estimate (default: 1)")
    mv = p.add_argument_group("multi-vector models (a --model saved with model.kind: multi_vector; refused with a "
                              "single-vector one)")
    mv.add_argument("--nbits", type=positive_int, choices=[1, 2, 4, 8],
                    help="bits per dimension of each token's compressed residual (default: 2; another value than "
                         "the index's codec was trained with needs --overwrite)")
    mv.add_argument("--mv-centroids", type=positive_int, metavar="C",
                    help="k-means centroids of the token vectors (default: ColBERTv2's 2^floor(log2(16 sqrt(tokens)))"
                         "; another count than the index's codec was trained with needs --overwrite)")
    plan.add_argument("--multi-vector", action="store_true",
                      help="plan a multi-vector token index (implied by a multi-vector --model)")
    plan.add_argument("--tokens-per-doc", type=positive_float,
                      help="multi-vector: stored tokens a document (default: measured on the first 200 documents of "
                           "--corpus with --model, else 160)")
    plan.add_argument("--ram-gib", type=positive_float,
                      help="multi-vector: RAM a search machine gives the index (where the plan says to rerank "
                           "instead; default: 64)")
    plan.add_argument("--windows-per-doc", type=non_negative_float,
                      help="passage windows per document beyond its first, for the windows/ index (default: "
                           "measured on the first 1,000 documents of --corpus when --windows or the --model's "
                           "recorded passage_windows turn windows on, else 0)")
    p.set_defaults(func=run)


def run(args) -> int:
    check_export_kind(args)  # Tevatron pickles hold one vector a document: not in a plan, not of token vectors
    if args.plan:
        check_index_flags(args)
        return run_plan(args)
    check_device(args.device)
    check_index_flags(args)  # a flag for the other kind of model, or a plan-only one: refused before any work
    if args.dim is not None and not args.model:
        raise UsageError("--dim cuts the vectors --model encodes from --corpus; an existing index keeps its own")
    args.dim = index_dim(args)  # None: whole vectors
    if args.model and not args.import_tevatron:
        args.max_length = clamp_max_length("index", args.max_length, args.model)
    if (args.import_tevatron or args.export_tevatron) and not args.out:
        raise UsageError("--import-tevatron / --export-tevatron need --out DIR (the index folder)")
    export_only = args.export_tevatron and not (args.corpus or args.model)  # export the existing --out index
    guard = _check_outputs(args, export_only)
    if args.import_tevatron:
        _import_tevatron(args)
    elif not export_only and not _build(args):
        return 0  # not rank 0: rank 0 finishes the index
    if args.export_tevatron:
        _export_tevatron(args, guard if export_only else None)
    guard.finish()
    return 0


_RUNTIME_FLAGS = ("batch_size", "device", "wait_timeout", "gpu_index", "precision")


def _check_outputs(args, export_only: bool):
    """The output boundary (:mod:`hopscotch.retriever.io.outputs`): ``--out`` is this command's resumable folder
    (refused when another command made it, or when it is a file or lies in /dev), or, for an export of an
    existing index, an input; the Tevatron export's files are file outputs (when the index is built first,
    only where they would land is checked now, and the files once it is built)."""
    inputs = [*named_inputs(args.corpus, CORPUS_FILES)] + [m for m in [args.model] if m and Path(m).exists()]
    outputs, ignore = [], _RUNTIME_FLAGS
    if export_only:  # only the index and the prefix decide the export's files
        inputs, ignore = [args.out], _export_ignore(args)
    elif args.out:
        outputs.append(output_folder(args.out, resumable=True))
    if args.import_tevatron:
        inputs += tevatron_pickle_paths(args.import_tevatron)
    if export_only:
        outputs += _export_outputs(args, every_shard=True)
    elif args.export_tevatron:
        check_target(_export_outputs(args, every_shard=False)[0].path)
    return check_outputs(vars(args), outputs=outputs, inputs=inputs, ignore=ignore)


def _export_ignore(args) -> list[str]:
    return [k for k in vars(args) if k not in ("out", "export_tevatron")]


def _export_outputs(args, every_shard: bool):
    """``--export-tevatron PREFIX``'s files: one per shard of the ``--out`` index (or the first only)."""
    shards = IndexMeta.load(args.out).num_shards if every_shard else 1
    prefix = args.export_tevatron
    return prefixed_outputs("--export-tevatron", prefix, [tevatron_export_path(prefix, s) for s in range(shards)])


def _build(args) -> bool:
    """Encode ``--corpus`` and build the FAISS index; True on the process that finished the index."""
    missing = [f"--{n}" for n in ("corpus", "model", "out") if not getattr(args, n)]
    if missing:
        raise UsageError(f"missing {', '.join(missing)} (or use --plan)")

    if not is_auto(args.spec):  # a spec that cannot work, before hours of encoding ('auto' is fixed by the count)
        check_spec(args.spec, dim=args.dim, train_size=args.train_size)
    t0 = time.perf_counter()
    result = encode_corpus(args.corpus, args.model, args.out, EncodeOptions(
        shard_size=args.shard_size, batch_size=args.batch_size, max_length=args.max_length, device=args.device,
        docstore=not args.no_docstore, reasoning_aware=args.reasoning_aware, overwrite=args.overwrite,
        wait_timeout=args.wait_timeout, precision=args.precision, windows=args.windows,
        window_stride=args.window_stride, truncate_dim=args.dim,
        multi_vector=MultiVectorOptions(nbits=args.nbits, num_centroids=args.mv_centroids)))
    print(f"rank {result.rank}/{result.world_size}: encoded {len(result.encoded_shards)} shards "
          f"({result.encoded_docs:,} documents, {rate_text(result.docs_per_second)} docs/s), "
          f"{len(result.skipped_shards)} already done"
          + (f"; windows of {len(result.window_parts)} shards ({result.encoded_windows:,} windows)"
             if result.window_parts else ""), file=sys.stderr)
    if result.meta is None:
        return False
    use_gpu = _use_gpu(args)
    built = build_faiss_index(args.out, args.spec, layout=layout_of(args), train_size=args.train_size, use_gpu=use_gpu)
    spec = built["spec"] + (f" (auto; search defaults {built['search']})" if built.get("search") else
                            " (auto)" if is_auto(args.spec) else "")
    meta = result.meta
    windows = ""
    if meta.windows.get("rows"):
        build_faiss_index(Path(args.out) / meta.windows["dir"], args.spec, layout=layout_of(args),
                          train_size=args.train_size, use_gpu=use_gpu)
        windows = f", plus {meta.windows['rows']:,} passage windows (up to {meta.windows['max_windows']} a document)"
    print(f"index of {meta.num_docs:,} documents ({meta.num_shards} shards, dim {meta.dim}, {spec}){windows} "
          f"written to {args.out} in {time.perf_counter() - t0:.1f}s")
    return True


def _use_gpu(args) -> bool | None:
    return {"auto": None, "yes": True, "no": False}[args.gpu_index]


def _import_tevatron(args) -> None:
    """``--import-tevatron GLOB``: :func:`hopscotch.retriever.index.tevatron_index.import_tevatron` into ``--out``."""
    done = import_tevatron(args.import_tevatron, args.out, corpus=args.corpus, model=args.model,
                           model_dim=model_dim(args.model) if args.model else None, spec=args.spec,
                           layout=layout_of(args), shard_size=args.shard_size, train_size=args.train_size,
                           max_length=args.max_length, reasoning_aware=args.reasoning_aware,
                           overwrite=args.overwrite, use_gpu=_use_gpu(args))
    meta = done.meta
    print(f"index of {meta.num_docs:,} documents from {len(done.pickles)} Tevatron pickles ({meta.num_shards} "
          f"shards, dim {meta.dim}, {args.spec}) written to {Path(args.out)} in {done.seconds:.1f}s"
          + ("" if args.model else "; no --model recorded: give 'search --model' the query encoder"))


def _export_tevatron(args, guard=None) -> None:
    """One Tevatron pickle per shard of a finished index: ``PREFIX.<shard>.pkl`` = ``(float32 reps, docids)``;
    without ``guard`` (the index was just built) the files are checked at the output boundary first."""
    index_dir, prefix = args.out, args.export_tevatron
    if guard is None:
        guard = check_outputs(vars(args), outputs=_export_outputs(args, every_shard=True), inputs=[index_dir],
                              ignore=_export_ignore(args))
    meta = export_tevatron(index_dir, prefix)
    guard.finish()
    print(f"{meta.num_docs:,} embeddings of {index_dir} written as {meta.num_shards} Tevatron pickles "
          f"'{prefix}.*.pkl'")
