"""False-negative audit: mined hard negatives that are really positives, judged by rules that ignore the oracle.

``hopscotch audit false-negatives`` (:mod:`hopscotch.retriever.commands.audit.false_negatives`). It lives with
DR-Synth, not in ``retriever/audit/``: it reads DR-Synth's stats files and QA datasets, and the retriever below
the CLI never imports ``data_synth``; its report is the audits' :class:`~hopscotch.retriever.audit.report.AuditReport`.

A seeded sample of the hard negatives of each source (a tuple file, or a ``source`` field of its rows) and
oracle (a row's ``oracle`` field, else the ``reranker`` recorded in the file's DR-Synth ``<stem>.stats.json``,
else ``unknown``) is judged by three rules, none of which asks the oracle that labelled them:

* **answer**: the negative (``title text``) contains the question's answer or an alias, normalized and at word
  boundaries (:class:`~hopscotch.retriever.text.answers.AnswerMatcher`, the matcher of DR-Synth's own guard;
  ``yes``/``no`` answers say nothing and are skipped). Answers come from the row's own ``answers`` /
  ``answer`` / ``answer_aliases`` fields, else from the ``--qa`` datasets (:func:`~hopscotch.data_synth.qa.load_qa`)
  by the row's ``question_id``, its ``query_id``, or the longest ``_``-prefix of the query id that is a
  question id (``5a8c..._turn3`` -> ``5a8c...``); a source with no answers is said to have none.
* **near_duplicate**: word 3-gram Jaccard of the negative and a positive (title and text) >= ``near_duplicate``
  (0.8): exact Jaccard of the word 3-grams of the normal form (:mod:`hopscotch.retriever.text.shingles`, the
  shingles and Jaccard of DR-Synth's own guard and of the other audits; a pair with an empty text: 0).
* **closer_to_positive** (with a second model, default the bundled MiniLM): the negative is closer to a
  positive than that positive is to the query, cosine ``sim(neg, pos) > sim(query, pos)`` for some positive
  (query: the tuple's plain query text; passages: ``title text``).

Rules *answer* and *near_duplicate* are evidence that the negative is a positive: their share of the sample is
the **false-negative rate**, and the verdict is ``fail`` above ``max_rate``. Rule *closer_to_positive* is
weaker (a same-topic page can be closer to the positive than a terse query is): its share is the **suspect
rate**, reported beside it, and the verdict is ``warning`` when the rate of any rule exceeds ``max_rate``.

Example::

    report = audit_false_negatives(["out/hotpot_tuples.jsonl"], qa_dirs=["data/hotpotqa_ircot"], sample=300)
    report.details["per_source"]["hotpot"]["rate"]
"""

from __future__ import annotations

import os
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hopscotch.data_synth.pipeline import default_stats_path
from hopscotch.data_synth.qa import _answers_of, load_qa
from hopscotch.retriever.audit.minhash import doc_text
from hopscotch.retriever.audit.report import AuditReport
from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.io.common import read_json, read_jsonl
from hopscotch.retriever.io.tuples import Passage, TrainingTuple, parse_tuple
from hopscotch.retriever.model.dense_encoder import DenseEncoder
from hopscotch.retriever.model.query_template import format_document
from hopscotch.retriever.text.answers import AnswerMatcher
from hopscotch.retriever.text.normal_form import padded_normal_form
from hopscotch.retriever.text.shingles import jaccard, shingles

RULES = ("answer", "near_duplicate", "closer_to_positive")
#: the rules whose hits are counted as false negatives (the third only makes a negative suspect)
STRONG_RULES = ("answer", "near_duplicate")
RULE_TEXT = {
    "answer": "the negative contains an answer string or alias of the question (normalized, word-bounded)",
    "near_duplicate": "word 3-gram Jaccard with a positive >= {near_duplicate:g}",
    "closer_to_positive": "cosine under {model}: sim(negative, positive) > sim(query, positive) for some positive",
}


