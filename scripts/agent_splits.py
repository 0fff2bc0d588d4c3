"""Train / held-out splits of whole questions for the agent-retrieval experiments (issue 9).

One definition, used by ``scripts/train_agent_retriever.sh`` (training never sees a held-out question)
and ``scripts/agent_ablation.py`` (evaluates on held-out questions only). File order is the order of
each source's questions file; nothing is shuffled, so the split is the same on every machine.

* ``hotpotqa_ircot``: questions 1-380 train, 381-400 dev (tuning), 401-500 test (as scripts/train_quality.py).
* ``musique_hipporag``: questions 1-50 train, 51-70 dev, 71-100 test.
* ``qampari_tongyi``: the 20 trajectories of ``agent_search_steps.jsonl`` by numeric query_id: the first
  9 train, the next 4 dev, the last 7 test (the long-reasoning set).
* the embedded world (seed 13, 3,000 documents, 300 questions, as the demo): 220 train, 20 dev, 60 test.

Dev questions tune every default chosen from data (query input, late fusion, fusion, ``train.wise_ft_alpha``)
and are never trained on: a tune slice the model has seen rewards memorising it (until 2026-12-01 the dev
questions of MuSiQue, the Tongyi trajectories and the world were the last train questions).

No BrowseComp-Plus or cmass query, qrel, trajectory or document is used anywhere (they are test sets).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORLD = {"seed": 13, "docs": 3000, "questions": 300, "train": 220, "dev": 20}   # test: the rest


def data_dir() -> Path:
    return Path(os.environ.get("HOPSCOTCH_DATA", ROOT.parent / "shared" / "data"))


def _question_ids(path: Path) -> list[str]:
    ids = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            obj = json.loads(line)
            ids.append(str(obj.get("_id", obj.get("qid"))))
    return ids


def _tongyi_ids() -> list[str]:
    path = data_dir() / "qampari_tongyi" / "agent_search_steps.jsonl"
    ids = {json.loads(line)["query_id"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()}
    return sorted(ids, key=lambda q: int(q) if q.isdigit() else q)


def splits(source: str) -> dict[str, list[str]]:
    """``{"train": [...], "dev": [...], "test": [...]}`` question ids of ``source``."""
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


if __name__ == "__main__":
    for name in ("hotpotqa_ircot", "musique_hipporag", "qampari_tongyi"):
        print(name, {k: len(v) for k, v in splits(name).items()})
