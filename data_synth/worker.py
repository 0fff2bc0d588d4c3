"""Turning the steps of one question into tuples: drop checks, candidates, oracle, labels.

A :class:`QuestionWorker` holds the corpus, the BM25 index, the first stage that mines the candidates
(:mod:`~hopscotch.data_synth.first_stage`, ``config.candidates``), the QA source and the oracle (built lazily, in the
process that uses it). ``process(question_id, steps)`` returns the question's JSONL lines and
its stats; it depends on nothing but its inputs and the seed, so any number of processes, in any
order, produce the same bytes. Each tuple keeps its step's context fields (``current_reasoning``,
``prior_queries``, ``prior_results``, where the trace had them) beside ``reasoning``, so that training
can pick, or mix, query input variants (:mod:`hopscotch.retriever.model.query_input`). Every passage it keeps
carries the oracle's ``score`` for the step (the teacher of the distillation losses, ``loss.distill``).

Drop reasons: ``unknown_question`` (not in the QA source), ``empty_query``, ``failed_tool_call``
(unless ``include_failed_calls``), ``duplicate_step`` (same reasoning and query earlier in the
question), ``no_candidates``, ``no_supported_positive``, ``no_negatives``.
"""

from __future__ import annotations

from collections import Counter

from hopscotch.data_synth.candidates import CandidateGenerator
from hopscotch.data_synth.config import SynthConfig
from hopscotch.data_synth.first_stage import first_stage, plain_query_scores
from hopscotch.data_synth.labels import BOTH_EMPTY_JACCARD, Labeller
from hopscotch.data_synth.oracles import Candidate, OracleInput, build_oracle
from hopscotch.data_synth.passage_cache import PassageCache
from hopscotch.data_synth.qa import QASource
from hopscotch.data_synth.trace_step import TraceStep
from hopscotch.retriever.index.bm25 import BM25Index
from hopscotch.retriever.io.corpus import Document
from hopscotch.retriever.io.queries import context_dict
from hopscotch.retriever.io.tuples import passage_dict, tuple_line
from hopscotch.retriever.model.query_template import format_query
from hopscotch.retriever.text.answers import AnswerMatcher
from hopscotch.retriever.text.normal_form import padded_normal_form
from hopscotch.retriever.text.shingles import jaccard, shingles