@dataclass
class Item:
    """One sampled negative and what the rules found."""

    source: str
    oracle: str
    tup: TrainingTuple
    neg: Passage
    answers: list[str]
    hits: list[str] = field(default_factory=list)
    answer_found: str | None = None
    jaccard: float = 0.0
    margin: float | None = None     # max over positives of sim(neg, pos) - sim(query, pos)

    def severity(self) -> tuple:
        return (sum(r in STRONG_RULES for r in self.hits), len(self.hits), self.margin or 0.0, self.jaccard)

    def example(self) -> dict:
        return {"source": self.source, "oracle": self.oracle, "query_id": self.tup.query_id, "query": self.tup.query,
                "rules": list(self.hits), "answer": self.answer_found, "jaccard": round(self.jaccard, 3),
                "margin": None if self.margin is None else round(self.margin, 4),
                "negative": {"docid": self.neg.docid, "title": self.neg.title, "text": _clip(self.neg.text)},
                "positive": {"docid": self.tup.positives[0].docid, "title": self.tup.positives[0].title,
                             "text": _clip(self.tup.positives[0].text)}}


def _clip(text: str, n: int = 240) -> str:
    return text if len(text) <= n else text[:n].rsplit(" ", 1)[0] + " ..."


def source_name(path: str | os.PathLike) -> str:
    """``out/hotpot_tuples.jsonl`` -> ``hotpot`` (the file name without ``.jsonl[.gz]`` and a ``_tuples`` tail)."""
    name = Path(path).name
    for suffix in (".gz", ".jsonl", ".json"):
        name = name.removesuffix(suffix)
    return re.sub(r"[._-]tuples$", "", name) or name


def recorded_oracle(path: str | os.PathLike) -> str | None:
    """The ``reranker`` that DR-Synth recorded in the tuple file's ``<stem>.stats.json``, if there is one."""
    stats = default_stats_path(path)
    if not stats.is_file():
        return None
    data = read_json(stats, "a DR-Synth stats object")
    config = data.get("config") if isinstance(data, dict) else None
    oracle = config.get("reranker") if isinstance(config, dict) else None
    return str(oracle) if oracle else None


def load_answers(qa_dirs: Sequence[str | os.PathLike]) -> dict[str, list[str]]:
    """``{question id: answers}`` of every ``--qa`` dataset (later datasets win on a shared id)."""
    out: dict[str, list[str]] = {}
    for qa_dir in qa_dirs:
        out.update({qid: q.answers for qid, q in load_qa(qa_dir).questions.items()})
    return out


def question_of(obj: dict, query_id: str, known: dict) -> str | None:
    """The question id of a tuple row: its ``question_id``, its query id, or the longest ``_``-prefix of the query
    id that ``known`` holds."""
    if obj.get("question_id") is not None:
        return str(obj["question_id"])
    if query_id in known:
        return query_id
    parts = query_id.split("_")
    for cut in range(len(parts) - 1, 0, -1):
        if (head := "_".join(parts[:cut])) in known:
            return head
    return None


def _row_answers(obj: dict, path, lineno) -> list[str]:
    return _answers_of(obj, path, lineno)


def _files(paths: Sequence[str | os.PathLike]) -> list[Path]:
    out = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(f for f in p.iterdir() if f.name.endswith((".jsonl", ".jsonl.gz")))
            if not found:
                raise UsageError(f"--tuples {p}: a folder without *.jsonl files")
            out += found
        elif p.is_file():
            out.append(p)
        else:
            raise UsageError(f"--tuples {p}: no such file or folder")
    return out


def sample_negatives(paths: Sequence[str | os.PathLike], answers: dict[str, list[str]], sample: int, seed: int
                     ) -> tuple[list[Item], dict[tuple[str, str], dict]]:
    """A seeded reservoir sample of at most ``sample`` negatives per (source, oracle), streamed from the tuple
    files, and per group ``{tuples, negatives, with_answers}`` counted over the whole files."""
    reservoirs: dict[tuple[str, str], list[Item]] = {}
    counts: dict[tuple[str, str], dict] = {}
    rngs: dict[tuple[str, str], random.Random] = {}
    for path in _files(paths):
        default_oracle = recorded_oracle(path) or "unknown"
        for lineno, obj in read_jsonl(path, "a training tuple object"):
            tup = parse_tuple(obj, path, lineno)
            key = (str(obj.get("source") or source_name(path)), str(obj.get("oracle") or default_oracle))
            own = _row_answers(obj, path, lineno)
            qid = question_of(obj, tup.query_id, answers)
            row_answers = own or (answers.get(qid, []) if qid is not None else [])
            c = counts.setdefault(key, {"tuples": 0, "negatives": 0, "tuples_with_answers": 0})
            c["tuples"] += 1
            c["tuples_with_answers"] += bool(AnswerMatcher(row_answers))
            pool = reservoirs.setdefault(key, [])
            rng = rngs.setdefault(key, random.Random(f"{seed}:{key[0]}:{key[1]}"))
            for neg in tup.negatives:
                c["negatives"] += 1
                item = Item(key[0], key[1], tup, neg, row_answers)
                if len(pool) < sample:
                    pool.append(item)
                elif (j := rng.randrange(c["negatives"])) < sample:
                    pool[j] = item
    if not counts:
        raise UsageError(f"--tuples {', '.join(map(str, paths))}: no training tuples")
    return [item for pool in reservoirs.values() for item in pool], counts


