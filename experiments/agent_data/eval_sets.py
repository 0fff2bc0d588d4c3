"""The evaluation sets of the agent-retrieval ablation (``scripts/agent_ablation.py``), held-out questions only.

Each builder returns an :class:`EvalSet`: a corpus, and search steps as query records (``_id``, ``text``
and the context fields the query input variants read: ``reasoning``, ``current_reasoning``,
``prior_queries``, ``prior_results``) with qrels, split into ``test`` (held-out questions of
:mod:`.splits`) and ``tune`` (its dev questions, never trained on) by whole questions. Steps come from the
project's trace readers (:func:`hopscotch.data_synth.traces.read_traces`) wherever the source is an agent
trace. Driver: ``python scripts/agent_eval_sets.py`` prints each set's counts and first test query.

* ``hotpotqa``: IRCoT steps (query = the new sentence, reasoning = the chain of thought before it) vs the
  full 4,858-paragraph corpus; relevant = the question's two gold paragraphs. Tune: dev questions 381-400.
* ``musique``: one step per hop, converted by :mod:`.musique_hops` as the training traces are (query = the
  sub-question with ``#k`` resolved to hop k's answer, reasoning = the question and the earlier hops with
  their answers, prior results = the previous hop's paragraph) vs the 1,890-paragraph corpus; relevant =
  the hop's paragraph. Tune: dev questions 51-70.
* ``world``: the embedded world (seed 13, 3,000 docs, 300 questions, as ``hopscotch demo``): trace steps
  of the last 60 questions, relevant = each step's gold documents. Tune: dev questions 221-240.
* ``world_long``: a world no model trained on (seed 29, 3,000 docs, 300 questions) in long mode (``hopscotch
  world --long-reasoning``): 300-3,000 words of agent thinking per step, keyword-style queries, multi-section
  pages; relevant = each step's gold documents (exact from the graph). Tune: questions 1-100; test: 101-300.
* ``tongyi_utility``: the ``tongyi`` calls with UTILITY labels (``hopscotch.data_synth.utility_labels``): a
  returned document is relevant when the agent later used it (its distinctive content newly appears in the next
  steps' reasoning or the final answer); no retriever's ranking decides. Same splits as ``tongyi``.
* ``tongyi_pages``: the ``tongyi`` calls against *pages*: each Wikipedia article's chunks in
  ``doc_snippets.jsonl`` joined in chunk order into one document (1,597 pages, up to 2,550 words; the
  long-document analogue of web pages), relevant = the pages of the call's pseudo-qrel chunks.
* ``tongyi``: Tongyi-DeepResearch search calls of the 7 held-out trajectories, reasoning = all the
  thinking so far (long), corpus = ``doc_snippets.jsonl``; relevant = **pseudo-qrels**: the documents the
  agent's own retriever returned for that call (distillation-style), only calls that returned documents.
  Tune: the 4 dev trajectories (10-13).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

from hopscotch_experiments.agent_data.musique_hops import musique_steps
from hopscotch_experiments.agent_data.splits import WORLD, WORLD_LONG, data_dir, splits
from hopscotch.retriever.io.common import atomic_write, read_jsonl, write_jsonl
from hopscotch.retriever.io.queries import context_dict

SET_NAMES = ("hotpotqa", "musique", "world", "world_long", "tongyi_question", "tongyi_pages_question",
             "tongyi_utility", "tongyi", "tongyi_pages")
TITLES = {"hotpotqa": "HotpotQA IRCoT steps", "musique": "MuSiQue hops", "world": "world steps",
          "world_long": "world, long reasoning and pages", "tongyi_question": "Tongyi, question-level labels",
          "tongyi_pages_question": "Tongyi pages, question-level labels",
          "tongyi_utility": "Tongyi, call-level utility labels (biased)",
          "tongyi": "Tongyi long reasoning (pseudo-qrels)", "tongyi_pages": "Tongyi, long pages (pseudo-qrels)"}
LABELS = {"hotpotqa": "gold supporting paragraphs (HotpotQA annotators)",
          "musique": "the hop's gold paragraph (MuSiQue annotators)",
          "world": "exact gold documents from the generator's graph",
          "world_long": "exact gold documents from the generator's graph",
          "tongyi_question": "QUESTION-LEVEL: every document any run of the question used anywhere in its trajectory "
                             "(data_synth/utility_labels.py: question_qrels), whatever the call returned",
          "tongyi_pages_question": "QUESTION-LEVEL, pages: the pages of the question's used chunks",
          "tongyi_utility": "CALL-LEVEL utility: documents THIS call's query-only retriever returned and the agent "
                            "later used (bounded by that retriever: a documented example of the bias)",
          "tongyi": "PSEUDO-QRELS: every document the agent's own query-only retriever returned",
          "tongyi_pages": "PSEUDO-QRELS: the pages of the agent's own query-only retriever's results"}
#: sets whose labels the call's own query-only retriever bounds (pseudo-qrels, call-level utility): they punish
#: every use of the reasoning by construction and vote on no default
CALL_LEVEL = {"tongyi", "tongyi_pages", "tongyi_utility"}
#: what bounds each set's labels or its pool (the pool bias cannot be removed, only named): the ablation header
BOUNDS = {
    "hotpotqa": "labels: none (annotators); pool: HotpotQA's distractor paragraphs (its bigram TF-IDF retriever)",
    "musique": "labels: none (annotators); pool: MuSiQue's retrieved distractor paragraphs",
    "world": "labels: none (the generator's graph); pool: the whole generated corpus",
    "world_long": "labels: none (the generator's graph); pool: the whole generated corpus",
    "tongyi_question": "labels: not the call's retriever (question-level); pool: what the Tongyi runs' three "
                       "query-only dense retrievers (qwen3-0.6b, infly, contriever) returned to any call",
    "tongyi_pages_question": "as tongyi_question, at page level (pool: the pages of those chunks)",
    "tongyi_utility": "labels: BOUNDED by the call's own query-only retriever (only what it returned can be "
                      "relevant); pool: as tongyi_question",
    "tongyi": "labels: ARE the call's query-only retriever's output (pseudo-qrels)",
    "tongyi_pages": "labels: ARE the call's query-only retriever's output, at page level (pseudo-qrels)",
}
#: sets searched over another set's corpus share its index
INDEX_NAMES = {"tongyi_utility": "tongyi", "tongyi_question": "tongyi", "tongyi_pages_question": "tongyi_pages"}


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


def step_record(qid: str, step) -> dict:
    """A query record of a trace step (or Query, or MuSiQue hop): its query, reasoning and other context fields."""
    row = {"_id": qid, "text": step.query if hasattr(step, "query") else step.text,
           "reasoning": step.reasoning or None}
    row.update(context_dict(step))
    return row


def _finish(name: str, corpus: Path, by_question: dict[str, list[tuple[dict, dict]]], tune_q, test_q,
            note: str) -> EvalSet:
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
    return EvalSet(name, corpus, queries, qrels, tune, test, note, counts, LABELS.get(name, ""), name not in CALL_LEVEL)


def hotpotqa() -> EvalSet:
    from hopscotch.data_synth.traces import read_traces
    from hopscotch.retriever.io.qrels import read_qrels

    src = data_dir() / "hotpotqa_ircot"
    gold = read_qrels(src / "qrels.tsv")
    by_question: dict[str, list] = {}
    for step in read_traces([src / "cot_steps.jsonl"], "ircot"):
        row = step_record(step.query_id, step)
        by_question.setdefault(step.question_id, []).append((row, dict(gold.get(step.question_id, {}))))
    s = splits("hotpotqa_ircot")
    return _finish("hotpotqa", src / "corpus.jsonl", by_question, s["dev"], s["test"],
                   "IRCoT steps of questions 401-500 vs the full corpus; qrels: the question's gold paragraphs; "
                   "tuned on dev questions 381-400")


def musique() -> EvalSet:
    src = data_dir() / "musique_hipporag"
    s = splits("musique_hipporag")
    hops = musique_steps(src, s["dev"] + s["test"])
    by_question = {qid: [(step_record(h.step_id, h), {h.gold_docid: 1}) for h in steps] for qid, steps in hops.items()}
    return _finish("musique", src / "corpus.jsonl", by_question, s["dev"], s["test"],
                   "one step per hop of questions 71-100 (query: sub-question with #k resolved to hop k's answer; "
                   "reasoning: the question and the earlier hops with their answers); qrels: the hop's paragraph; "
                   "tuned on dev questions 51-70")


def _world_steps(folder: Path) -> tuple[list[str], dict[str, list]]:
    """The question ids of a written world, and its trace steps as (query record, qrels) per question."""
    from hopscotch.data_synth.traces import read_traces
    from hopscotch.retriever.io.queries import read_queries

    qids = [q.qid for q in read_queries(folder / "queries.jsonl")]
    by_question: dict[str, list] = {}
    for step in read_traces([folder / "traces.jsonl"], "world"):
        row = step_record(step.query_id, step)
        by_question.setdefault(step.question_id, []).append((row, {d: 1 for d in step.gold_docids or ()}))
    return qids, by_question


def world(work: Path) -> EvalSet:
    from hopscotch.data_synth.world import build_world, write_world

    folder = Path(work) / "world"
    if not (folder / "world.json").is_file():
        write_world(build_world(seed=WORLD["seed"], docs=WORLD["docs"], questions=WORLD["questions"]), folder)
    qids, by_question = _world_steps(folder)
    n = WORLD["train"] + WORLD["dev"]
    return _finish("world", folder / "corpus.jsonl", by_question, qids[WORLD["train"]:n], qids[n:],
                   f"world seed {WORLD['seed']}, {WORLD['docs']} docs, {WORLD['questions']} questions: trace steps "
                   f"of the last {len(qids) - n} questions; qrels: each step's gold documents; tuned on dev "
                   f"questions {WORLD['train'] + 1}-{n}")


def tongyi() -> EvalSet:
    from hopscotch.data_synth.traces import read_traces

    src = data_dir() / "qampari_tongyi"
    path = src / "agent_search_steps.jsonl"
    rows = dict(read_jsonl(path, "a Tongyi search step"))
    by_question: dict[str, list] = {}
    for step in read_traces([path], "tongyi"):
        raw = rows[int(step.source.rsplit(":", 1)[1])]
        docids = raw.get("retrieved_docids")
        if step.failed or not isinstance(docids, list) or not docids:
            continue
        row = step_record(step.query_id, step)
        by_question.setdefault(step.question_id, []).append((row, {str(d): 1 for d in docids}))
    s = splits("qampari_tongyi")
    return _finish("tongyi", src / "doc_snippets.jsonl", by_question, s["dev"], s["test"],
                   "PSEUDO-QRELS: relevant = the documents the agent's own retriever returned for the call "
                   "(distillation-style labels, not human judgements); search calls of the 7 held-out "
                   "trajectories that returned documents, reasoning = all the thinking so far; tuned on the "
                   "4 dev trajectories")


def tongyi_pages(work: Path) -> EvalSet:
    """The ``tongyi`` calls against pages rebuilt from the chunks (``<article>__<chunk>`` ids), written to
    ``work/tongyi_pages/corpus.jsonl`` (derived from shared data; never copied into the project)."""
    chunks = tongyi()
    parts: dict[str, list[tuple[int, str]]] = {}
    for _, row in read_jsonl(data_dir() / "qampari_tongyi" / "doc_snippets.jsonl", "a snippet {docid, text}"):
        article, _, index = str(row["docid"]).partition("__")
        text = row["text"]
        if text.startswith("[") and "\n" in text:  # "[preview...]\n" header, then the chunk (title first)
            text = text.split("\n", 1)[1]
        parts.setdefault(article, []).append((int(index or 0), text))
    corpus = Path(work) / "tongyi_pages" / "corpus.jsonl"
    if not corpus.is_file():
        corpus.parent.mkdir(parents=True, exist_ok=True)
        write_jsonl(corpus, [{"_id": a, "title": "", "text": "\n".join(t for _, t in sorted(p))}
                             for a, p in parts.items()])
    qrels = {q: {d.partition("__")[0]: 1 for d in rel} for q, rel in chunks.qrels.items()}
    note = ("PSEUDO-QRELS as `tongyi`, at page level: the same calls against 1,597 pages, each an article's "
            "chunks joined in order (median 96 words, 262 pages over 160 words, the longest 2,550); relevant = "
            "the pages holding the call's pseudo-qrel chunks")
    return EvalSet("tongyi_pages", corpus, chunks.queries, qrels, chunks.tune, chunks.test, note, chunks.counts,
                   LABELS["tongyi_pages"], False)


def world_long(work: Path) -> EvalSet:
    """A world never trained on (seed 29), in long mode (``hopscotch world --long-reasoning``, built here the
    way that command builds it, with the same files): agent thinking of 300-3,000 words around keyword-style
    queries, web-page-like documents of several sections; qrels: each step's gold documents, exact from the
    graph. Tune: the first 100 questions; test: the other 200."""
    from hopscotch.data_synth.world import build_long_world, write_world

    folder = Path(work) / "world_long"
    if not (folder / "world.json").is_file():
        write_world(build_long_world(seed=WORLD_LONG["seed"], docs=WORLD_LONG["docs"],
                                     questions=WORLD_LONG["questions"]), folder)
    qids, by_question = _world_steps(folder)
    n = WORLD_LONG["tune"]
    return _finish("world_long", folder / "corpus.jsonl", by_question, qids[:n], qids[n:],
                   f"`hopscotch world --long-reasoning --seed {WORLD_LONG['seed']} --docs {WORLD_LONG['docs']} "
                   f"--questions {WORLD_LONG['questions']}` (a world no model trained on): agent thinking of 300-3,000 "
                   "words (restated constraints, look-alike hypotheses, pages as read, dead ends) around keyword-style "
                   f"queries, multi-section pages (median ~600 words); qrels: each step's gold documents, exact from "
                   f"the graph; tuned on questions 1-{n}, tested on {n + 1}-{WORLD_LONG['questions']}")


def tongyi_utility() -> EvalSet:
    """The ``tongyi`` calls relabelled by use (:func:`hopscotch.data_synth.utility_labels.utility_qrels`): a
    returned document is relevant when the agent's later reasoning or final answer newly names its distinctive
    content (or cites its id); calls with no used document are dropped. Same splits and corpus as ``tongyi``."""
    chunks = tongyi()
    qrels, _ = _usage_labels(str(data_dir() / "qampari_tongyi"))
    keep = {q for q in chunks.qrels if qrels.get(q)}
    tune, test = [q for q in chunks.tune if q in keep], [q for q in chunks.test if q in keep]
    queries = [row for row in chunks.queries if row["_id"] in keep]
    note = ("UTILITY LABELS: the `tongyi` calls (all the thinking so far as reasoning, chunk corpus), relevant = the "
            "returned documents whose distinctive names, rare words or numbers the agent newly wrote in its next 3 "
            "steps' reasoning or its final answer, or whose id it cited (rule: data_synth/utility_labels.py; hand "
            "audit 26/30: docs/utility_labels_audit.md); only calls with a used document")
    counts = {"tune_steps": len(tune), "test_steps": len(test)}
    return EvalSet("tongyi_utility", chunks.corpus, queries, {q: qrels[q] for q in chunks.qrels if q in keep}, tune, test, note, counts,
                   LABELS["tongyi_utility"], False, INDEX_NAMES["tongyi_utility"])


@functools.lru_cache(maxsize=2)
def _usage_labels(src: str) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, int]]]:
    """``(call-level, question-level)`` usage labels of the Tongyi steps under ``src``: the usage rule runs once a
    process for the three sets built from it (``tongyi_utility`` and the two question-level ones)."""
    from hopscotch.data_synth.utility_labels import questions_of, utility_qrels

    folder = Path(src)
    steps = folder / "agent_search_steps.jsonl"
    calls, _ = utility_qrels(steps, folder / "doc_snippets.jsonl", folder / "runs" / "infly.jsonl")
    return calls, questions_of(calls, steps)


def _question_level(chunks: EvalSet) -> tuple[dict[str, dict[str, int]], list[str], list[str], list[dict]]:
    """The ``tongyi`` calls relabelled with their question's used documents (``question_qrels``): qrels, tune and
    test call ids and query records (calls of a question with no used document are dropped)."""
    from hopscotch.data_synth.traces import read_traces

    src = data_dir() / "qampari_tongyi"
    _, by_question = _usage_labels(str(src))
    question_of = {s.query_id: s.question_id for s in read_traces([src / "agent_search_steps.jsonl"], "tongyi")}
    qrels = {q: dict(by_question[question_of[q]]) for q in chunks.qrels if by_question.get(question_of[q])}
    tune, test = [q for q in chunks.tune if q in qrels], [q for q in chunks.test if q in qrels]
    return qrels, tune, test, [row for row in chunks.queries if row["_id"] in qrels]


def tongyi_question() -> EvalSet:
    """The ``tongyi`` calls (same calls, same corpus) with QUESTION-LEVEL labels: relevant = every document that
    any run of the question used anywhere in its trajectory (:func:`hopscotch.data_synth.utility_labels.
    question_qrels`), never restricted to what the call returned."""
    chunks = tongyi()
    qrels, tune, test, queries = _question_level(chunks)
    note = ("QUESTION-LEVEL LABELS: the `tongyi` calls (all the thinking so far as reasoning, chunk corpus), relevant "
            "= every chunk that any of the question's runs used anywhere in its trajectory (the usage rule of "
            "data_synth/utility_labels.py, unioned over the question: question_qrels; hand audit in "
            "docs/utility_labels_audit.md), whatever this call returned; pool: the chunks the three query-only "
            "retrievers returned to any call")
    return EvalSet("tongyi_question", chunks.corpus, queries, qrels, tune, test, note,
                   {"tune_steps": len(tune), "test_steps": len(test)}, LABELS["tongyi_question"], True,
                   INDEX_NAMES["tongyi_question"])


def tongyi_pages_question(work: Path) -> EvalSet:
    """``tongyi_question`` at page level: the same calls against ``tongyi_pages``'s corpus, relevant = the pages
    of the question's used chunks."""
    pages = tongyi_pages(work)
    qrels, tune, test, queries = _question_level(tongyi())
    qrels = {q: {d.partition("__")[0]: 1 for d in rel} for q, rel in qrels.items()}
    note = ("QUESTION-LEVEL LABELS as `tongyi_question`, at page level: the same calls against the 1,597 pages of "
            "`tongyi_pages`; relevant = the pages holding the question's used chunks")
    return EvalSet("tongyi_pages_question", pages.corpus, queries, qrels, tune, test, note,
                   {"tune_steps": len(tune), "test_steps": len(test)}, LABELS["tongyi_pages_question"], True,
                   INDEX_NAMES["tongyi_pages_question"])


def build_sets(work: Path, names=SET_NAMES) -> dict[str, EvalSet]:
    """The sets ``names`` (derived files, such as the worlds and the page corpus, under ``work``)."""
    builders = {"hotpotqa": hotpotqa, "musique": musique, "world": lambda: world(work), "tongyi": tongyi,
                "tongyi_pages": lambda: tongyi_pages(work), "tongyi_utility": tongyi_utility,
                "tongyi_question": tongyi_question, "tongyi_pages_question": lambda: tongyi_pages_question(work),
                "world_long": lambda: world_long(work)}
    return {name: builders[name]() for name in names}


def write_sets(work: Path, names=SET_NAMES) -> list[str]:
    """Build the sets ``names`` under ``work`` and write each to ``work/sets/<name>/`` (:meth:`EvalSet.write`);
    returns their ``NAME=FOLDER::CORPUS`` specs, as ``hopscotch audit contamination --eval`` reads them (the
    decontamination step of ``scripts/train_agent_retriever.sh``)."""
    specs = []
    for name, es in build_sets(Path(work), names).items():
        folder = Path(work) / "sets" / name
        es.write(folder)
        specs.append(f"{name}={folder}::{es.corpus}")
    return specs
