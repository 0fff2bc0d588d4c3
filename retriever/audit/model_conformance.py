"""Model conformance: does every loader encode a saved model as it encoded itself when it was saved?

A saved folder carries golden vectors (:mod:`hopscotch.retriever.model.golden`): five probes (short query,
reasoning query, over-long reasoning query, document, over-long document) as the model encoded them at save
time, with the settings it used. ``hopscotch audit model M`` re-encodes them through

* ``hopscotch``: the search and index path (:class:`~hopscotch.retriever.model.dense_encoder.DenseEncoder`, the
  query text rendered from the folder's settings as the dense searcher renders it, a separate query tower);
* ``hopscotch-reload``: ``DualEncoder.from_pretrained(M)`` (training, resuming, WiSE-FT), trained folders only;
* ``sentence-transformers``: plain ``SentenceTransformer(M)`` (no remote code) and ``encode_query`` /
  ``encode_document`` of the golden input texts with the model's ``query`` / ``document`` prompts (as the model
  card says; each cuts at the length the folder declares for it);
* ``service``: a running ``hopscotch serve`` (``url``): not checked, the service has no embedding endpoint;

and compares each with the stored vectors: a max absolute difference above ``tol`` (1e-5; the precision of the
save's dtype when it was not float32) fails the audit (exit 2). For each failing loader the probes are
re-encoded with one setting changed at a time (:mod:`hopscotch.retriever.audit.model_diagnosis`) and the change
that reproduces the loader's vectors is named, beside the folder files that declare a differing setting.

Example (not run: it needs a trained model folder)::

    report = audit_model("runs/agent/final")
    report.verdict, report.details["paths"]["sentence-transformers"]["diagnosis"]
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from hopscotch.retriever.audit.model_diagnosis import (
    Reference,
    declared_differences,
    declared_settings,
    diagnose,
    encoder_config,
    max_diff,
)
from hopscotch.retriever.audit.model_multi_vector import audit_multi_vector
from hopscotch.retriever.audit.report import AuditReport
from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.index.windows import passage_length
from hopscotch.retriever.io.common import write_json
from hopscotch.retriever.model.config import (
    MULTI_VECTOR,
    EncoderConfig,
    model_settings,
    read_saved_config,
    saved_model_kind,
)
from hopscotch.retriever.model.dense_encoder import DenseEncoder
from hopscotch.retriever.model.golden import GOLDEN_FILE, golden_record, read_golden, write_multi_vector_golden
from hopscotch.retriever.model.loading import resolve_model_path
from hopscotch.retriever.model.query_input import searcher_query_input
from hopscotch.retriever.model.query_template import format_document, format_queries

TOL = 1e-5
#: the tolerance of golden vectors computed in a lower precision than the float32 re-encodings
DTYPE_TOL = {"bfloat16": 2e-2, "float16": 2e-3}
NO_GOLDEN = ("no golden vectors: saved before this version; run `hopscotch audit model {m} --write-golden` to "
             "record them now")
NO_SERVICE = "service: not checked (hopscotch serve has no embedding endpoint: it returns documents and scores)"


def _device(device: str | None) -> str:
    import torch

    return device or ("cuda" if torch.cuda.is_available() else "cpu")


def golden_config(path: str):
    """The settings golden vectors are recorded with for a folder: its ``hopscotch_config.json``; for a plain
    sentence-transformers folder its pooling and normalisation, with plain queries and the lengths Hopscotch's
    index and search use for it (the passage length, 256 unless recorded)."""
    settings = model_settings(path)
    config = read_saved_config(path) or EncoderConfig()
    if settings.trained:
        return config
    length = passage_length(settings)
    return EncoderConfig(pooling=config.pooling, normalize=config.normalize, query_max_len=length,
                         passage_max_len=length, reasoning_aware=False)


def record_golden(path: str, device: str | None = None) -> dict:
    """Compute and write ``golden_vectors.json`` for a folder that has none (``--write-golden``)."""
    if saved_model_kind(path) == MULTI_VECTOR:
        from hopscotch.retriever.model.multi_vector import load_multi_vector_model

        write_multi_vector_golden(path, load_multi_vector_model(path, device=_device(device)).st)
    else:
        from hopscotch.retriever.model.dual_encoder import DualEncoder

        model = DualEncoder.from_pretrained(path, golden_config(path)).to(_device(device))
        write_json(os.path.join(path, GOLDEN_FILE), golden_record(model), indent=None)

    return read_golden(path)


def _hopscotch_vectors(path: str, probes: list[dict], device: str) -> np.ndarray:
    """The probes through the search / index path: texts rendered from the folder's settings as the dense searcher
    (queries; reasoning-aware for a reasoning-aware model, as ``search --reasoning``) and the index encoder
    (documents) render them, encoded by :class:`DenseEncoder` at the lengths those paths use."""
    s = model_settings(path)
    plen = passage_length(s)
    qlen = s.query_max_len or plen
    docs = DenseEncoder(path, max_length=plen, device=device)
    queries = DenseEncoder(s.query_tower, max_length=qlen, device=device) if s.query_tower else docs
    aware = bool(s.trained and s.reasoning_aware)
    rows = {"query": [i for i, p in enumerate(probes) if p["kind"] == "query"],
            "document": [i for i, p in enumerate(probes) if p["kind"] != "query"]}
    qp = [probes[i] for i in rows["query"]]
    queries.model.max_seq_length = qlen
    qtexts = format_queries(queries.model.tokenizer, qlen, [p["query"] for p in qp], [p.get("reasoning") for p in qp],
                            instruction=s.instruction, reasoning_aware=[aware and not p.get("plain") for p in qp],
                            query_input=searcher_query_input(None, s.query_input))
    qvec = queries.encode_texts(qtexts)
    docs.model.max_seq_length = plen
    dvec = docs.encode_texts([s.passage_prefix + format_document(probes[i].get("title"), probes[i]["text"])
                              for i in rows["document"]])
    out = np.zeros((len(probes), qvec.shape[1] if len(qvec) else dvec.shape[1]), np.float32)
    out[rows["query"]], out[rows["document"]] = qvec, dvec
    return out


def _st_vectors(path: str, probes: list[dict], settings: dict, device: str) -> tuple[np.ndarray, list[str]]:
    """The golden input texts (their instruction / prefix taken off) through plain ``SentenceTransformer(path)``
    with the model's ``query`` / ``document`` prompts; also notes (a missing prompt)."""
    from sentence_transformers import SentenceTransformer

    tower = model_settings(path).query_tower
    models = {"document": SentenceTransformer(path, device=device, local_files_only=True)}
    models["query"] = SentenceTransformer(tower, device=device, local_files_only=True) if tower else models["document"]
    notes, out = [], [None] * len(probes)
    for kind, key in (("query", "instruction"), ("document", "passage_prefix")):
        rows = [i for i, p in enumerate(probes) if (p["kind"] == "query") == (kind == "query")]
        prefix = settings.get(key) or ""
        texts = [probes[i]["input"][len(prefix):] if probes[i]["input"].startswith(prefix) else probes[i]["input"]
                 for i in rows]
        st = models[kind]
        name = kind if kind in (st.prompts or {}) else None
        if name is None and prefix:
            notes.append(f"the folder's sentence-transformers config has no {kind!r} prompt")
        # encode_query / encode_document (sentence-transformers >= 5), as the model card says: each at its length
        encode = getattr(st, f"encode_{kind}", None) or st.encode
        vecs = encode(texts, prompt_name=name, convert_to_numpy=True, show_progress_bar=False)
        for j, i in enumerate(rows):
            out[i] = np.asarray(vecs[j], np.float32)
    return np.stack(out), notes