class QuestionWorker:
    """Everything needed to label the steps of any question of one QA source and corpus."""

    def __init__(self, qa: QASource, documents: dict[str, Document], index: BM25Index, config: SynthConfig,
                 same_documents=None, candidate_index=None):
        self.qa, self.documents, self.index, self.config = qa, documents, index, config
        self.stage = first_stage(config.candidates, index, candidate_index)
        self.generator = CandidateGenerator(index, config.depth, config.gold, self.stage)
        self.labeller = Labeller(config.label_config(), config.seed, same_documents=same_documents)
        self._oracle = None
        self._normal_form: PassageCache[str] = PassageCache(padded_normal_form, 200_000)  # for answer matching

    @property
    def oracle(self):
        if self._oracle is None:
            self._oracle = build_oracle(self.config.oracle_spec(), self.index)
        return self._oracle

    def _usable(self, steps: list[TraceStep], stats: Counter) -> list[TraceStep]:
        seen: set[tuple[str, str]] = set()
        out = []
        for step in steps:
            key = (step.reasoning, step.query)
            if not step.query:
                stats["dropped.empty_query"] += 1
            elif step.failed and not self.config.include_failed_calls:
                stats["dropped.failed_tool_call"] += 1
            elif key in seen:
                stats["dropped.duplicate_step"] += 1
            else:
                seen.add(key)
                out.append(step)
        return out

    def process(self, question_id: str, steps: list[TraceStep]) -> tuple[list[str], dict]:
        """``(jsonl lines, stats)`` for the steps of one question."""
        stats: Counter = Counter(steps_read=len(steps))
        question = self.qa.questions.get(question_id)
        if question is None:
            stats["dropped.unknown_question"] += len(steps)
            return [], dict(stats)
        question_gold = question.gold_ranked()
        stats["gold_missing_from_corpus"] = sum(not self.generator.known(d) for d in question_gold)
        if question_gold or any(s.gold_docids for s in steps):
            stats["steps_with_gold_question"] = len(steps)
        usable = self._usable(steps, stats)
        if not usable:
            return [], dict(stats)
        step_golds = [list(s.gold_docids) if s.gold_docids else question_gold for s in usable]
        fallbacks = [[f"{s.reasoning} {s.query}".strip(), question.text] for s in usable]
        windows = self.generator.windows([s.query for s in usable], step_golds, fallbacks, usable)
        matcher = AnswerMatcher(question.answers)
        question_gold_set = set(question_gold)
        lines: list[str] = []
        for step, window, gold in zip(usable, windows, step_golds):
            gold_set = set(gold)
            candidates = []
            if self.stage.reads_reasoning:  # the oracle's query relevance stays the step query's plain BM25
                stats["steps_with_reasoning"] += bool(step.reasoning and step.reasoning.strip())
                plain = plain_query_scores(self.index, step.query, [d for d, _, _ in window])
            else:
                plain = [score for _, score, _ in window]
            for (docid, _, _), score in zip(window, plain):
                doc = self.documents[docid]
                candidates.append(Candidate(docid, doc.title, doc.text, score, docid in gold_set,
                                            bool(matcher) and matcher.contains(self._normal_form(doc)),
                                            docid in question_gold_set or docid in gold_set))
            mode = "gold" if gold_set else ("answer" if matcher else "relevance")
            item = OracleInput(step.query_id, step.query, step.reasoning, question.qid, question.text,
                               list(question.answers), candidates)
            scores = self.oracle.score(item) if candidates else []
            result = self.labeller.label(step.query_id, candidates, scores, mode)
            if result.drop_reason:
                stats[f"dropped.{result.drop_reason}"] += 1
                continue
            query, reasoning = step.query, step.reasoning
            if self.config.query_format == "agentir":  # Tevatron reads only 'query': the reasoning goes in it
                query, reasoning = format_query(step.query, step.reasoning, self.config.query_instruction), None
            oracle = dict(zip((c.docid for c in candidates), scores))  # the teacher's score of each kept passage
            lines.append(tuple_line(step.query_id, query, reasoning,
                                    [passage_dict(c.docid, c.title, c.text, oracle[c.docid]) for c in result.positives],
                                    [passage_dict(c.docid, c.title, c.text, oracle[c.docid]) for c in result.negatives],
                                    context_dict(step)))
            stats["steps_kept"] += 1
            if gold_set:
                stats["kept_with_gold_question"] += 1
            stats["positives_gold"] += sum(c.gold for c in result.positives)
            stats["positives_reranked"] += sum(not c.gold for c in result.positives)
            stats["negatives"] += len(result.negatives)
            stats["negatives_excluded_duplicate_group"] += result.excluded_duplicates
            stats["negatives_false"] += self._false_negatives(result)
            if len(result.negatives) < self.config.negatives:
                stats["steps_short_of_negatives"] += 1
        return lines, dict(stats)

    def _false_negatives(self, result) -> int:
        """Negatives that break the false-negative audit's cheap rules (answer-bearing, or word 3-gram Jaccard with a
        positive >= ``near_duplicate``; see :mod:`hopscotch.data_synth.false_negative_audit`): 0 unless the guard
        of :mod:`~hopscotch.data_synth.labels` is broken."""
        positives = [shingles(f"{p.title} {p.text}") for p in result.positives]
        limit = self.labeller.config.near_duplicate
        return sum(c.has_answer or any(jaccard(shingles(f"{c.title} {c.text}"), p, BOTH_EMPTY_JACCARD) >= limit
                                           for p in positives)
                   for c in result.negatives)