def judge_cheap(items: Sequence[Item], near_duplicate: float = 0.8) -> None:
    """Rules *answer* and *near_duplicate* (no model)."""
    for item in items:
        text = f"{item.neg.title} {item.neg.text}"
        matcher = AnswerMatcher(item.answers)
        if matcher:
            padded = padded_normal_form(text)
            found = next((a for a in matcher.answers if f" {a} " in padded), None)
            if found is not None:
                item.hits.append("answer")
                item.answer_found = found
        mine = shingles(doc_text(item.neg.title, item.neg.text))
        item.jaccard = max(jaccard(mine, shingles(doc_text(p.title, p.text))) for p in item.tup.positives)
        if item.jaccard >= near_duplicate:
            item.hits.append("near_duplicate")


def judge_model(items: Sequence[Item], encode: Callable[[list[str]], object]) -> None:
    """Rule *closer_to_positive*: ``encode(texts)`` returns L2-normalized rows (cosine = dot product)."""
    if not items:
        return
    texts: dict[str, int] = {}

    def slot(text: str) -> int:
        return texts.setdefault(text, len(texts))

    rows = [(slot(i.tup.query), slot(format_document(i.neg.title, i.neg.text)),
             [slot(format_document(p.title, p.text)) for p in i.tup.positives]) for i in items]
    emb = np.asarray(encode(list(texts)), dtype=np.float32)
    for item, (q, n, ps) in zip(items, rows):
        item.margin = max(float(emb[n] @ emb[p] - emb[q] @ emb[p]) for p in ps)
        if item.margin > 0:
            item.hits.append("closer_to_positive")


def model_encoder(model: str) -> Callable[[list[str]], object]:
    """``texts -> normalized embeddings`` of a sentence-transformers model (``minilm``: the bundled one)."""
    encoder = DenseEncoder(model, max_length=256)
    return encoder.encode_texts


def _rates(items: Sequence[Item], counts: dict, with_model: bool) -> dict:
    n = len(items)
    per_rule = {r: sum(r in i.hits for i in items) for r in RULES if with_model or r != "closer_to_positive"}
    strong = sum(any(r in STRONG_RULES for r in i.hits) for i in items)
    any_rule = sum(bool(i.hits) for i in items)
    return {**counts, "sampled": n, "flagged": per_rule, "false_negatives": strong,
            "rate": round(strong / n, 4) if n else 0.0,
            "suspect_rate": round(sum("closer_to_positive" in i.hits for i in items) / n, 4) if n and with_model else None,
            "any_rule_rate": round(any_rule / n, 4) if n else 0.0,
            "answers_checked": sum(bool(AnswerMatcher(i.answers)) for i in items)}