def _check(observed: np.ndarray, golden: np.ndarray, tol: float, probes: list[dict]) -> dict:
    diffs = {p["name"]: max_diff(observed[i:i + 1], golden[i:i + 1]) for i, p in enumerate(probes)}
    worst = max(diffs.values())
    return {"status": "ok" if worst <= tol else "mismatch", "max_abs_diff": worst, "per_probe": diffs}


def audit_model(model: str | os.PathLike, url: str | None = None, write_golden: bool = False, tol: float = TOL,
                device: str | None = None) -> AuditReport:
    """Re-encode a saved model's golden vectors through every loader (module doc)."""
    path = resolve_model_path(model)
    if not any((Path(path) / f).is_file() for f in ("config.json", "modules.json")):
        raise UsageError(f"{path}: not a model folder (no config.json or modules.json)")
    golden = read_golden(path)
    wrote = False
    if write_golden:
        if golden is not None:
            raise UsageError(f"{path}: already has golden vectors ({GOLDEN_FILE}); delete it to record them again")
        golden, wrote = record_golden(path, device), True
    service = {"url": url, "status": "not checked", "note": NO_SERVICE} if url else None
    if golden is None:
        summary = [f"model {path}", NO_GOLDEN.format(m=model)]
        return AuditReport("model", "warning", summary, {"model": path, "golden": None, "service": service})
    device = _device(device)
    if golden.get("kind") == MULTI_VECTOR or saved_model_kind(path) == MULTI_VECTOR:
        return audit_multi_vector(path, golden, tol, device, service, wrote)
    settings, probes = golden["settings"], golden["probes"]
    tol_eff = max(tol, DTYPE_TOL.get(settings.get("dtype", "float32"), 0.0))
    stored = np.asarray([p["vector"] for p in probes], np.float32)
    from hopscotch.retriever.model.dual_encoder import DualEncoder

    reference = Reference(DualEncoder.from_pretrained(path, encoder_config(settings)).to(device), probes)
    declared = declared_settings(path)
    paths: dict[str, dict] = {}
    baseline = max_diff(reference.vectors(settings), stored)
    observed = {"hopscotch": _hopscotch_vectors(path, probes, device)}
    if model_settings(path).trained:
        saved = read_saved_config(path).__dict__
        changes = {k: v for k, v in saved.items() if k in settings and settings[k] != v and k != "lora"}
        observed["hopscotch-reload"] = reference.vectors(settings, changes)
    observed["sentence-transformers"], st_notes = _st_vectors(path, probes, settings, device)
    for name, vecs in observed.items():
        paths[name] = _check(vecs, stored, tol_eff, probes)
        if paths[name]["status"] == "mismatch":
            rows = [i for i, p in enumerate(probes) if paths[name]["per_probe"][p["name"]] > tol_eff]
            paths[name]["probes"] = [probes[i]["name"] for i in rows]
            paths[name]["diagnosis"] = diagnose(reference, settings, declared, vecs, list(range(len(probes))),
                                                fixed=name == "sentence-transformers")
    return _report(path, golden, paths, declared, baseline, tol_eff, st_notes, service, wrote)


