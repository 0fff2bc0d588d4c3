"""``hopscotch audit perturbation``: the five reasoning conditions; a query-only searcher is reported as ignoring the
reasoning, a searcher that reads it shows non-zero deltas; the CLI (exit codes, --qids, the report)."""

from __future__ import annotations

import json
import random

import pytest

from hopscotch.retriever.audit.perturbation import (
    audit_perturbation,
    last_words,
    perturbed_queries,
    question_key,
    sentences,
    shuffled_sentences,
    swap_partners,
)
from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.io.queries import Query


def _q(qid: str, reasoning: str | None, **kw) -> Query:
    return Query(f"query {qid}", reasoning, qid=qid, **kw)


def _reasonings(queries: list[Query]) -> list[str | None]:
    assert all(q.reasoning_aware for q in queries)  # every condition is searched reasoning-aware
    return [q.reasoning for q in queries]


def test_conditions_drop_truncate_shuffle():
    text = "First I look. Then I read! Is it there? Finally\nthe answer."
    qs = [_q("a_turn1", text), _q("b_turn1", "one two three four five")]
    assert _reasonings(perturbed_queries(qs, "given")) == [text, "one two three four five"]
    assert _reasonings(perturbed_queries(qs, "dropped")) == [None, None]
    assert _reasonings(perturbed_queries(qs, "truncated"))[1] == "three four five"  # the last half, rounded up
    assert _reasonings(perturbed_queries(qs, "truncated", truncate_words=2))[1] == "four five"
    assert last_words("a b c", 1) == "c" and last_words(None, 3) is None
    assert sentences(text) == ["First I look.", "Then I read!", "Is it there?", "Finally", "the answer."]
    shuffled = _reasonings(perturbed_queries(qs, "shuffled", seed=1))[0]
    assert sorted(sentences(shuffled)) == sorted(sentences(text)) and shuffled != text
    assert shuffled == _reasonings(perturbed_queries(qs, "shuffled", seed=1))[0]
    assert shuffled_sentences("One sentence only.", random.Random(0)) == "One sentence only."


def test_other_context_fields_are_kept_by_truncation_and_dropped_with_the_reasoning():
    q = _q("a", "alpha beta gamma delta", current_reasoning="gamma delta", prior_queries=("first",))
    [truncated] = perturbed_queries([q], "truncated")
    assert (truncated.text, truncated.qid, truncated.reasoning) == (q.text, q.qid, "gamma delta")
    assert truncated.current_reasoning == "delta" and truncated.prior_queries == ("first",)
    [dropped] = perturbed_queries([q], "dropped")
    assert not dropped.has_context and dropped.reasoning_aware and dropped.text == q.text


def test_swap_is_a_seeded_derangement_over_questions():
    qs = [_q(f"q{i}_turn{t}", f"reasoning of q{i} turn {t}") for i in range(6) for t in range(1, 1 + i % 3 + 1)]
    partners = swap_partners(qs, seed=5)
    assert all(question_key(qs[j]) != question_key(qs[i]) for i, j in enumerate(partners))
    assert partners == swap_partners(qs, seed=5) and partners != swap_partners(qs, seed=6)
    swapped = perturbed_queries(qs, "swapped", seed=5)
    assert all(s.reasoning.split()[2] != question_key(q) and s.text == q.text for s, q in zip(swapped, qs))
    assert question_key(Query("t", qid="x_turn2", extra={"question_id": "Q"})) == "Q"
    with pytest.raises(UsageError, match="two questions"):
        swap_partners([_q("q_turn1", "a"), _q("q_turn2", "b")], seed=0)


def _world_queries(small_world, tmp_path):
    """Each question asked with a bland query and a reasoning that quotes its gold documents: a searcher that reads
    the reasoning finds them, one that does not cannot."""
    docs = {d["_id"]: d for d in map(json.loads, (small_world / "corpus.jsonl").read_text().splitlines())}
    gold: dict[str, list[str]] = {}
    for line in (small_world / "qrels.tsv").read_text().splitlines()[1:]:
        qid, docid, _ = line.split("\t")
        gold.setdefault(qid, []).append(docid)
    rows = [{"_id": f"{qid}_turn1", "text": "which page is it",
             "reasoning": " ".join(f"{docs[d]['title']}. {docs[d]['text']}" for d in ds)} for qid, ds in gold.items()]
    queries = tmp_path / "queries.jsonl"
    queries.write_text("".join(json.dumps(r) + "\n" for r in rows))
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("".join(f"{q}_turn1\t{d}\t1\n" for q, ds in gold.items() for d in ds))
    return queries, qrels


