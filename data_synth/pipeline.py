"""DR-Synth end to end: QA + traces + corpus -> Tevatron/AgentIR tuples JSONL and a stats JSON.

Example::

    from hopscotch.data_synth.config import SynthConfig
    from hopscotch.data_synth.pipeline import SynthInputs, synthesize

    inputs = SynthInputs("../shared/data/hotpotqa_ircot", "../shared/data/hotpotqa_ircot/corpus.jsonl",
                         traces=["../shared/data/hotpotqa_ircot/cot_steps.jsonl"])
    stats = synthesize(inputs, out="out/tuples.jsonl", config=SynthConfig(reranker="lexical", seed=13, workers=2))
    stats["steps_kept"], stats["dropped"]

Work is done per question (in the order questions first appear in the traces) and written to
``<out>.parts/`` (see :mod:`hopscotch.data_synth.parts`); a killed run resumes there, and the final file is the
same bytes whatever the number of workers or interruptions. The work files' manifest records the configuration
and the content of every input (QA, qrels, corpus, traces, ``--bm25-index``, the oracle model's files): a rerun
that differs in any of them is refused, naming the difference (``--fresh`` starts over), so two runs never mix.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from hopscotch.data_synth.config import SynthConfig
from hopscotch.data_synth.first_stage import describe_source
from hopscotch.data_synth.parts import MANIFEST, PartStore
from hopscotch.data_synth.qa import QASource, load_qa
from hopscotch.data_synth.trace_step import TraceStep
from hopscotch.data_synth.traces import question_only_steps, read_traces, unique_steps
from hopscotch.data_synth.worker import QuestionWorker
from hopscotch.retriever.errors import HopscotchError, UsageError
from hopscotch.retriever.index.bm25 import BM25Index
from hopscotch.retriever.io.common import atomic_write, write_json
from hopscotch.retriever.io.corpus import Document, load_corpus_dict
from hopscotch.retriever.io.fingerprint import input_change, manifest_differences, model_fingerprint, path_fingerprint
from hopscotch.retriever.io.progress import progress
from hopscotch.retriever.io.qrels import read_duplicate_groups
from hopscotch.retriever.model.loading import resolve_model_path

_WORKER: QuestionWorker | None = None   # set in the parent before forking, inherited by workers
_STORE: PartStore | None = None


@dataclass
class SynthInputs:
    """What DR-Synth reads.

    ``qa_dir``: BEIR folder / questions file with answers and qrels (see :mod:`hopscotch.data_synth.qa`);
    ``corpus``: corpus file or folder (default: ``qa_dir`` itself when it holds ``corpus.jsonl``);
    ``traces``: trace files or folders, formats detected per file (``config.trace_format`` overrides);
    ``question_only``: label each question itself instead of trace steps (give traces or this, not both);
    ``qrels``: a qrels file instead of the one in ``qa_dir``;
    ``bm25_index``: a saved :class:`~hopscotch.retriever.index.bm25.BM25Index` of the corpus instead of building one;
    ``duplicate_groups``: the corpus's duplicate groups (cmass format, ``hopscotch audit near-duplicates``): no
    document they list as an exact or near duplicate (at any Jaccard the file lists) of a positive or gold
    document becomes a negative;
    ``candidate_index``: a dense index of the corpus (``hopscotch index``), the hybrid first stage's vector half
    (``config.candidates`` ``hybrid``).
    """

    qa_dir: str | os.PathLike
    corpus: str | os.PathLike | None = None
    traces: Sequence[str | os.PathLike] = ()
    question_only: bool = False
    qrels: str | os.PathLike | None = None
    bm25_index: str | os.PathLike | None = None
    duplicate_groups: str | os.PathLike | None = None
    candidate_index: str | os.PathLike | None = None

    def trace_paths(self) -> list[Path]:
        traces = [Path(t) for t in self.traces or []]
        if bool(traces) == bool(self.question_only):
            raise UsageError("give trace files (--traces) or --question-only, not both and not neither")
        return traces

    def corpus_path(self) -> str | os.PathLike:
        if self.corpus is not None:
            return self.corpus
        qa_dir = Path(self.qa_dir)
        if not (qa_dir.is_dir() and (qa_dir / "corpus.jsonl").is_file()):
            raise UsageError(f"--corpus is needed: {self.qa_dir} holds no corpus.jsonl")
        return qa_dir / "corpus.jsonl"

    def load_bm25(self, corpus, documents: dict[str, Document], show_progress: bool) -> BM25Index:
        """The saved BM25 index (checked to cover nothing but ``documents``), else one built over them."""
        if self.bm25_index is None:
            return BM25Index.build(documents.values(), show_progress=show_progress)
        index = BM25Index.load(self.bm25_index)
        unknown = next((d for d in index.docids if d not in documents), None)
        if unknown is not None:
            raise UsageError(f"--bm25-index {self.bm25_index}: document {unknown!r} is not in the corpus {corpus}")
        return index


def group_steps(steps: Iterable[TraceStep]) -> list[tuple[str, list[TraceStep]]]:
    """Steps grouped by question, questions in order of first appearance; query ids must be unique."""
    groups: dict[str, list[TraceStep]] = {}
    for step in unique_steps(steps):
        groups.setdefault(step.question_id, []).append(step)
    return list(groups.items())


def default_stats_path(out: str | os.PathLike) -> Path:
    """``tuples.jsonl`` -> ``tuples.stats.json``."""
    out = Path(out)
    stem = out.name.removesuffix(".jsonl")
    return out.with_name(stem + ".stats.json")


def _input_fingerprint(path: str | os.PathLike | None) -> dict | None:
    """``{"path", "content"}`` of an input file or folder (its content hashed, see
    :mod:`hopscotch.retriever.io.fingerprint`); None for an input not given."""
    if path is None:
        return None
    p = Path(path).resolve()
    try:
        return {"path": str(p), "content": path_fingerprint(p)}
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file or folder") from None


def _oracle_model(config: SynthConfig) -> dict | None:
    """The oracle model's files (weights, configs, tokenizer) for the dense and cross-encoder oracles."""
    if config.reranker == "dense":
        folder = Path(resolve_model_path(config.encoder))
    elif config.reranker == "cross-encoder" and config.cross_encoder:
        folder = Path(config.cross_encoder)
    else:
        return None
    return {"path": str(folder.resolve()), "files": model_fingerprint(folder) if folder.is_dir() else None}