def _report(path, golden, paths, declared, baseline, tol, st_notes, service, wrote) -> AuditReport:
    settings = golden["settings"]
    failed = [n for n, r in paths.items() if r["status"] == "mismatch"]
    shown = ("pooling", "normalize", "padding_side", "query_max_len", "passage_max_len", "query_input", "dtype")
    summary = [f"model {path}" + (" (golden vectors written now)" if wrote else ""),
               "golden: " + ", ".join(f"{k} {settings.get(k)}" for k in shown)
               + f", instruction {settings.get('instruction')!r}, passage prefix {settings.get('passage_prefix')!r}"
               + f"; {len(golden['probes'])} probes; tolerance {tol:g}"]
    for name, r in paths.items():
        line = f"{name}: {r['status'].upper()} (max abs diff {r['max_abs_diff']:.2e})"
        if r["status"] == "mismatch":
            line += f" on {', '.join(r['probes'])}"
            diagnosis = r["diagnosis"]
            line += ("; reproduced by: " + "; ".join(diagnosis) if diagnosis else
                     "; no single setting (or pair) reproduces it: weights, tokenizer or the loader's code differ")
        summary.append(line)
    summary += [f"  note: {n}" for n in st_notes]
    differences = declared_differences(settings, declared)
    summary += [f"declared: {d}" for d in differences]
    if baseline > tol:
        summary.append(f"the recorded settings no longer reproduce the stored vectors (max abs diff {baseline:.2e}): "
                       "the weights or the tokenizer changed since the save (or it ran in another precision)")
    if service:
        summary.append(NO_SERVICE)
    details = {"model": path, "tolerance": tol, "golden_settings": settings, "golden_versions": golden.get("versions"),
               "paths": paths, "declared": declared, "declared_differences": differences,
               "reference_vs_golden": baseline, "service": service, "written_now": wrote}
    return AuditReport("model", "fail" if failed else "ok", summary, details)
