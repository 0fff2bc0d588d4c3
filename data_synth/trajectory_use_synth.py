"""``hopscotch synth --mode trajectory-use``: Tevatron-shaped tuples from agent trajectories.

Reads a Tongyi-DeepResearch steps file (``agent_search_steps.jsonl``: ``query_id, reasoning, search_query,
retrieved_docids, valid`` per row; several runs of one question told apart by ``retriever`` / ``source``), the
returned documents' snippets (default: the ``doc_snippets.jsonl`` beside it), optionally the runs' BrowseComp-Plus
run records (their final answers count as later text) and a corpus for the passages' text and the BM25 negatives
(default: the snippets). Labels: :mod:`hopscotch.data_synth.trajectory_use` (the dev sets' usage rule). Writes one
tuple per used search call, ``{query_id, query, reasoning, current_reasoning, prior_queries, prior_results,
positive_passages, negative_passages}`` (the context fields as DR-Synth writes them for Tongyi traces, so every query
input variant trains on them), in the order questions first appear, and a stats JSON.

``questions``: a file of question ids, one per line (``scripts/train_agent_retriever.sh`` passes the train questions
of :mod:`hopscotch_experiments.agent_data.splits`); no other question's call is written. Resumable like DR-Synth: each
finished question is a work file under ``<out>.parts/`` (:class:`~hopscotch.data_synth.parts.PartStore`) whose
manifest records the configuration and every input's content; a rerun with other inputs or settings is refused
naming the difference (``fresh`` starts over); the output and the stats are written atomically at the end, the same
bytes however often the run was interrupted.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from hopscotch.data_synth.parts import PartStore
from hopscotch.data_synth.pipeline import _check_resume, _input_fingerprint, default_stats_path
from hopscotch.data_synth.trace_readers import SNIPPETS_FILE
from hopscotch.data_synth.traces import read_traces
from hopscotch.data_synth.trajectory_use import CallUse, UseConfig, UseTupleWriter, call_uses
from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.index.bm25 import BM25Index
from hopscotch.retriever.io.common import atomic_write, iter_lines, write_json
from hopscotch.retriever.io.corpus import load_corpus_dict

Pathish = str | os.PathLike


@dataclass
class UseInputs:
    """What the trajectory-use mode reads (see the module doc)."""

    traces: Pathish
    snippets: Pathish | None = None
    runs: Pathish | None = None
    corpus: Pathish | None = None
    questions: Pathish | None = None
    bm25_index: Pathish | None = None

    def snippets_path(self) -> Path:
        if self.snippets is not None:
            return Path(self.snippets)
        path = Path(self.traces).parent / SNIPPETS_FILE
        if not path.is_file():
            raise UsageError(f"--snippets is needed: there is no {SNIPPETS_FILE} beside {self.traces}")
        return path

    def corpus_path(self) -> Path:
        return Path(self.corpus) if self.corpus is not None else self.snippets_path()


def read_question_ids(path: Pathish) -> list[str]:
    """The ids of a questions file: one per line (blank lines skipped, surrounding spaces dropped)."""
    return [line.strip() for _, line in iter_lines(path)]


def _groups(uses: list[CallUse], wanted: list[str] | None, max_questions: int | None) -> list[tuple[str, list]]:
    groups: dict[str, list[CallUse]] = {}
    keep = None if wanted is None else set(wanted)
    for call in uses:
        if keep is None or call.question_id in keep:
            groups.setdefault(call.question_id, []).append(call)
    out = list(groups.items())
    return out[:max_questions] if max_questions is not None else out


def _summary(total: Counter, groups: list, uses: list[CallUse], left_out: int, config: UseConfig) -> dict:
    tuples = total["tuples"]
    return {"mode": "trajectory-use", "questions": len(groups), "questions_left_out": left_out,
            "calls": total["calls"], "tuples": tuples, "calls_without_use": total["calls_without_use"],
            "dropped_duplicate_call": total["dropped_duplicate_call"],
            "positives": {"total": total["positives"], "per_tuple": round(total["positives"] / tuples, 3) if tuples
                          else 0.0},
            "negatives": {"shown": total["negatives_shown"],
                          "shown_with_evidence": total["negatives_shown_with_evidence"],
                          "bm25": total["negatives_bm25"], "short_of_bm25": total["short_of_bm25_negatives"],
                          "per_tuple": round((total["negatives_shown"] + total["negatives_bm25"]) / tuples, 3)
                          if tuples else 0.0},
            "neutral_shown": total["neutral_shown"], "docs_missing_from_corpus": total["docs_missing_from_corpus"],
            "calls_judged_in_file": sum(len(c.call_ids) for c in uses), "config": config.fingerprint()}


def synthesize_trajectory_use(inputs: UseInputs, out: Pathish, config: UseConfig | None = None,
                              stats_path: Pathish | None = None, max_questions: int | None = None,
                              fresh: bool = False, show_progress: bool = True) -> dict:
    """Write the trajectory-use tuples of ``inputs`` to ``out`` and the stats JSON (default ``<out stem>.stats.json``);
    returns the stats. Raises :class:`UsageError` / :class:`~hopscotch.retriever.errors.FormatError`."""
    config = config or UseConfig()
    traces = Path(inputs.traces)
    if not traces.is_file():
        raise UsageError(f"--traces {traces}: expected a Tongyi steps file (agent_search_steps.jsonl)")
    snippets, corpus = inputs.snippets_path(), inputs.corpus_path()
    wanted = None if inputs.questions is None else read_question_ids(inputs.questions)
    uses, used = call_uses(traces, snippets, inputs.runs, config.thresholds)
    groups = _groups(uses, wanted, max_questions)
    if not groups:
        raise UsageError(f"no judged search call of {'the --questions' if wanted is not None else 'any'} question "
                         f"in {traces}")
    left_out = len({c.question_id for c in uses}) - len(groups)
    digest = hashlib.sha256("\n".join(f"{q}\t{len(c)}" for q, c in groups).encode()).hexdigest()
    manifest = {"config": config.fingerprint(), "questions": digest,
                "inputs": {"traces": {"0": _input_fingerprint(traces)}, "snippets": _input_fingerprint(snippets),
                           "runs": _input_fingerprint(inputs.runs), "corpus": _input_fingerprint(corpus),
                           "questions": _input_fingerprint(inputs.questions),
                           "bm25_index": _input_fingerprint(inputs.bm25_index)}}
    store = PartStore(out)
    _check_resume(store, manifest, fresh)
    store.open(manifest, fresh=fresh)
    todo = [(i, q, calls) for i, (q, calls) in enumerate(groups) if not store.done(i, q)]
    if todo:
        documents = load_corpus_dict(corpus)
        if inputs.bm25_index is None:
            index = BM25Index.build(documents.values(), show_progress=show_progress)
        else:
            index = BM25Index.load(inputs.bm25_index)
            unknown = next((d for d in index.docids if d not in documents), None)
            if unknown is not None:
                raise UsageError(f"--bm25-index {inputs.bm25_index}: document {unknown!r} is not in the corpus "
                                 f"{corpus}")
        steps = {s.query_id: s for s in read_traces([traces], "tongyi")}
        writer = UseTupleWriter(documents, index, config)
        for i, qid, calls in todo:
            lines, stats = writer.question_lines(calls, steps, used.get(qid, set()))
            store.write(i, qid, lines, stats)
    total: Counter = Counter()
    with atomic_write(out) as fh:
        for i in range(len(groups)):
            part = store.read(i)
            fh.writelines(line + "\n" for line in part["lines"])
            total.update(part["stats"])
    stats = _summary(total, groups, uses, left_out, config)
    write_json(stats_path or default_stats_path(out), stats)
    store.remove()
    return stats