def _summarize(total: Counter, n_questions: int, config: SynthConfig) -> dict:
    dropped = {k.split(".", 1)[1]: v for k, v in sorted(total.items()) if k.startswith("dropped.")}
    read, kept = total["steps_read"], total["steps_kept"]
    with_gold, kept_gold = total["steps_with_gold_question"], total["kept_with_gold_question"]
    return {
        "questions": n_questions,
        "steps_read": read,
        "steps_kept": kept,
        "kept_fraction": round(kept / read, 4) if read else 0.0,
        "dropped": dropped,
        "steps_with_gold_question": with_gold,
        "kept_with_gold_question": kept_gold,
        "kept_fraction_with_gold": round(kept_gold / with_gold, 4) if with_gold else None,
        "positives": {"total": total["positives_gold"] + total["positives_reranked"],
                      "gold": total["positives_gold"], "reranked": total["positives_reranked"]},
        "negatives": {"total": total["negatives"], "per_tuple": round(total["negatives"] / kept, 3) if kept else 0.0,
                      "steps_short": total["steps_short_of_negatives"],
                      "excluded_by_duplicate_groups": total["negatives_excluded_duplicate_group"],
                      # answer-bearing or near-duplicate of a positive (hopscotch audit false-negatives' cheap rules)
                      "false_negative_rate": round(total["negatives_false"] / total["negatives"], 4)
                      if total["negatives"] else 0.0},
        "gold_missing_from_corpus": total["gold_missing_from_corpus"],
        # the first stage that mined the candidates (hard negatives), and the steps it searched with their reasoning
        "candidates": {"source": config.candidates, "first_stage": describe_source(config.candidates),
                       "steps_searched_with_reasoning": total["steps_with_reasoning"]},
        "config": config.fingerprint(),
    }


