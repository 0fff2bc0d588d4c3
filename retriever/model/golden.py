"""Golden vectors: a saved model's own encodings of a few fixed probe texts, written beside its weights.

:func:`~hopscotch.retriever.model.saving.save_model` writes ``golden_vectors.json`` into every single-vector folder:
the vectors the in-memory model gave, at save time, for five probes (a short plain query, a query with a short
reasoning, a query whose reasoning far exceeds any query length, a short document and a document longer than
any passage length), with the encoder input text of each (instruction, query input variant and left cut
applied), its token count and the settings it was encoded with (pooling, normalisation, padding side,
instruction and passage prefix, lengths, query input variant, dtype). ``hopscotch audit model M`` re-encodes
the probes through every loader and names the setting that makes one disagree
(:mod:`hopscotch.retriever.audit.model_conformance`).

A multi-vector folder (:func:`~hopscotch.retriever.model.saving.save_multi_vector`) gets the token vectors of
two probes (a query and a document, as ``MultiVectorEncoder.encode_query`` / ``encode_document`` give them).

Example (not run: it needs a trained model folder)::

    golden = read_golden("runs/agent/final")        # None for a folder saved before golden vectors
    golden["settings"]["pooling"], golden["probes"][0]["input"], len(golden["probes"][0]["vector"])
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
from dataclasses import asdict
from pathlib import Path

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.io.common import write_json
from hopscotch.retriever.model.query_template import format_document, format_queries

GOLDEN_FILE = "golden_vectors.json"
GOLDEN_VERSION = 1
_QUERY = "who directed the 1997 film Gummo"
_STEP = ("Step {i}: the film was shot in Nashville, Tennessee, and its director grew up in Xenia, Ohio, "
         "so the next search should look for the people behind the film. ")
#: the probes: queries (``plain``: no reasoning template) and documents; the long ones exceed 4,000 tokens
PROBES = (
    {"name": "short_query", "kind": "query", "query": _QUERY, "reasoning": None, "plain": True},
    {"name": "reasoning_query", "kind": "query", "query": _QUERY, "plain": False,
     "reasoning": "The question asks for a film director. Gummo is a 1997 American drama film."},
    {"name": "long_query", "kind": "query", "query": "where did the director of Gummo grow up", "plain": False,
     "reasoning": "".join(_STEP.format(i=i) for i in range(150))},
    {"name": "document", "kind": "document", "title": "Gummo",
     "text": "Gummo is a 1997 American experimental drama film written and directed by Harmony Korine."},
    {"name": "long_document", "kind": "document", "title": "Xenia, Ohio",
     "text": " ".join(f"Xenia is a city in Greene County, Ohio; paragraph {i} of its history names its parks, "
                      "rivers, schools and the tornadoes of 1974 and 2000." for i in range(150))},
)
MULTI_VECTOR_PROBES = (
    {"name": "query", "kind": "query", "input": "who directed the 1997 film Gummo"},
    {"name": "document", "kind": "document", "input": PROBES[3]["title"] + " " + PROBES[3]["text"]},
)


def probe_inputs(tokenizer, config, probes=PROBES) -> list[str]:
    """The encoder input text of each probe under ``config`` (an
    :class:`~hopscotch.retriever.model.config.EncoderConfig`): queries through
    :func:`~hopscotch.retriever.model.query_template.format_queries` (the model's variant, instruction, the
    reasoning cut from the left to ``query_max_len``), documents as ``passage_prefix + title + " " + text``."""
    out = []
    for p in probes:
        if p["kind"] == "query":
            (text,) = format_queries(tokenizer, config.query_max_len, [p["query"]], [p.get("reasoning")],
                                     instruction=config.instruction, reasoning_aware=not p.get("plain"),
                                     query_input=config.query_variant())
        else:
            text = config.passage_prefix + format_document(p.get("title"), p["text"])
        out.append(text)
    return out


@contextlib.contextmanager
def _exact_float32():
    """No TF32 matmuls while golden vectors are computed (they would differ from a CPU re-encoding by ~1e-3)."""
    import torch

    cuda, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    precision = torch.get_float32_matmul_precision()
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = cuda, cudnn
        torch.set_float32_matmul_precision(precision)


def encode_probes(model, probes=PROBES, inputs: list[str] | None = None
                  ) -> tuple[list[str], list[list[float]], list[int]]:
    """``(inputs, vectors, token counts)`` of the probes by a
    :class:`~hopscotch.retriever.model.dual_encoder.DualEncoder` under its ``config``: the queries in one batch
    through the query tower, the documents in one through the passage tower, in eval mode (restored after).
    ``inputs``: the encoder texts as given (cut from the right at the max lengths) instead of rendered."""
    import torch

    c = model.config
    inputs = probe_inputs(model.tokenizer, c, probes) if inputs is None else list(inputs)
    vectors: list = [None] * len(probes)
    tokens: list = [0] * len(probes)
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), _exact_float32():
            sides = (("query", "query", c.query_max_len), ("document", "passage", c.passage_max_len))
            for kind, tower, max_len in sides:
                rows = [i for i, p in enumerate(probes) if p["kind"] == kind]
                if not rows:
                    continue
                features = model._tokenize([inputs[i] for i in rows], max_len, None)
                features = {k: v.to(device) for k, v in features.items()}
                emb = model.encode(features, tower).float().cpu()
                for j, i in enumerate(rows):
                    vectors[i] = [float(x) for x in emb[j]]
                    tokens[i] = int(features["attention_mask"][j].sum())
    finally:
        model.train(was_training)
    return inputs, vectors, tokens


def golden_record(model, probes=PROBES) -> dict:
    """The ``golden_vectors.json`` content of a single-vector model (module doc)."""
    import sentence_transformers
    import torch
    import transformers

    inputs, vectors, tokens = encode_probes(model, probes)
    param = next(model.parameters())
    settings = {k: v for k, v in asdict(model.config).items() if k != "lora"}
    settings.update(query_input=str(model.config.query_variant()), dtype=str(param.dtype).removeprefix("torch."),
                    device=param.device.type)
    rows = [{**p, "input": text, "tokens": n, "vector": vec}
            for p, text, n, vec in zip(probes, inputs, tokens, vectors)]
    return {"version": GOLDEN_VERSION, "kind": "single_vector", "settings": settings,
            "versions": {"sentence_transformers": sentence_transformers.__version__,
                         "transformers": transformers.__version__, "torch": torch.__version__},
            "probes": rows}


def write_golden(folder: str | os.PathLike, model) -> bool:
    """Write ``golden_vectors.json`` for a single-vector model into ``folder``; False (nothing written) when the
    model's weights are partitioned across processes (DeepSpeed ZeRO-3: one process cannot run it alone; record
    them later with ``hopscotch audit model M --write-golden``)."""
    if any(hasattr(p, "ds_id") for p in model.parameters()):
        return False
    write_json(Path(folder) / GOLDEN_FILE, golden_record(model), indent=None)
    return True


def save_golden(folder: str | os.PathLike, model, multi_vector: bool = False) -> None:
    """What the save paths call: :func:`write_golden` (or :func:`write_multi_vector_golden`), a failure being a
    warning on stderr, never a failed save (the audit then says the folder has no golden vectors)."""
    try:
        (write_multi_vector_golden if multi_vector else write_golden)(folder, model)
    except Exception as exc:  # noqa: BLE001 - the weights matter more than their probes
        print(f"warning: golden vectors not written to {folder} ({type(exc).__name__}: {exc}); record them with "
              "'hopscotch audit model M --write-golden'", file=sys.stderr)


def write_multi_vector_golden(folder: str | os.PathLike, st_model, probes=MULTI_VECTOR_PROBES) -> None:
    """``golden_vectors.json`` of a multi-vector model (a ``MultiVectorEncoder``): the token vectors of two probes."""
    import torch

    rows = []
    was_training = st_model.training  # encode() switches to eval mode: a mid-run save must not keep it there
    try:
        with torch.no_grad(), _exact_float32():
            for p in probes:
                encode = st_model.encode_query if p["kind"] == "query" else st_model.encode_document
                (emb,) = encode([p["input"]], show_progress_bar=False)
                emb = torch.as_tensor(emb).float().cpu()
                rows.append({**p, "tokens": int(emb.shape[0]), "vectors": [[float(x) for x in row] for row in emb]})
    finally:
        st_model.train(was_training)
    write_json(Path(folder) / GOLDEN_FILE, {"version": GOLDEN_VERSION, "kind": "multi_vector", "probes": rows},
               indent=None)


def read_golden(folder: str | os.PathLike) -> dict | None:
    """The folder's golden vectors, or None when it has none (saved before they were written). A file that is not
    valid JSON, lacks the probes, or holds a NaN, infinite or ragged vector is a one-line UsageError naming it (the
    audit would otherwise blame the model for its own record)."""
    path = Path(folder) / GOLDEN_FILE
    if not path.is_file():
        return None

    def bad(what: str) -> UsageError:
        return UsageError(f"{path}: malformed golden vectors ({what}); delete it and record them again with "
                          f"'hopscotch audit model {folder} --write-golden'")

    try:
        golden = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise bad(f"not readable JSON: {str(exc)[:80]}") from None
    if not isinstance(golden, dict) or not isinstance(golden.get("probes"), list) or not golden["probes"]:
        raise bad("expected an object with a non-empty 'probes' list")
    multi = golden.get("kind") == "multi_vector"
    if not multi and not isinstance(golden.get("settings"), dict):
        raise bad("expected a 'settings' object")
    width = None
    for i, probe in enumerate(golden["probes"]):
        rows = probe.get("vectors") if multi and isinstance(probe, dict) else \
            [probe.get("vector")] if isinstance(probe, dict) else None
        if not isinstance(rows, list) or not rows:
            raise bad(f"probe {i}: no {'vectors' if multi else 'vector'}")
        for row in rows:
            if not isinstance(row, list) or not row or not all(
                    isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in row):
                raise bad(f"probe {i}: a vector must be a list of finite numbers (a NaN, an infinity or a non-number)")
            if width is not None and len(row) != width:
                raise bad(f"probe {i}: vectors of {len(row)} and {width} numbers")
            width = len(row)
    return golden
