"""DR-Synth building blocks: answer matching, QA readers, candidate windows, the labeller, the lexical oracle."""

from __future__ import annotations

import json

import pytest

from hopscotch.data_synth.candidates import CandidateGenerator
from hopscotch.data_synth.labels import LabelConfig, Labeller
from hopscotch.data_synth.oracles import Candidate, OracleInput
from hopscotch.data_synth.oracles.lexical import LexicalOracle
from hopscotch.data_synth.qa import load_qa
from hopscotch.retriever.errors import FormatError, UsageError
from hopscotch.retriever.index.bm25 import BM25Index
from hopscotch.retriever.io.corpus import Document
from hopscotch.retriever.text.answers import AnswerMatcher, informative_answers
from hopscotch.retriever.text.normal_form import normalize_text
from hopscotch.retriever.text.shingles import jaccard, shingles

DOCS = [
    Document("d0", "Shirley Temple", "Shirley Temple was an actress and later served as Chief of Protocol."),
    Document("d1", "Kiss and Tell", "Kiss and Tell is a 1945 film in which Shirley Temple plays Corliss Archer."),
    Document("d2", "Meet Corliss Archer", "Meet Corliss Archer was a radio program about a teenage girl."),
    Document("d3", "A Kiss for Corliss", "A Kiss for Corliss is a 1949 film, sequel to Kiss and Tell."),
    Document("d4", "Janet Waldo", "Janet Waldo voiced Corliss Archer on radio for years."),
    Document("d5", "Ambassador", "An ambassador is the highest ranking diplomat of a country."),
    Document("d6", "Goodwill ambassador", "A goodwill ambassador is a person who advocates for a cause."),
    Document("d7", "Protocol (diplomacy)", "Protocol is the set of rules of diplomatic ceremony."),
    Document("d8", "Film noir", "Film noir is a cinematic term for stylish crime dramas of the 1940s."),
    Document("d9", "Radio drama", "Radio drama is a dramatized performance broadcast on radio."),
]


@pytest.fixture(scope="module")
def index():
    return BM25Index.build(DOCS, show_progress=False)


def test_normalize_and_match_answers():
    assert normalize_text("  Beyoncé's  St. Louis!") == "beyonce s st louis"
    m = AnswerMatcher(["St. Louis", "yes"])
    assert m.answers == ["st louis"]  # yes / no say nothing about a passage
    assert m.contained_in("He moved to St Louis, Missouri.")
    assert not m.contained_in("He moved to East St Louisville.")
    assert not AnswerMatcher(["35"]).contained_in("born in 1935")
    assert AnswerMatcher(["35"]).contained_in("there are 35 stores")
    assert not AnswerMatcher(["no", "Yes", ""]) and informative_answers(["A", "a ", "B"]) == ["a", "b"]


