"""One evaluation set of the agent-retrieval experiments (:class:`EvalSet`) and how a builder makes one: a step as
a query record (:func:`step_record`) and the split by whole questions (:func:`finish_set`). The sets themselves:
:mod:`.eval_sets` (HotpotQA, MuSiQue, the worlds) and :mod:`.tongyi_sets` (the Tongyi-DeepResearch calls)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from hopscotch.retriever.io.common import atomic_write, write_jsonl
from hopscotch.retriever.io.queries import context_dict


@dataclass
class EvalSet:
    """Query records and qrels of one evaluation set; ``tune`` / ``test``: the qids of each split."""

    name: str
    corpus: Path
    queries: list[dict]
    qrels: dict[str, dict[str, int]]
    tune: list[str]
    test: list[str]
    note: str = ""
    counts: dict = field(default_factory=dict)
    labels: str = ""        # where the relevance labels come from, in words (the ablation table's header)
    votes: bool = True      # whether the set votes on defaults that involve reasoning (not for pseudo-qrels)
    index_name: str = ""    # the ablation's index folder name (sets over one corpus share it); "" = name

    def write(self, folder: Path) -> dict[str, Path]:
        """``queries.jsonl``, ``qrels.tsv``, ``tune_qids.txt``, ``test_qids.txt`` under ``folder`` (atomically)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        paths = {k: folder / f for k, f in (("queries", "queries.jsonl"), ("qrels", "qrels.tsv"),
                                              ("tune", "tune_qids.txt"), ("test", "test_qids.txt"))}
        write_jsonl(paths["queries"], self.queries)
        with atomic_write(paths["qrels"]) as fh:
            fh.write("query-id\tcorpus-id\tscore\n")
            fh.writelines(f"{q}\t{d}\t{g}\n" for q, docs in self.qrels.items() for d, g in docs.items())
        for key, qids in (("tune", self.tune), ("test", self.test)):
            with atomic_write(paths[key]) as fh:
                fh.writelines(q + "\n" for q in qids)
        return paths

    def subset(self, keep) -> tuple[list[str], list[str], list[dict]]:
        """``(tune, test, query records)`` restricted to the qids in ``keep``, in this set's order."""
        return ([q for q in self.tune if q in keep], [q for q in self.test if q in keep],
                [row for row in self.queries if row["_id"] in keep])


def step_record(qid: str, step) -> dict:
    """A query record of a trace step (or Query, or MuSiQue hop): its query, reasoning and other context fields."""
    row = {"_id": qid, "text": step.query if hasattr(step, "query") else step.text,
           "reasoning": step.reasoning or None}
    row.update(context_dict(step))
    return row


def finish_set(name: str, corpus: Path, by_question: dict[str, list[tuple[dict, dict]]], tune_q, test_q, note: str,
               labels: str = "", votes: bool = True) -> EvalSet:
    """The set of ``by_question`` (``{question: [(query record, qrels), ...]}``) split into ``tune_q`` and ``test_q``
    questions; steps with an empty query or no relevant document are dropped."""
    queries, qrels, tune, test = [], {}, [], []
    for split, qids in (("tune", tune_q), ("test", test_q)):
        for question in qids:
            for row, rel in by_question.get(question, ()):
                if not row["text"].strip() or not rel:
                    continue
                queries.append(row)
                qrels[row["_id"]] = rel
                (tune if split == "tune" else test).append(row["_id"])
    counts = {"tune_steps": len(tune), "test_steps": len(test),
              "tune_questions": sum(1 for q in tune_q if by_question.get(q)),
              "test_questions": sum(1 for q in test_q if by_question.get(q))}
    return EvalSet(name, corpus, queries, qrels, tune, test, note, counts, labels, votes)