def audit_false_negatives(tuples: Sequence[str | os.PathLike], qa_dirs: Sequence[str | os.PathLike] = (),
                          sample: int = 300, seed: int = 13, model: str | None = "minilm",
                          near_duplicate: float = 0.8, max_rate: float = 0.1, examples: int = 5,
                          encode: Callable[[list[str]], object] | None = None) -> AuditReport:
    """Sample, judge and report (see the module doc). ``model=None`` skips the second-model rule;
    ``encode`` replaces the model (a ``texts -> normalized rows`` function, e.g. in tests)."""
    if sample < 1:
        raise UsageError("--sample must be at least 1")
    if not 0 < near_duplicate <= 1 or not 0 <= max_rate <= 1:
        raise UsageError("--near-duplicate must be in (0, 1] and --max-rate in [0, 1]")
    answers = load_answers(qa_dirs)
    items, counts = sample_negatives(tuples, answers, sample, seed)
    judge_cheap(items, near_duplicate)
    with_model = encode is not None or model is not None
    if with_model:
        judge_model(items, encode or model_encoder(model))
    groups: dict[str, dict[str, list[Item]]] = {"per_source": {}, "per_oracle": {}}
    for item in items:
        groups["per_source"].setdefault(item.source, []).append(item)
        groups["per_oracle"].setdefault(item.oracle, []).append(item)

    def summed(keys) -> dict:
        total = {"tuples": 0, "negatives": 0, "tuples_with_answers": 0}
        for key in keys:
            for name in total:
                total[name] += counts[key][name]
        return total

    per = {kind: {name: _rates(group, summed(k for k in counts if k[0 if kind == "per_source" else 1] == name),
                               with_model)
                  for name, group in sorted(by.items())} for kind, by in groups.items()}
    overall = _rates(items, summed(counts), with_model)
    worst = sorted((i for i in items if i.hits), key=lambda i: i.severity(), reverse=True)
    per_source_examples = {name: [i.example() for i in sorted((i for i in group if i.hits), key=lambda i: i.severity(),
                                                              reverse=True)[:examples]]
                           for name, group in sorted(groups["per_source"].items())}
    model_name = "a given encoder" if encode is not None else model
    rules = {r: RULE_TEXT[r].format(near_duplicate=near_duplicate, model=model_name) for r in RULES
             if with_model or r != "closer_to_positive"}
    verdict = "ok"
    if any(v["rate"] > max_rate for v in per["per_source"].values()) or overall["rate"] > max_rate:
        verdict = "fail"
    elif any(v["any_rule_rate"] > max_rate for v in per["per_source"].values()):
        verdict = "warning"
    summary = [(f"{len(items):,} negatives sampled (at most {sample} per source and oracle, seed {seed}) from "
                f"{overall['negatives']:,} in {overall['tuples']:,} tuples; max rate {max_rate:g}"),
               "false negative = answer-bearing or near-duplicate of a positive"
               + (f"; suspect = closer to the positive than the query is under {model_name}" if with_model else
                  "; no second model (--model none)")]
    summary += [f"{'source':<16}{'oracle':<12}{'sampled':>8}{'answer':>8}{'near-dup':>9}"
                + (f"{'closer':>8}" if with_model else "") + f"{'FN rate':>9}" + (f"{'suspect':>9}" if with_model else "")]
    for name, row in per["per_source"].items():
        oracles = ",".join(sorted({k[1] for k in counts if k[0] == name}))
        line = (f"{name[:15]:<16}{oracles[:11]:<12}{row['sampled']:>8}{row['flagged']['answer']:>8}"
                f"{row['flagged']['near_duplicate']:>9}")
        if with_model:
            line += f"{row['flagged']['closer_to_positive']:>8}"
        line += f"{row['rate']:>9.1%}" + (f"{row['suspect_rate']:>9.1%}" if with_model else "")
        if not row["answers_checked"]:
            line += "  (no answers: rule 'answer' not applied)"
        summary.append(line)
    if worst:
        w = worst[0]
        summary.append(f"worst: {w.source} {w.tup.query_id} negative {w.neg.docid} ({', '.join(w.hits)}"
                       + (f"; answer {w.answer_found!r}" if w.answer_found else "")
                       + f"; Jaccard {w.jaccard:.2f})")
    if verdict == "fail":
        summary.append(f"FAIL: a false-negative rate above {max_rate:g}: these negatives are positives; filter them")
    elif verdict == "warning":
        summary.append(f"WARNING: more than {max_rate:g} of some source's negatives break a rule (suspects included)")
    details = {"settings": {"tuples": [str(p) for p in tuples], "qa": [str(p) for p in qa_dirs], "sample": sample,
                            "seed": seed, "model": model_name if with_model else None,
                            "near_duplicate": near_duplicate, "max_rate": max_rate},
               "rules": rules, "overall": overall, **per,
               "worst_examples": [i.example() for i in worst[:examples]], "examples_per_source": per_source_examples}
    return AuditReport("false-negatives", verdict, summary, details)
