"""Model conformance of a multi-vector folder: the token vectors of its golden probes re-encoded by
``MultiVectorEncoder`` (the loader Hopscotch uses too:
:func:`~hopscotch.retriever.model.multi_vector.load_multi_vector_model`).

No setting is varied here: a differing token count (the query length, the query expansion, the skiplist or the
markers changed) or differing values (weights, projection, normalisation) is reported as it is.
"""

from __future__ import annotations

import numpy as np

from hopscotch.retriever.audit.report import AuditReport

LOADER = "sentence-transformers MultiVectorEncoder (Hopscotch's loader)"


def audit_multi_vector(path: str, golden: dict, tol: float, device: str, service: dict | None, wrote: bool
                       ) -> AuditReport:
    """Compare the stored token vectors with a fresh ``MultiVectorEncoder(path)`` encoding of each probe."""
    from hopscotch.retriever.model.multi_vector import load_multi_vector_model

    st = load_multi_vector_model(path, device=device).st
    per_probe, problems = {}, []
    for p in golden["probes"]:
        encode = st.encode_query if p["kind"] == "query" else st.encode_document
        (emb,) = encode([p["input"]], show_progress_bar=False)
        emb = np.asarray(emb.float().cpu() if hasattr(emb, "float") else emb, np.float32)
        stored = np.asarray(p["vectors"], np.float32)
        if emb.shape != stored.shape:
            per_probe[p["name"]] = float("inf")
            problems.append(f"{p['name']}: {emb.shape[0]} token vectors of {emb.shape[1]} dims, golden "
                            f"{stored.shape[0]} of {stored.shape[1]} (query length, expansion, skiplist or markers "
                            "changed)")
            continue
        per_probe[p["name"]] = float(np.max(np.abs(emb - stored)))
        if per_probe[p["name"]] > tol:
            problems.append(f"{p['name']}: max abs diff {per_probe[p['name']]:.2e} (weights, projection or "
                            "normalisation changed)")
    worst = max(per_probe.values())
    summary = [f"model {path} (multi-vector)" + (" (golden vectors written now)" if wrote else ""),
               f"{LOADER}: {'MISMATCH' if problems else 'OK'} (max abs diff {worst:.2e}; tolerance {tol:g}; "
               f"{len(per_probe)} probes)", *problems]
    if service:
        summary.append(service["note"])
    details = {"model": path, "kind": "multi_vector", "tolerance": tol,
               "paths": {LOADER: {"status": "mismatch" if problems else "ok", "max_abs_diff": worst,
                                  "per_probe": per_probe}},
               "problems": problems, "service": service, "written_now": wrote}
    return AuditReport("model", "fail" if problems else "ok", summary, details)
