"""Trace files for training on agent traffic (issue 9), built from the shared data's *train* questions.

:func:`write_training_traces` (driver: ``python scripts/agent_data.py OUT_DIR``) writes, deterministically
(same bytes on every run; each file written atomically, so a killed run leaves no half file):

* ``hotpot_traces.jsonl``: the IRCoT ``cot_steps.jsonl`` rows of HotpotQA's train questions (unchanged).
* ``musique_traces.jsonl``: MuSiQue's train questions as generic traces, one step per hop, converted by
  :mod:`.musique_hops` (the conversion the evaluation set uses too): query = the sub-question with ``#k``
  resolved to hop k's answer; reasoning = the question and the earlier hops with their answers;
  gold_docids = the hop's own paragraph.
* ``tongyi_traces.jsonl`` + ``tongyi_qrels.tsv``: the Tongyi-DeepResearch search steps of the train
  trajectories (valid calls only; :data:`.splits.TRAIN_EXCLUDED` left out), read with DR-Synth's ``tongyi``
  reader (so the context fields are the same), as generic traces whose ``gold_docids`` are **distillation
  labels**: the top :data:`TONGYI_TOP` documents the agent's own retriever returned for that call
  (``retrieved_docids``). DR-Synth's lexical oracle then picks, among them, the one the step query matches
  best as the positive. The qrels file lists, per question, every document any of its calls returned:
  DR-Synth never draws a hard negative from them (QAMPARI questions have many answers; another call's
  result is likely relevant).
* ``tongyi_train_questions.txt``: the Tongyi train question ids, one per line: the ``--questions`` of
  ``hopscotch synth --mode trajectory-use`` (:mod:`hopscotch.data_synth.trajectory_use`), which labels the same
  trajectories' calls by what the agent went on to use instead (no other question's call is written).

Every trace file is written by the generic format's one writer
(:func:`hopscotch.data_synth.trace_readers.write_trace_file`). The world (:data:`.splits.WORLD`; its first
220 questions = train) is built by ``hopscotch world`` and labelled with ``--max-questions 220`` in
``scripts/train_agent_retriever.sh``. Splits: :mod:`.splits`.
"""

from __future__ import annotations

from pathlib import Path

from hopscotch_experiments.agent_data.musique_hops import musique_steps
from hopscotch_experiments.agent_data.splits import data_dir, splits
from hopscotch.data_synth.trace_readers import read_tongyi, write_trace_file
from hopscotch.retriever.errors import FormatError
from hopscotch.retriever.io.common import atomic_write, iter_lines, read_jsonl
from hopscotch.retriever.io.validate import json_object

#: documents of each Tongyi call (the agent retriever's top) that become the step's gold documents
TONGYI_TOP = 3
FILES = ("hotpot_traces.jsonl", "musique_traces.jsonl", "tongyi_traces.jsonl")
TONGYI_QRELS = "tongyi_qrels.tsv"
TONGYI_QUESTIONS = "tongyi_train_questions.txt"


def hotpot_traces(out: Path) -> int:
    """The IRCoT rows of HotpotQA's train questions, each line as it is in the source; the row count."""
    train = set(splits("hotpotqa_ircot")["train"])
    src = data_dir() / "hotpotqa_ircot" / "cot_steps.jsonl"
    lines = []
    for lineno, line in iter_lines(src):
        obj = json_object(line, src, lineno, "an IRCoT step {qid, ...}")
        if "qid" not in obj:
            raise FormatError(src, lineno, "an IRCoT step {qid, ...}", f"keys {sorted(obj)[:10]}")
        if str(obj["qid"]) in train:
            lines.append(line + "\n")
    with atomic_write(out) as fh:
        fh.writelines(lines)
    return len(lines)


def musique_traces(out: Path) -> int:
    """MuSiQue's train questions, one generic trace step per hop (in ``queries.jsonl`` order); the step count."""
    hops = musique_steps(data_dir() / "musique_hipporag", splits("musique_hipporag")["train"])
    return write_trace_file(out, (h.trace_fields() for steps in hops.values() for h in steps))


def tongyi_traces(out: Path, qrels_out: Path) -> int:
    """The train trajectories' valid search calls with their top :data:`TONGYI_TOP` returned documents as
    gold, and every returned document per question in ``qrels_out``; the step count."""
    src = data_dir() / "qampari_tongyi" / "agent_search_steps.jsonl"
    train = set(splits("qampari_tongyi")["train"])
    rows = dict(read_jsonl(src, "a Tongyi search step"))
    returned: dict[str, list[str]] = {}
    steps = []
    for step in read_tongyi(((n, o) for n, o in rows.items() if str(o.get("query_id")) in train), src):
        obj = rows[int(step.source.rsplit(":", 1)[1])]
        docids = [str(d) for d in obj.get("retrieved_docids") or []]
        seen = returned.setdefault(step.question_id, [])
        seen.extend(d for d in dict.fromkeys(docids) if d not in seen)
        if step.failed or not step.query or not docids:
            continue
        steps.append({"question_id": step.question_id, "step": step.step, "reasoning": step.reasoning,
                      "query": step.query, "current_reasoning": step.current_reasoning,
                      "prior_queries": list(step.prior_queries or ()),
                      "prior_results": list(step.prior_results) if step.prior_results is not None else None,
                      "gold_docids": docids[:TONGYI_TOP]})
    with atomic_write(qrels_out) as fh:
        fh.write("query-id\tcorpus-id\tscore\n")
        fh.writelines(f"{q}\t{d}\t1\n" for q, ds in returned.items() for d in ds)
    return write_trace_file(out, steps)


def write_training_traces(out_dir: Path) -> dict[str, int]:
    """Write the three trace files (and ``tongyi_qrels.tsv``, ``tongyi_train_questions.txt``) under ``out_dir``;
    ``{file name: steps}``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with atomic_write(out_dir / TONGYI_QUESTIONS) as fh:
        fh.writelines(q + "\n" for q in splits("qampari_tongyi")["train"])
    return {FILES[0]: hotpot_traces(out_dir / FILES[0]),
            FILES[1]: musique_traces(out_dir / FILES[1]),
            FILES[2]: tongyi_traces(out_dir / FILES[2], out_dir / TONGYI_QRELS)}