def test_load_qa_answers_aliases_and_gold(tmp_path):
    (tmp_path / "queries.jsonl").write_text(
        json.dumps({"_id": "q1", "text": "Who?", "answer": "G. Stanley Hall", "answer_aliases": ["Stanley Hall"]})
        + "\n" + json.dumps({"_id": "q2", "text": "What?", "answers": ["X"]}) + "\n"
        + json.dumps({"_id": "q3", "text": "Which?"}) + "\n")
    (tmp_path / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t2\nq2\td3\t0\nzz\td4\t1\n")
    qa = load_qa(tmp_path)
    assert qa.questions["q1"].answers == ["G. Stanley Hall", "Stanley Hall"]
    assert qa.questions["q1"].gold_ranked() == ["d2", "d1"]
    assert qa.questions["q2"].gold == {} and qa.questions["q3"].answers == []
    assert qa.has_answers and qa.has_gold


def test_load_qa_questions_tsv_without_answers_or_qrels(tmp_path):
    (tmp_path / "questions.tsv").write_text("0\tWhat manga?\n1\tWhich movie?\n")
    qa = load_qa(tmp_path)
    assert list(qa.questions) == ["0", "1"] and not qa.has_answers and not qa.has_gold


def test_malformed_qa_files_name_file_and_line(tmp_path):
    (tmp_path / "queries.jsonl").write_text('{"_id": "q1", "text": "a"}\n{"_id": "q2", "answers": ["x"]}\n')
    with pytest.raises(FormatError, match=r"queries\.jsonl:2: expected a question object"):
        load_qa(tmp_path)
    (tmp_path / "queries.jsonl").write_text('{"_id": "q1", "text": "a", "answers": [["nested"]]}\n')
    with pytest.raises(FormatError, match=r"queries\.jsonl:1: expected 'answers' to be a string or a list"):
        load_qa(tmp_path)
    (tmp_path / "queries.jsonl").write_text('{"_id": "q1", "text": "a"}\n{"_id": "q1", "text": "b"}\n')
    with pytest.raises(FormatError, match=r"queries\.jsonl:2: expected unique question ids"):
        load_qa(tmp_path)
    (tmp_path / "queries.jsonl").write_text('{"_id": "q1", "text": "a"}\n')
    (tmp_path / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1 d1\n")
    with pytest.raises(FormatError, match=r"qrels\.tsv:2"):
        load_qa(tmp_path)
    with pytest.raises(UsageError, match="no such file"):
        load_qa(tmp_path / "missing")


def test_candidate_window_puts_gold_in_and_keeps_depth(index):
    gen = CandidateGenerator(index, depth=4, max_gold=2)
    [window] = gen.windows(["Corliss Archer radio"], [["d0", "d7", "nope"]])
    ids = [d for d, _, _ in window]
    assert len(window) == 4 and len(set(ids)) == 4
    assert {"d0", "d7"} <= set(ids)  # gold put in although BM25 does not rank them in the top 4
    assert [s for _, s, _ in window] == sorted((s for _, s, _ in window), reverse=True)
    assert {d for d, _, g in window if g} == {"d0", "d7"}


def test_candidate_window_picks_the_best_scoring_gold_when_over_the_cap(index):
    gen = CandidateGenerator(index, depth=5, max_gold=1)
    [window] = gen.windows(["Shirley Temple Chief of Protocol"], [["d5", "d0", "d9"]])
    assert [d for d, _, g in window if g] == ["d0"]


def test_short_windows_are_backfilled_from_fallback_queries(index):
    gen = CandidateGenerator(index, depth=6, max_gold=1)
    [window] = gen.windows(["Waldo"], [["d0"]], fallbacks=[["radio drama broadcast", "Corliss film"]])
    ids = [d for d, _, _ in window]
    assert ids[:2] == ["d4", "d0"] or ids[:2] == ["d0", "d4"]
    assert len(window) == 6 and len(set(ids)) == 6 and ids[2] == "d9"  # first fallback first
    assert all(s == 0.0 for d, s, _ in window[2:])


def cand(i, gold=False, answer=False, text=None, bm25=1.0, qgold=False):
    return Candidate(f"d{i}", f"T{i}", text or f"unique passage number {i} about topic {i * 7} and more", bm25,
                     gold, answer, qgold or gold)


def test_labeller_guards_negatives_and_is_seeded():
    cands = [cand(i) for i in range(30)]
    cands[0] = cand(0, gold=True)
    cands[12] = cand(12, answer=True)       # answer-bearing: never a negative
    cands[15] = cand(15, qgold=True)        # another step's gold of the question: never a negative
    cands[20] = cand(20, text=cands[0].text)  # near-duplicate of the positive
    scores = [30.0 - i for i in range(30)]
    lab = Labeller(LabelConfig(positives=1, negatives=7, negative_start=10), seed=5)
    res = lab.label("q_turn1", cands, scores, mode="gold")
    assert [c.docid for c in res.positives] == ["d0"]
    neg = [c.docid for c in res.negatives]
    assert len(neg) == 7 and not {"d12", "d15", "d20", "d0"} & set(neg)
    assert all(int(d[1:]) >= 10 for d in neg)   # from the lower part of the ranking
    assert neg == sorted(neg, key=lambda d: int(d[1:]))  # in oracle-rank order
    again = Labeller(LabelConfig(positives=1, negatives=7, negative_start=10), seed=5).label(
        "q_turn1", cands, scores, mode="gold")
    assert [c.docid for c in again.negatives] == neg
    other = [lab.label(f"q_turn{k}", cands, scores, mode="gold").negatives for k in range(2, 6)]
    assert any([c.docid for c in o] != neg for o in other)  # different steps draw differently


def test_labeller_positive_must_be_supported_and_upper_ranks_fill_in():
    cands = [cand(0), cand(1, answer=True), cand(2), cand(3), cand(4)]
    res = Labeller(LabelConfig(positives=1, negatives=3, negative_start=3), seed=1).label(
        "q_turn1", cands, [5, 4, 3, 2, 1], mode="answer")
    assert [c.docid for c in res.positives] == ["d1"]   # d0 ranks first but carries no evidence
    # the lower part (ranks 3, 4) first, then the upper ranks from the bottom up (d2 before d0)
    assert [c.docid for c in res.negatives] == ["d2", "d3", "d4"]
    dropped = Labeller(LabelConfig(), seed=1).label("q", [cand(0), cand(1)], [2, 1], mode="answer")
    assert dropped.drop_reason == "no_supported_positive"
    only_gold = Labeller(LabelConfig(), seed=1).label("q", [cand(0, gold=True)], [1], mode="gold")
    assert only_gold.drop_reason == "no_negatives"
    assert Labeller().label("q", [], [], mode="gold").drop_reason == "no_candidates"


def test_labeller_collapses_near_duplicate_positives_and_negatives():
    text = "the quick brown fox jumps over the lazy dog near the river bank today"
    cands = [cand(0, gold=True, text=text), cand(1, gold=True, text=text + " again"), cand(2, gold=True)]
    cands += [Candidate("d3", "Greek", "alpha beta gamma delta epsilon zeta eta theta iota kappa", 1.0),
              Candidate("d4", "Greek", "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda", 1.0)]
    res = Labeller(LabelConfig(positives=2, negatives=2, negative_start=3), seed=0).label(
        "q", cands, [5, 4, 3, 2, 1], mode="gold")
    assert [c.docid for c in res.positives] == ["d0", "d2"]
    assert len(res.negatives) == 1
    assert jaccard(shingles(text), shingles(text + " again")) >= 0.8


def test_lexical_oracle_prefers_the_gold_that_fits_the_step(index):
    oracle = LexicalOracle(index)
    gen = CandidateGenerator(index, depth=6, max_gold=2)
    docs = {d.docid: d for d in DOCS}
    matcher = AnswerMatcher(["Chief of Protocol"])

    def ranked(query):
        [window] = gen.windows([query], [["d0", "d1"]])
        cands = [Candidate(d, docs[d].title, docs[d].text, s, g, matcher.contained_in(docs[d].text), g)
                 for d, s, g in window]
        item = OracleInput("q_turn1", query, "", "q", "What position did the actress who played Corliss "
                           "Archer in Kiss and Tell hold?", ["Chief of Protocol"], cands)
        scores = oracle.score(item)
        return [c.docid for _, c in sorted(zip(scores, cands), key=lambda t: -t[0])]

    assert ranked("Kiss and Tell 1945 film Corliss Archer")[0] == "d1"
    assert ranked("Shirley Temple diplomat position")[0] == "d0"
    assert set(ranked("Shirley Temple diplomat position")[:2]) == {"d0", "d1"}  # gold outranks non-gold
