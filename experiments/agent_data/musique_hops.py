"""MuSiQue's sub-question decompositions as agent search steps, one per hop: the one conversion that both the
training traces (:mod:`.training_traces`) and the evaluation set (:func:`.eval_sets.musique`) use.

``subquestion_pairs.jsonl`` rows are ``{qid, hop, question, subquestion, subanswer, positive}``; a later hop's
sub-question refers to an earlier hop's answer as ``#k`` ("Who was the first president of #1 ?").

Decision (issue 26): ``#k`` is **resolved** to hop k's answer, because an agent that has found hop k's answer
writes it into its next query; a ``#k`` token never occurs in real agent queries. Measured on the shared data
(2026-12): 132 of MuSiQue's 237 hops (of the 137 hops after the first) contain ``#k``; of the real agents'
queries, 0 of the 1,963 Tongyi-DeepResearch search queries (``qampari_tongyi/agent_search_steps.jsonl``) and
1 of the 3,070 IRCoT query sentences (``hotpotqa_ircot/cot_steps.jsonl``) hold a ``#<digit>`` token, and that
one is part of a name ("Property Fund #1"), not a reference. (Until then the evaluation set kept the raw
``#k`` sub-question while training resolved it: the model was evaluated on queries no agent writes.)

Each hop becomes a :class:`MusiqueHop`:

* ``query``: the sub-question, ``#k`` replaced by hop k's answer, whitespace collapsed and no space before
  ``? . ,``;
* ``reasoning``: the question, then each earlier hop as ``{resolved sub-question} Answer: {answer}.``, one
  per line; ``current_reasoning``: the last of those lines (the question at hop 1);
* ``prior_queries``: the earlier hops' resolved sub-questions; ``prior_results``: the previous hop's
  paragraph as one ``{"title", "snippet"}`` result (None at hop 1, and when the paragraph is not in the
  corpus: no previous call; the trace and query readers take None and ``[]`` alike);
* ``gold_docid``: the hop's ``positive`` paragraph; step number = the hop; step id ``{qid}_hop{hop}``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from hopscotch.retriever.errors import FormatError
from hopscotch.retriever.io.common import read_jsonl

PAIRS_FILE, CORPUS_FILE = "subquestion_pairs.jsonl", "corpus.jsonl"
PAIR_KEYS = ("qid", "hop", "question", "subquestion", "subanswer", "positive")


@dataclass(frozen=True, slots=True)
class MusiqueHop:
    """One hop of a MuSiQue question as an agent step (the fields :mod:`hopscotch.retriever.io.queries`'s
    context readers and the generic trace format use)."""

    question_id: str
    hop: int
    query: str
    reasoning: str
    current_reasoning: str
    prior_queries: tuple[str, ...]
    prior_results: tuple[dict, ...] | None
    gold_docid: str
    answer: str

    @property
    def step_id(self) -> str:
        return f"{self.question_id}_hop{self.hop}"

    def trace_fields(self) -> dict:
        """The arguments of :func:`hopscotch.data_synth.trace_readers.trace_line` for this hop."""
        return {"question_id": self.question_id, "step": self.hop, "reasoning": self.reasoning, "query": self.query,
                "current_reasoning": self.current_reasoning, "prior_queries": list(self.prior_queries),
                "prior_results": None if self.prior_results is None else list(self.prior_results),
                "gold_docids": [self.gold_docid]}


def resolve(subquestion: str, answers: dict[int, str]) -> str:
    """``Who was the first president of #1 ?`` -> ``... of American Psychological Association?`` (a ``#k``
    whose answer is unknown stays as it is)."""
    text = re.sub(r"#(\d+)", lambda m: answers.get(int(m.group(1)), m.group(0)), subquestion)
    return re.sub(r"\s+([?.,])", r"\1", " ".join(text.split()))


def _question_hops(qid: str, rows: list[dict], corpus: dict[str, dict]) -> list[MusiqueHop]:
    rows = sorted(rows, key=lambda r: int(r["hop"]))
    answers: dict[int, str] = {}
    said = [str(rows[0]["question"]).strip()] if rows else []
    asked: list[str] = []
    previous = None
    out = []
    for row in rows:
        hop, query = int(row["hop"]), resolve(str(row["subquestion"]), answers)
        prior = None
        if previous is not None and previous in corpus:
            doc = corpus[previous]
            prior = ({"title": doc.get("title") or "", "snippet": doc.get("text") or ""},)
        answer = str(row["subanswer"]).strip()
        out.append(MusiqueHop(qid, hop, query, "\n".join(said), said[-1], tuple(asked), prior,
                              str(row["positive"]), answer))
        answers[hop] = answer
        said.append(f"{query} Answer: {answer}.")
        asked.append(query)
        previous = str(row["positive"])
    return out


def musique_steps(root: Path, qids: Iterable[str] | None = None) -> dict[str, list[MusiqueHop]]:
    """``{qid: [hop 1, hop 2, ...]}`` from ``root/subquestion_pairs.jsonl`` (paragraphs from
    ``root/corpus.jsonl``): the questions of ``qids`` in that order (those without hops left out), or every
    question in file order when ``qids`` is None."""
    root = Path(root)
    corpus = {str(d["_id"]): d for _, d in read_jsonl(root / CORPUS_FILE, "a paragraph {_id, title, text}")}
    pairs: dict[str, list[dict]] = {}
    expected = "a hop {qid, hop, question, subquestion, subanswer, positive}"
    for lineno, row in read_jsonl(root / PAIRS_FILE, expected):
        missing = [k for k in PAIR_KEYS if row.get(k) is None]
        if missing or not str(row["hop"]).isdigit():
            raise FormatError(root / PAIRS_FILE, lineno, expected + " with an integer hop",
                              f"missing {missing}" if missing else f"hop {row['hop']!r}")
        pairs.setdefault(str(row["qid"]), []).append(row)
    order = list(pairs) if qids is None else [str(q) for q in qids]
    return {qid: _question_hops(qid, pairs[qid], corpus) for qid in order if pairs.get(qid)}