def _audit(searcher, queries, qrels, **kw):
    from hopscotch.retriever.io.qrels import read_qrels
    from hopscotch.retriever.io.queries import read_queries

    return audit_perturbation(searcher, list(read_queries(queries)), read_qrels(qrels), permutations=2000, **kw)


def test_a_query_only_model_is_reported_as_ignoring_the_reasoning(small_world, small_world_index, tmp_path):
    from hopscotch.retriever.searchers import build_searcher

    queries, qrels = _world_queries(small_world, tmp_path)
    report = _audit(build_searcher("dense", index=str(small_world_index), query_input="query"), queries, qrels)
    assert report.verdict == "warning" and report.exit_code == 0 and report.details["ignores_reasoning"]
    assert "The model ignores the reasoning" in report.summary_text()
    assert all(row.get("delta", 0) == 0 and row["changed_rankings"] == 0
               for row in report.details["conditions"].values())
    assert "never reaches the ranking" in report.summary_text()


def test_a_model_that_reads_the_reasoning_shows_non_zero_deltas(small_world, small_world_index, tmp_path):
    from hopscotch.retriever.searchers import build_searcher

    queries, qrels = _world_queries(small_world, tmp_path)
    report = _audit(build_searcher("dense", index=str(small_world_index), query_input="reasoning"), queries, qrels)
    rows = report.details["conditions"]
    assert report.verdict == "ok" and not report.details["ignores_reasoning"]
    assert rows["swapped"]["delta"] < 0 and rows["swapped"]["p"] < 0.05 and rows["dropped"]["delta"] < 0
    assert rows["swapped"]["changed_rankings"] > 0.5 and rows["shuffled"]["changed_rankings"] > 0
    assert rows["given"]["ci95"] > 0 and "The model uses the reasoning" in report.summary_text()
    assert report.details["settings"]["query_input"] == "reasoning"


def test_cli_qids_report_and_errors(cli, small_world, small_world_index, tmp_path):
    queries, qrels = _world_queries(small_world, tmp_path)
    qids = tmp_path / "qids.txt"
    wanted = [json.loads(line)["_id"] for line in queries.read_text().splitlines()][:12]
    qids.write_text("\n".join(wanted) + "\n")
    report = tmp_path / "r.json"
    code, out, err = cli("audit", "perturbation", "--queries", queries, "--qrels", qrels, "--qids", qids,
                         "--index", small_world_index, "--query-input", "query", "--permutations", 500,
                         "--report", report)
    assert code == 0 and "audit perturbation: WARNING" in out and "ignores the reasoning" in out
    saved = json.loads(report.read_text())
    assert saved["details"]["settings"]["queries"] == 12 and set(saved["details"]["per_query"]["given"]) == set(wanted)
    assert "reasoning swapped" in err
    qids.write_text("nobody\n")
    code, _, err = cli("audit", "perturbation", "--queries", queries, "--qrels", qrels, "--qids", qids,
                       "--index", small_world_index)
    assert code == 2 and "--qids" in err
    assert cli("audit", "perturbation", "--queries", queries, "--qrels", qrels)[0] == 2  # no searcher flags


def test_hybrid_searcher(cli, small_world, small_world_index, tmp_path):
    queries, qrels = _world_queries(small_world, tmp_path)
    assert cli("bm25-index", "--corpus", small_world / "corpus.jsonl", "--out", tmp_path / "bm25")[0] == 0
    report = tmp_path / "r.json"
    code, _, _ = cli("audit", "perturbation", "--queries", queries, "--qrels", qrels, "--bm25", tmp_path / "bm25",
                     "--index", small_world_index, "--query-input", "reasoning", "--permutations", 500,
                     "--report", report)
    details = json.loads(report.read_text())["details"]
    assert code == 0 and details["settings"]["searcher"] == "hybrid"
    assert details["conditions"]["swapped"]["changed_rankings"] > 0
