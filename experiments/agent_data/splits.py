"""Train / held-out splits of whole questions for the agent-retrieval experiments (issue 9).

One definition, used by ``scripts/train_agent_retriever.sh`` (training never sees a held-out question),
:mod:`hopscotch_experiments.agent_data.training_traces` and
:mod:`hopscotch_experiments.agent_data.eval_sets` (evaluation
on held-out questions only). File order is the order of each source's questions file; nothing is shuffled,
so the split is the same on every machine.

* ``hotpotqa_ircot``: questions 1-380 train, 381-400 dev (tuning), 401-500 test (as scripts/train_quality.py).
* ``musique_hipporag``: questions 1-50 train, 51-70 dev, 71-100 test.
* ``qampari_tongyi``: the 20 trajectories of ``agent_search_steps.jsonl`` by numeric query_id: the first
  9 train (less :data:`TRAIN_EXCLUDED`), the next 4 dev, the last 7 test (the long-reasoning set).
* the embedded world (:data:`WORLD`: seed 13, 3,000 documents, 300 questions, as the demo): 220 train,
  20 dev, 60 test; the long-reasoning world (:data:`WORLD_LONG`, seed 29) is never trained on: its first 100
  questions tune, the other 200 test.

Dev questions tune every default chosen from data (query input, late fusion, fusion, ``train.wise_ft_alpha``)
and are never trained on: a tune slice the model has seen rewards memorising it (until 2026-12-01 the dev
questions of MuSiQue, the Tongyi trajectories and the world were the last train questions).

:data:`TRAIN_EXCLUDED` leaves out of ``train`` the questions whose trajectories duplicate a held-out one
(found by ``hopscotch audit``'s contamination check); dev and test are never changed by it.

No BrowseComp-Plus or cmass query, qrel, trajectory or document is used anywhere (they are test sets).
"""

from __future__ import annotations

import os
from pathlib import Path

from hopscotch.retriever.errors import FormatError
from hopscotch.retriever.io.common import first_key, read_jsonl

#: the repository root (the folder holding ``experiments/``)
ROOT = Path(__file__).resolve().parents[2]
WORLD = {"seed": 13, "docs": 3000, "questions": 300, "train": 220, "dev": 20}   # test: the rest
WORLD_LONG = {"seed": 29, "docs": 3000, "questions": 300, "tune": 100}        # test: the other 200 questions

#: train question ids left out of ``splits(source)["train"]``, with the reason
TRAIN_EXCLUDED = {
    "qampari_tongyi": {
        "5": "same Seattle Storm draft lists as dev trajectory 13: the two trajectories issue the same searches "
             "over the same pages (hopscotch audit contamination, 2026-12-02)",
    },
}


def data_dir() -> Path:
    """``$HOPSCOTCH_DATA``, else ``../shared/data`` beside the repository."""
    return Path(os.environ.get("HOPSCOTCH_DATA", ROOT.parent / "shared" / "data"))


def _ids(path: Path, keys: tuple[str, ...], expected: str) -> list[str]:
    """The first of ``keys`` of every record of ``path``, in file order (a record without one: FormatError)."""
    out = []
    for lineno, obj in read_jsonl(path, expected):
        value = first_key(obj, keys)
        if value is None:
            raise FormatError(path, lineno, expected, f"keys {sorted(obj)[:10]}")
        out.append(str(value))
    return out


def _question_ids(path: Path) -> list[str]:
    return _ids(path, ("_id", "qid"), "a question {_id, text}")


def _tongyi_ids() -> list[str]:
    path = data_dir() / "qampari_tongyi" / "agent_search_steps.jsonl"
    ids = set(_ids(path, ("query_id",), "a Tongyi search step {query_id, ...}"))
    return sorted(ids, key=lambda q: int(q) if q.isdigit() else q)


def _splits(source: str) -> dict[str, list[str]]:
    if source == "hotpotqa_ircot":
        ids = _question_ids(data_dir() / source / "queries.jsonl")
        return {"train": ids[:380], "dev": ids[380:400], "test": ids[400:500]}
    if source == "musique_hipporag":
        ids = _question_ids(data_dir() / source / "queries.jsonl")
        return {"train": ids[:50], "dev": ids[50:70], "test": ids[70:]}
    if source == "qampari_tongyi":
        ids = _tongyi_ids()
        return {"train": ids[:9], "dev": ids[9:13], "test": ids[13:]}
    raise ValueError(f"unknown source {source!r}; the world's split is WORLD's train / dev counts in question order")


def splits(source: str) -> dict[str, list[str]]:
    """``{"train": [...], "dev": [...], "test": [...]}`` question ids of ``source``; ``train`` without the
    ids :data:`TRAIN_EXCLUDED` names."""
    out = _splits(source)
    excluded = TRAIN_EXCLUDED.get(source, {})
    out["train"] = [q for q in out["train"] if q not in excluded]
    return out