def _run_task(task: tuple[int, str, list[TraceStep]]) -> tuple[int, int]:
    index, question_id, steps = task
    lines, stats = _WORKER.process(question_id, steps)
    _STORE.write(index, question_id, lines, stats)
    return len(steps), stats.get("steps_kept", 0)


def _init_child(threads: int) -> None:
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)


def _run(tasks: list, worker: QuestionWorker, store: PartStore, total_steps: int, config: SynthConfig) -> None:
    """Process ``tasks`` (in ``config.workers`` forked processes that inherit ``worker`` and ``store``)."""
    global _WORKER, _STORE
    done_steps = total_steps - sum(len(t[2]) for t in tasks)
    bar = progress(total=total_steps, initial=done_steps, unit="step", desc="synth", show=config.show_progress)
    _WORKER, _STORE = worker, store
    kept, pool = 0, None
    try:
        if config.workers == 1 or len(tasks) <= 1:
            results = map(_run_task, tasks)
        else:
            ctx = multiprocessing.get_context("fork")
            pool = ctx.Pool(config.workers, initializer=_init_child,
                            initargs=(max(1, (os.cpu_count() or 1) // config.workers),))
            results = pool.imap_unordered(_run_task, tasks, chunksize=1)
        for n_steps, n_kept in results:
            kept += n_kept
            bar.update(n_steps)
            bar.set_postfix(kept=kept, refresh=False)
    finally:
        if pool is not None:
            pool.terminate()
            pool.join()
        _WORKER, _STORE = None, None
        bar.close()


def synthesize(inputs: SynthInputs, out: str | os.PathLike = "tuples.jsonl", config: SynthConfig | None = None,
               stats_path: str | os.PathLike | None = None) -> dict:
    """Label every search step of ``inputs.traces`` (or each question itself, with ``inputs.question_only``).

    ``out``: the tuples JSONL; the stats go to ``stats_path`` (default ``<out stem>.stats.json``).
    Returns the stats dict.
    """
    config = config or SynthConfig()
    traces = inputs.trace_paths()
    qa = load_qa(inputs.qa_dir, inputs.qrels)
    corpus = inputs.corpus_path()
    if config.reranker == "llm" and not config.llm_cache:
        config = replace(config, llm_cache=str(Path(out).with_name(Path(out).name + ".llm-cache")))
    groups = _question_groups(qa, traces, inputs.question_only, config)
    store = PartStore(out)
    manifest = _manifest(config, inputs, groups, qa, corpus, traces)
    _check_resume(store, manifest, config.fresh)
    started = store.folder.exists()
    store.open(manifest, fresh=config.fresh)
    tasks = [(i, qid, s) for i, (qid, s) in enumerate(groups) if not store.done(i, qid)]
    if tasks:
        try:
            documents = load_corpus_dict(corpus)
            index = inputs.load_bm25(corpus, documents, config.show_progress)
        except HopscotchError:  # a refused input (a damaged --bm25-index, a bad corpus line): no work files behind
            if not started:
                store.remove()
            raise
        same = None
        if inputs.duplicate_groups is not None:
            same = read_duplicate_groups(inputs.duplicate_groups, 0.0).same_documents()
        worker = QuestionWorker(qa, documents, index, config, same, inputs.candidate_index)
        _run(tasks, worker, store, sum(len(s) for _, s in groups), config)
    stats = _assemble(out, store, groups, config)
    write_json(stats_path or default_stats_path(out), stats)
    store.remove()
    return stats


def _question_groups(qa: QASource, traces: list[Path], question_only: bool, config: SynthConfig
                     ) -> list[tuple[str, list[TraceStep]]]:
    """The steps to label, grouped by question (at most ``config.max_questions`` of them)."""
    steps = question_only_steps(qa.questions.values()) if question_only else read_traces(traces, config.trace_format)
    groups = group_steps(steps)
    if config.max_questions is not None:
        groups = groups[: config.max_questions]
    if not groups:
        raise UsageError("the traces hold no steps")
    return groups


def _manifest(config: SynthConfig, inputs: SynthInputs, groups: list, qa: QASource, corpus, traces: list[Path]
              ) -> dict:
    """What a resumed run must share with the run that wrote the work files: the configuration, the questions,
    every input's content (QA, qrels, corpus, traces, the ``--bm25-index``) and the oracle model's files."""
    digest = hashlib.sha256("\n".join(f"{q}\t{len(s)}" for q, s in groups).encode()).hexdigest()
    if config.candidates == "hybrid" and inputs.candidate_index is None:
        raise UsageError("--candidates hybrid needs --candidate-index DIR (hopscotch index of the same corpus)")
    if config.candidates != "hybrid" and inputs.candidate_index is not None:
        raise UsageError(f"--candidate-index is the hybrid's dense half: it does nothing with --candidates "
                         f"{config.candidates}")
    first = {} if config.candidates == "bm25" else {"first_stage": describe_source(config.candidates)}
    index = {"candidate_index": _input_fingerprint(inputs.candidate_index)} if inputs.candidate_index else {}
    return {"config": config.fingerprint(), **first, "question_only": inputs.question_only, "questions": digest,
            "passage_fields": ["docid", "title", "text", "score"],  # work files written without scores: refused
            "inputs": {"qa": _input_fingerprint(qa.queries_path), "qrels": _input_fingerprint(qa.qrels_path),
                       "corpus": _input_fingerprint(corpus), "traces": {str(i): _input_fingerprint(t)
                                                                        for i, t in enumerate(traces)},
                       "bm25_index": _input_fingerprint(inputs.bm25_index), "oracle_model": _oracle_model(config)}
                  | ({"duplicate_groups": _input_fingerprint(inputs.duplicate_groups)}
                     if inputs.duplicate_groups is not None else {}) | index}


def _check_resume(store: PartStore, manifest: dict, fresh: bool) -> None:
    """Refuse to resume work files of a run that differs from ``manifest``, naming each difference."""
    file = store.folder / MANIFEST
    if fresh or not file.is_file():
        return
    try:
        previous = json.loads(file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return  # PartStore.open refuses an unreadable manifest, saying so
    current = json.loads(json.dumps(manifest))
    diffs = manifest_differences(previous, current, first="inputs", then="then")
    if diffs:
        diffs.sort(key=lambda d: ".path: " not in d)  # a moved or other input first, then what changed in it
        subjects = dict.fromkeys(".".join(d.split(": ", 1)[0].split("[", 1)[0].split(".")[:2]) for d in diffs)
        shown = "; ".join(diffs[:4]) + (f"; and {len(diffs) - 4} more" if len(diffs) > 4 else "")
        said = [c for c in _input_changes(previous.get("inputs"), current["inputs"]) if c]
        raise UsageError(f"{file}: the work files were written by a run with other settings or inputs "
                         f"({'; '.join(said) + '. ' if said else ''}{', '.join(subjects)} differ: {shown}); rerun "
                         "with the same ones to resume, or pass --fresh to start over")


#: the flag that names each synth input, for messages
_INPUT_FLAGS = {"qa": "--qa", "qrels": "--qrels", "corpus": "--corpus", "bm25_index": "--bm25-index",
                "oracle_model": "the oracle model", "duplicate_groups": "--duplicate-groups",
                "candidate_index": "--candidate-index"}


def _input_changes(old: dict | None, new: dict) -> list[str | None]:
    """Each changed input in words (:func:`~hopscotch.retriever.io.fingerprint.input_change`): the file, and
    whether its size, mtime or content changed."""
    old = old if isinstance(old, dict) else {}
    out = [input_change(flag, old.get(key), new.get(key)) for key, flag in _INPUT_FLAGS.items()]
    traces_a, traces_b = old.get("traces") or {}, new.get("traces") or {}
    out += [input_change("--traces", traces_a.get(i), traces_b.get(i)) for i in sorted(set(traces_a) | set(traces_b))]
    return out


def _assemble(out: str | os.PathLike, store: PartStore, groups: list, config: SynthConfig) -> dict:
    """Write the work files' lines to ``out`` in question order; return the summed stats."""
    total: Counter = Counter()
    with atomic_write(out) as fh:
        for i in range(len(groups)):
            part = store.read(i)
            for line in part["lines"]:
                fh.write(line + "\n")
            total.update(part["stats"])
    return _summarize(total, len(groups), config)
