"""Training data against evaluation sets: do the training texts hold the benchmark? (``hopscotch audit contamination``)

Every text is compared in :mod:`hopscotch.retriever.text.normal_form`'s normal form (accents stripped, lowercase, punctuation a space).
For each evaluation question (a query record of an :class:`~.eval_sets.EvalSet`) the audit looks for:

* ``exact_question``: a training query equal to it (questions and queries that are not *informative* are
  never matched: fewer than 2 words and 5 characters, or a yes/no-type word such as an agent's "Yes.");
* ``near_question``: a training query whose word 3-gram Jaccard with it is >= ``threshold`` (default 0.8;
  MinHash-LSH over the evaluation questions, 128 permutations, every candidate checked exactly);
* ``contained_question``: its words, when at least :data:`CONTAINED_MIN_WORDS` (8) of them, as a contiguous
  run inside a training query, reasoning or passage (a prompt or page that quotes the question);
* ``shared_evidence``: a training *positive* that is one of its relevant (qrel grade > 0) documents: with the
  set's corpus, the same normal form or word 3-gram Jaccard >= ``threshold`` of title + text (a positive that
  merely shares the docid but not the text is counted apart, as ``docid_collisions``); without a corpus, the
  same docid;
* ``answer_overlap``: one of its answers (``answers`` / ``answer`` / ``answer_aliases``) in a training query or
  positive, at word boundaries, for answers of >= 2 words or >= 5 characters, yes/no-type answers never.
  Reported, but counted toward contamination only with ``count_answers=True``: a multi-word answer such as
  "United States" appears in many passages that say nothing of the question.

A question with any counted kind is *contaminated*; the verdict is ``fail`` when a set's count exceeds
``max_contaminated`` (default 0).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from hopscotch.retriever.audit import minhash as mh
from hopscotch.retriever.audit.eval_sets import EvalSet, TrainingItem
from hopscotch.retriever.audit.report import AuditReport
from hopscotch.retriever.io.corpus import read_corpus
from hopscotch.retriever.text.answers import UNINFORMATIVE_ANSWERS
from hopscotch.retriever.text.normal_form import normalize_text
from hopscotch.retriever.text.shingles import SHINGLE_WORDS, jaccard, shingles

CONTAINED_MIN_WORDS = 8
QUESTION_KINDS = ("exact_question", "near_question", "contained_question")
KINDS = (*QUESTION_KINDS, "shared_evidence", "answer_overlap")
_SHOWN = 160


def informative_answer(norm: str) -> bool:
    """The answer (and question) rule: >= 2 words or >= 5 characters, and not a yes/no-type word."""
    return bool(norm) and norm not in UNINFORMATIVE_ANSWERS and (len(norm.split()) >= 2 or len(norm) >= 5)


def _short(text: str | None) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= _SHOWN else text[:_SHOWN - 1] + "…"


@dataclass(slots=True)
class _Question:
    set_name: str
    qid: str
    text: str
    norm: str
    shingles: frozenset


class _EvalIndex:
    """The evaluation side, indexed: questions (exact, LSH, 3-word anchors), answers, relevant documents."""

    def __init__(self, sets: Sequence[EvalSet], threshold: float):
        self.threshold = threshold
        self.questions: list[_Question] = []
        self.exact: dict[str, list[int]] = {}
        self.lsh = mh.make_lsh(threshold)
        self.anchors: dict[tuple[str, ...], list[int]] = {}
        self.answers: dict[str, list[int]] = {}
        self.by_key: dict[tuple[str, str], int] = {}
        for s in sets:
            for q in s.queries:
                i = len(self.questions)
                norm = normalize_text(q.text)
                item = _Question(s.name, q.qid, q.text, norm, shingles(norm, normalized=True))
                self.questions.append(item)
                self.by_key[(s.name, q.qid)] = i
                for a in {normalize_text(a) for a in s.answers(q)}:
                    if informative_answer(a):
                        self.answers.setdefault(a, []).append(i)
                if not informative_answer(norm):
                    continue
                self.exact.setdefault(norm, []).append(i)
                self.lsh.insert(i, mh.minhash(item.shingles))
                words = norm.split()
                if len(words) >= CONTAINED_MIN_WORDS:
                    self.anchors.setdefault(tuple(words[:3]), []).append(i)
        self.answer_lengths = sorted({len(a.split()) for a in self.answers})
        self.evidence = _EvidenceIndex(sets, self.by_key, threshold)

    def question_hits(self, text: str) -> list[tuple[str, int, float]]:
        """``(kind, question index, jaccard)`` of a training query against every evaluation question."""
        norm = normalize_text(text)
        if not informative_answer(norm):
            return []
        hits = [("exact_question", i, 1.0) for i in self.exact.get(norm, ())]
        same = {i for _, i, _ in hits}
        sh = shingles(norm, normalized=True)
        for i in self.lsh.query(mh.minhash(sh)):
            if i not in same and (j := jaccard(sh, self.questions[i].shingles)) >= self.threshold:
                hits.append(("near_question", i, j))
        return hits

    def contained(self, text: str) -> list[int]:
        """Evaluation questions (of >= CONTAINED_MIN_WORDS words) whose words run contiguously inside ``text``."""
        words = normalize_text(text).split()
        out = []
        for k in range(len(words) - 2):
            for i in self.anchors.get((words[k], words[k + 1], words[k + 2]), ()):
                q = self.questions[i].norm.split()
                if words[k:k + len(q)] == q:
                    out.append(i)
        return out

    def answer_hits(self, text: str) -> list[tuple[int, str]]:
        """``(question index, answer)`` for every informative answer in ``text`` at word boundaries."""
        words = normalize_text(text).split()
        out = []
        for n in self.answer_lengths:
            for k in range(len(words) - n + 1):
                gram = " ".join(words[k:k + n])
                out.extend((i, gram) for i in self.answers.get(gram, ()))
        return out


class _EvidenceIndex:
    """The relevant documents of every set: by docid, and (where the set's corpus holds them) by normal form and
    LSH over their title + text."""

    def __init__(self, sets: Sequence[EvalSet], by_key: dict[tuple[str, str], int], threshold: float):
        self.threshold = threshold
        self.by_docid: dict[str, list[tuple[int, bool]]] = {}   # docid -> [(question, its text is known)]
        self.texts: list[tuple[frozenset, list[int]]] = []        # (shingles, questions) of each relevant doc
        self.exact: dict[int, list[int]] = {}                      # text hash -> indexes into self.texts
        self.lsh = mh.make_lsh(threshold)
        self.missing: dict[str, int] = {}
        for s in sets:
            relevant = s.relevant()
            known: set[str] = set()
            if s.corpus is not None and relevant:
                for doc in read_corpus(s.corpus):
                    if doc.docid not in relevant:
                        continue
                    norm = normalize_text(mh.doc_text(doc.title, doc.text))
                    sh = shingles(norm, normalized=True)
                    if sh:
                        known.add(doc.docid)
                        k = len(self.texts)
                        self.texts.append((sh, [by_key[(s.name, q)] for q in relevant[doc.docid]]))
                        self.exact.setdefault(mh.text_hash(norm, normalized=True), []).append(k)
                        self.lsh.insert(k, mh.minhash(sh))
                self.missing[s.name] = len(relevant) - len(known)
            for docid, qids in relevant.items():
                self.by_docid.setdefault(docid, []).extend((by_key[(s.name, q)], docid in known) for q in qids)

    def hits(self, docid: str, title: str, text: str) -> tuple[list[tuple[int, str, float]], list[int]]:
        """``([(question, "text" | "docid", jaccard)], [questions whose docid matched but whose text did not])``
        of one training passage: by text where the relevant document's text is known, else by docid."""
        norm = normalize_text(mh.doc_text(title, text))
        out: dict[int, tuple[str, float]] = {}
        if self.texts and norm:
            sh = shingles(norm, normalized=True)
            for k in self.exact.get(mh.text_hash(norm, normalized=True), ()):
                out.update(dict.fromkeys(self.texts[k][1], ("text", 1.0)))
            for k in self.lsh.query(mh.minhash(sh)):
                if (j := jaccard(sh, self.texts[k][0])) >= self.threshold:
                    for i in self.texts[k][1]:
                        if j > out.get(i, ("", 0.0))[1]:
                            out[i] = ("text", j)
        collisions = []
        for i, text_known in self.by_docid.get(docid, ()):
            if not text_known:
                out.setdefault(i, ("docid", 1.0))
            elif i not in out:
                collisions.append(i)
        return [(i, how, j) for i, (how, j) in sorted(out.items())], collisions


class ContaminationChecker:
    """Every hit of one training item against the evaluation side (module doc); a text or passage seen before
    is answered from a cache, so cumulative reasoning or a positive shared by many tuples is checked once."""

    def __init__(self, eval_sets: Sequence[EvalSet], threshold: float = mh.DEFAULT_THRESHOLD,
                 count_answers: bool = False):
        self.index = _EvalIndex(eval_sets, threshold)
        self.counted = (*QUESTION_KINDS, "shared_evidence", *(("answer_overlap",) if count_answers else ()))
        self._texts: dict[tuple[bool, int], list[tuple[int, str, dict]]] = {}
        self._passages: dict[tuple[str, int], tuple[list, list[int]]] = {}

    @property
    def distinct_passages(self) -> int:
        return len(self._passages)

    def _text_hits(self, where: str, text: str) -> list[tuple[int, str, dict]]:
        key = (where == "reasoning", mh.text_hash(text))
        if key not in self._texts:
            found = [(i, "contained_question", {}) for i in self.index.contained(text)]
            if where != "reasoning":
                found += [(i, "answer_overlap", {"answer": a}) for i, a in self.index.answer_hits(text)]
            self._texts[key] = found
        return self._texts[key]

    def passage_hits(self, docid: str, title: str, text: str) -> tuple[list[tuple[int, str, float]], list[int]]:
        key = (docid, mh.text_hash(mh.doc_text(title, text)))
        if key not in self._passages:
            self._passages[key] = self.index.evidence.hits(docid, title, text)
        return self._passages[key]

    def hits(self, item: TrainingItem) -> tuple[list[tuple[int, str, str, str, dict]], list[tuple[int, str]]]:
        """``([(question, kind, where, training text, extra)], [(question, docid) of docid collisions])``."""
        out: list[tuple[int, str, str, str, dict]] = []
        if item.query:
            for kind, i, j in self.index.question_hits(item.query):
                out.append((i, kind, "query", item.query, {"jaccard": round(j, 4)}))
        texts = [("query", item.query), ("reasoning", item.reasoning)]
        for where, text in texts + [("passage", mh.doc_text(p[1], p[2])) for p in item.passages]:
            if text:
                out.extend((i, kind, where, text, extra) for i, kind, extra in self._text_hits(where, text))
        clashes: list[tuple[int, str]] = []
        for docid, title, text in item.passages:
            found, collided = self.passage_hits(docid, title, text)
            for i, how, j in found:
                out.append((i, "shared_evidence", "passage", text, {"docid": docid, "match": how,
                                                                   "jaccard": round(j, 4)}))
            clashes.extend((i, docid) for i in collided)
        return out, clashes

    def counted_hits(self, item: TrainingItem) -> list[tuple[int, str]]:
        """``(question, kind)`` of the hits that make ``item`` contaminated (the counted kinds)."""
        return [(i, kind) for i, kind, *_ in self.hits(item)[0] if kind in self.counted]


def audit_contamination(eval_sets: Sequence[EvalSet], training: Iterable[TrainingItem], *,
                        threshold: float = mh.DEFAULT_THRESHOLD, max_contaminated: int = 0,
                        count_answers: bool = False, examples: int = 5, training_label: str = "training data"
                        ) -> AuditReport:
    """Compare ``training`` with ``eval_sets`` (module doc); the report holds per-set counts and examples."""
    checker = ContaminationChecker(eval_sets, threshold, count_answers)
    index = checker.index
    hits: dict[int, dict[str, dict]] = {}      # question -> kind -> first example
    collisions: dict[int, dict] = {}
    n_items = 0
    for item in training:
        n_items += 1
        found, clashes = checker.hits(item)
        for i, kind, where, text, extra in found:
            slot = hits.setdefault(i, {})
            if kind not in slot:
                slot[kind] = {"source": item.source, "train_id": item.item_id, "where": where,
                              "train_text": _short(text), **extra}
        for i, docid in clashes:
            collisions.setdefault(i, {"source": item.source, "train_id": item.item_id, "docid": docid})
    n_passages = checker.distinct_passages
    counted = checker.counted
    per_set, summary = {}, []
    worst = None
    for s in eval_sets:
        idx = [index.by_key[(s.name, q.qid)] for q in s.queries]
        counts = {k: sum(k in hits.get(i, {}) for i in idx) for k in KINDS}
        bad = [i for i in idx if any(k in hits.get(i, {}) for k in counted)]
        shown = {k: [{"qid": index.questions[i].qid, "eval_text": _short(index.questions[i].text), **hits[i][k]}
                     for i in idx if k in hits.get(i, {})][:examples] for k in KINDS}
        per_set[s.name] = {"questions": len(idx), "contaminated": len(bad), "counts": counts,
                           "answers_known": sum(bool(s.answers(q)) for q in s.queries),
                           "relevant_documents": len(s.relevant()), "corpus": s.corpus,
                           "relevant_documents_not_in_corpus": index.evidence.missing.get(s.name),
                           "docid_collisions": sum(i in collisions for i in idx), "examples": shown}
        if bad and (worst is None or len(bad) > per_set[worst[0]]["contaminated"]):
            first = bad[0]
            kind = next(k for k in counted if k in hits[first])
            worst = (s.name, {"qid": index.questions[first].qid, "eval_text": _short(index.questions[first].text),
                              "kind": kind, **hits[first][kind]})
        summary.append(f"{s.name}: {len(bad)} of {len(idx)} questions contaminated (exact {counts['exact_question']}, "
                       f"near {counts['near_question']}, contained {counts['contained_question']}, shared evidence "
                       f"{counts['shared_evidence']}); answer strings in training: {counts['answer_overlap']}"
                       f"{'' if count_answers else ' (not counted)'}")
    fail = any(v["contaminated"] > max_contaminated for v in per_set.values())
    summary.insert(0, f"{training_label}: {n_items:,} items, {n_passages:,} distinct positives/passages, "
                      f"against {len(eval_sets)} evaluation set(s)")
    if worst:
        ex = worst[1]
        summary.append(f"first example ({worst[0]}, {ex['kind']}): eval {ex['qid']} {ex['eval_text']!r} ~ "
                       f"{ex['source']} {ex['train_id']} ({ex['where']}) {ex['train_text']!r}")
    summary.append(f"rule: word 3-gram Jaccard >= {threshold} (MinHash-LSH, 128 perms, checked exactly), questions "
                   f">= {CONTAINED_MIN_WORDS} words contained, answers >= 2 words or >= 5 chars; fail above "
                   f"{max_contaminated} contaminated per set")
    details = {"per_set": per_set, "first_example": worst and {"set": worst[0], **worst[1]},
               "training_items": n_items, "training_passages": n_passages,
               "rule": {"normal_form": "accents stripped, lowercase, non-alphanumerics a space",
                        "shingles": f"word {SHINGLE_WORDS}-grams", "num_perm": mh.NUM_PERM, "seed": mh.SEED,
                        "lsh_bands": list(mh.band_params(threshold)), "threshold": threshold,
                        "contained_min_words": CONTAINED_MIN_WORDS,
                        "answers": ">= 2 words or >= 5 characters, not yes/no", "counted": list(counted),
                        "max_contaminated": max_contaminated}}
    return AuditReport("contamination", "fail" if fail else "ok", summary, details)
