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
* the Tongyi-DeepResearch sets (:mod:`.tongyi_sets`): the held-out calls in the harness's shape (the call's
  own turn of thinking: ``tongyi_turn``, ``tongyi_pages_turn``) and accumulated (``tongyi_question``,
  ``tongyi_pages_question``), with question-level labels and new-evidence labels (``..._new``), and the
  call-level sets below, which vote on nothing.
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

from pathlib import Path

from hopscotch_experiments.agent_data import tongyi_sets
from hopscotch_experiments.agent_data.eval_set import EvalSet, finish_set, step_record
from hopscotch_experiments.agent_data.musique_hops import musique_steps
from hopscotch_experiments.agent_data.splits import WORLD, WORLD_LONG, data_dir, splits

from hopscotch.data_synth.traces import read_traces
from hopscotch.data_synth.world import build_long_world, build_world, write_world
from hopscotch.retriever.io.qrels import read_qrels
from hopscotch.retriever.io.queries import read_queries

__all__ = ["EvalSet", "step_record", "SET_NAMES", "TITLES", "LABELS", "BOUNDS", "CALL_LEVEL", "INDEX_NAMES",
           "OBJECTIVE", "GUARDS", "build_sets", "write_sets"]

SET_NAMES = ("hotpotqa", "musique", "world", "world_long", "tongyi_turn", "tongyi_pages_turn", "tongyi_question",
             "tongyi_pages_question", "tongyi_turn_new", "tongyi_pages_turn_new", "tongyi_question_new",
             "tongyi_pages_question_new", "tongyi_utility", "tongyi", "tongyi_pages")
#: the sets a reasoning default is chosen on (:mod:`hopscotch.retriever.evaluation.selection`): real deep-research
#: agent calls in the shape a harness sends (the call's own turn of thinking), question-level labels (what the
#: team's held-out calls are judged by; new-evidence labels depend on what the recorded run's retriever had shown)
OBJECTIVE = ("tongyi_turn", "tongyi_pages_turn")
TITLES = {"hotpotqa": "HotpotQA IRCoT steps", "musique": "MuSiQue hops", "world": "world steps",
          "world_long": "world, long reasoning and pages"} | tongyi_sets.TITLES
LABELS = {"hotpotqa": "gold supporting paragraphs (HotpotQA annotators)",
          "musique": "the hop's gold paragraph (MuSiQue annotators)",
          "world": "exact gold documents from the generator's graph",
          "world_long": "exact gold documents from the generator's graph"} | tongyi_sets.LABELS
#: sets whose labels the call's own query-only retriever bounds (pseudo-qrels, call-level utility): they punish
#: every use of the reasoning by construction and vote on no default
CALL_LEVEL = tongyi_sets.CALL_LEVEL
#: every other set that votes guards a default: a significant loss there disqualifies it
GUARDS = tuple(n for n in SET_NAMES if n not in OBJECTIVE and n not in CALL_LEVEL)
#: what bounds each set's labels or its pool (the pool bias cannot be removed, only named): the ablation header
BOUNDS = {
    "hotpotqa": "labels: none (annotators); pool: HotpotQA's distractor paragraphs (its bigram TF-IDF retriever)",
    "musique": "labels: none (annotators); pool: MuSiQue's retrieved distractor paragraphs",
    "world": "labels: none (the generator's graph); pool: the whole generated corpus",
    "world_long": "labels: none (the generator's graph); pool: the whole generated corpus",
} | tongyi_sets.BOUNDS
#: sets searched over another set's corpus share its index
INDEX_NAMES = tongyi_sets.INDEX_NAMES


def _finish(name, corpus, by_question, tune_q, test_q, note) -> EvalSet:
    return finish_set(name, corpus, by_question, tune_q, test_q, note, LABELS.get(name, ""), name not in CALL_LEVEL)


def hotpotqa() -> EvalSet:
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
    qids = [q.qid for q in read_queries(folder / "queries.jsonl")]
    by_question: dict[str, list] = {}
    for step in read_traces([folder / "traces.jsonl"], "world"):
        row = step_record(step.query_id, step)
        by_question.setdefault(step.question_id, []).append((row, {d: 1 for d in step.gold_docids or ()}))
    return qids, by_question


def world(work: Path) -> EvalSet:
    folder = Path(work) / "world"
    if not (folder / "world.json").is_file():
        write_world(build_world(seed=WORLD["seed"], docs=WORLD["docs"], questions=WORLD["questions"]), folder)
    qids, by_question = _world_steps(folder)
    n = WORLD["train"] + WORLD["dev"]
    return _finish("world", folder / "corpus.jsonl", by_question, qids[WORLD["train"]:n], qids[n:],
                   f"world seed {WORLD['seed']}, {WORLD['docs']} docs, {WORLD['questions']} questions: trace steps "
                   f"of the last {len(qids) - n} questions; qrels: each step's gold documents; tuned on dev "
                   f"questions {WORLD['train'] + 1}-{n}")


def world_long(work: Path) -> EvalSet:
    """A world never trained on (seed 29), in long mode (``hopscotch world --long-reasoning``, built here the
    way that command builds it, with the same files): agent thinking of 300-3,000 words around keyword-style
    queries, web-page-like documents of several sections; qrels: each step's gold documents, exact from the
    graph. Tune: the first 100 questions; test: the other 200."""
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


def build_sets(work: Path, names=SET_NAMES) -> dict[str, EvalSet]:
    """The sets ``names`` (derived files, such as the worlds and the page corpus, under ``work``)."""
    builders = {"hotpotqa": hotpotqa, "musique": musique, "world": lambda: world(work),
                "world_long": lambda: world_long(work)}
    builders |= {name: (lambda b: lambda: b(work))(b) for name, b in tongyi_sets.BUILDERS.items()}
    unknown = [n for n in names if n not in builders]
    if unknown:
        raise ValueError(f"unknown evaluation sets {unknown}; known: {', '.join(SET_NAMES)}")
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
