"""Training data: reading the three tuple layouts, errors with file and line, per-epoch rotation, batches
without duplicate passages, length grouping and the collator's labels."""

from __future__ import annotations

import json

import pytest

from hopscotch.retriever.errors import FormatError, UsageError
from hopscotch.retriever.io.tuples import read_training_tuples
from hopscotch.retriever.training.batches import Collator, local_share, make_group, plan_epoch


def psg(docid, text=None, title=""):
    return {"docid": docid, "title": title, "text": text or f"text of {docid}"}


def write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def synthetic(n=40, pos=2, negs=6, shared_every=0):
    """n tuples over a pool of passages; with ``shared_every`` several tuples share passages."""
    rows = []
    for i in range(n):
        base = i // shared_every if shared_every else i
        rows.append({"query_id": f"q{i}", "query": "w " * (1 + i % 9) + f"query {i}",
                     "reasoning": f"reasoning {i}" if i % 2 else None,
                     "positive_passages": [psg(f"p{base}_{k}") for k in range(pos)],
                     "negative_passages": [psg(f"n{(base * negs + k) % max(n * negs // 2, negs)}") for k in range(negs)]})
    return rows


def test_reads_dr_synth_tevatron_and_agentir_layouts(tmp_path):
    f = write(tmp_path / "t.jsonl", [
        {"query_id": "a", "query": "q1", "reasoning": "thinking", "positive_passages": [psg("d1")],
         "negative_passages": [psg("d2"), psg("d1"), psg("d2")]},          # DR-Synth; d1 is a positive
        {"query_id": "b", "query": "q2", "positive_passages": [{"text": "no id", "title": "T"}]},  # Tevatron
        {"query_id": "c", "query": "Reasoning: step one\n\nQuery: the search", "positive_passages": [psg("d3")],
         "negative_passages": []},                                            # AgentIR's query string
        {"query_id": "d", "query": "Reasoning: Empty\n\nQuery: first search", "positive_passages": [psg("d4")]},
    ])
    a, b, c, d = read_training_tuples(f)
    assert (a.reasoning, [n.docid for n in a.negatives]) == ("thinking", ["d2"])  # false negative + dup gone
    assert b.reasoning is None and b.positives[0].docid.startswith("text:") and b.negatives == []
    assert (c.query, c.reasoning) == ("the search", "step one")
    assert (d.query, d.reasoning) == ("first search", None)
    assert len(read_training_tuples([f, f])) == 8


@pytest.mark.parametrize("row,expected", [
    ({"query_id": "a", "positive_passages": [psg("d")]}, "non-empty string 'query'"),
    ({"query_id": "a", "query": "q", "positive_passages": []}, "at least one entry in 'positive_passages'"),
    ({"query_id": "a", "query": "q", "positive_passages": [{"docid": "x"}]}, "string text"),
    ({"query": "q", "positive_passages": [psg("d")]}, "'query_id'"),
    ({"query_id": "a", "query": "q", "reasoning": 3, "positive_passages": [psg("d")]}, "string 'reasoning'"),
])
def test_bad_rows_raise_with_file_and_line(tmp_path, row, expected):
    f = write(tmp_path / "bad.jsonl", [synthetic(1)[0], row])
    with pytest.raises(FormatError, match=expected) as err:
        read_training_tuples(f)
    assert str(err.value).startswith(f"{f}:2: expected")


def test_missing_source_and_offline_hub_name_are_usage_errors(tmp_path, monkeypatch):
    with pytest.raises(UsageError, match="no such file"):
        read_training_tuples(tmp_path / "nope.jsonl")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(UsageError, match="offline"):
        read_training_tuples("Tevatron/msmarco-passage")


def test_positives_rotate_and_negative_windows_slide_per_epoch(tmp_path):
    [t] = read_training_tuples(write(tmp_path / "t.jsonl", synthetic(1, pos=3, negs=6)))
    groups = [make_group(t, 0, epoch, seed=1, group_size=4) for epoch in range(6)]
    assert len({g.passages[0].docid for g in groups[:3]}) == 3       # every positive in 3 epochs
    windows = [[p.docid for p in g.passages[1:]] for g in groups[:2]]
    assert all(len(w) == 3 and len(set(w)) == 3 for w in windows)
    assert set(windows[0]) | set(windows[1]) == {n.docid for n in t.negatives}   # 2 epochs cover 6 negatives
    assert [p.docid for p in make_group(t, 0, 1, 1, 4).passages] == [p.docid for p in groups[1].passages]
    assert [p.docid for p in make_group(t, 0, 1, 2, 4).passages] != [p.docid for p in groups[1].passages]


def test_batches_hold_no_duplicate_passage_and_no_other_tuples_positive(tmp_path):
    tuples = read_training_tuples(write(tmp_path / "t.jsonl", synthetic(60, shared_every=3)))
    batches = plan_epoch(tuples, epoch=0, seed=0, group_size=4, global_batch=6)
    assert len(batches) >= 5
    for batch in batches:
        assert len(batch) == 6
        ids = [p.docid for g in batch for p in g.passages]
        assert len(ids) == len(set(ids))
        for g in batch:
            others = {p.docid for h in batch if h is not g for p in h.passages}
            assert not (g.positive_ids & others)
    assert plan_epoch(tuples, 0, 0, 4, 6)[0][0].tuple_index == batches[0][0].tuple_index  # deterministic
    assert plan_epoch(tuples, 1, 0, 4, 6)[0][0].tuple_index != batches[0][0].tuple_index or \
        plan_epoch(tuples, 1, 0, 4, 6)[1][0].tuple_index != batches[1][0].tuple_index


def test_length_grouping_puts_similar_lengths_together(tmp_path):
    tuples = read_training_tuples(write(tmp_path / "t.jsonl", synthetic(64)))
    spread = lambda bs: sum(max(tuples[g.tuple_index].length for g in b) - min(tuples[g.tuple_index].length for g in b)
                            for b in bs)
    grouped = plan_epoch(tuples, 0, 0, 2, 8, length_grouping=True)
    mixed = plan_epoch(tuples, 0, 0, 2, 8, length_grouping=False)
    assert spread(grouped) < spread(mixed) / 2


def test_collator_labels_ids_and_dynamic_padding(tmp_path, tiny_bert_dir):
    from hopscotch.retriever.io.docids import signed_docid_hash as docid_hash
    from hopscotch.retriever.model.config import EncoderConfig
    from hopscotch.retriever.model.dual_encoder import DualEncoder

    model = DualEncoder.from_pretrained(tiny_bert_dir, EncoderConfig(query_max_len=32, passage_max_len=64))
    tuples = read_training_tuples(write(tmp_path / "t.jsonl", synthetic(8, negs=2)))
    groups = plan_epoch(tuples, 0, 0, group_size=3, global_batch=4)[0]
    batch = Collator(model, pad_to_multiple_of=8)(groups)
    assert batch.labels.tolist() == [0, 3, 6, 9]
    assert batch.q_pos_ids.tolist() == [docid_hash(g.passages[0].docid) for g in groups]
    assert batch.p_ids[batch.labels].tolist() == batch.q_pos_ids.tolist()
    longest = int(batch.passages["attention_mask"].sum(1).max())
    assert batch.passages["input_ids"].shape[1] == -(-longest // 8) * 8   # padded to the longest, not 64
    assert local_share(groups, 1, 2) == groups[2:4]


def test_tuples_of_one_question_wait_for_later_batches_instead_of_being_lost(tmp_path):
    rows = []
    for q in range(10):  # 10 questions x 5 search steps sharing the question's positive and negatives
        for step in range(5):
            rows.append({"query_id": f"q{q}_s{step}", "query": f"step {step} of question {q}",
                         "positive_passages": [psg(f"gold{q}")],
                         "negative_passages": [psg(f"neg{q}_{k}") for k in range(3)]})
    tuples = read_training_tuples(write(tmp_path / "t.jsonl", rows))
    batches = plan_epoch(tuples, epoch=0, seed=0, group_size=2, global_batch=4)
    used = [g.tuple_index for b in batches for g in b]
    assert len(used) == len(set(used)) >= 44  # at most one short batch's worth dropped
    for b in batches:
        assert len({tuples[g.tuple_index].query_id.split("_")[0] for g in b}) == 4


def test_collator_uses_the_models_query_input_and_the_tuples_context(tmp_path, tiny_bert_dir):
    from hopscotch.retriever.model.config import EncoderConfig
    from hopscotch.retriever.model.dual_encoder import DualEncoder

    rows = synthetic(8, negs=2)
    for i, row in enumerate(rows):
        row["current_reasoning"] = f"since the last result {i}"
        row["prior_queries"] = [f"earlier {i}"]
    tuples = read_training_tuples(write(tmp_path / "t.jsonl", rows))
    groups = plan_epoch(tuples, 0, 0, group_size=3, global_batch=4)[0]
    seen = {}
    for variant in ("reasoning", "current_reasoning", "prior_queries", "query"):
        model = DualEncoder.from_pretrained(tiny_bert_dir, EncoderConfig(query_max_len=32, passage_max_len=64,
                                                                         query_input=variant))
        ids = Collator(model)(groups).queries["input_ids"]
        seen[variant] = [model.tokenizer.decode(row, skip_special_tokens=True) for row in ids]
    t = tuples[groups[0].tuple_index]
    assert seen["current_reasoning"][0] == f"reasoning : {t.current_reasoning} query : {t.query}".lower()
    assert seen["prior_queries"][0] == f"reasoning : {t.prior_queries[0]} query : {t.query}".lower()
    assert seen["query"][0] == t.query.strip().lower()
    assert (f"reasoning : {t.reasoning or 'empty'}".lower()) in seen["reasoning"][0]


def test_a_mixture_of_variants_draws_one_per_tuple_per_epoch_without_changing_the_plan(tmp_path):
    tuples = read_training_tuples(write(tmp_path / "t.jsonl", synthetic(40)))
    mix = ["reasoning", "current_reasoning", "reasoning_tail:16"]
    for epoch in (0, 1):
        plain = plan_epoch(tuples, epoch, 3, group_size=3, global_batch=6)
        mixed = plan_epoch(tuples, epoch, 3, group_size=3, global_batch=6, variants=mix)
        assert [[(g.tuple_index, g.passages) for g in b] for b in plain] == \
            [[(g.tuple_index, g.passages) for g in b] for b in mixed]
        assert all(g.query_input is None for b in plain for g in b)
        drawn = [str(g.query_input) for b in mixed for g in b]
        assert set(drawn) == set(mix)
        again = plan_epoch(tuples, epoch, 3, group_size=3, global_batch=6, variants=mix)
        assert drawn == [str(g.query_input) for b in again for g in b]
    by_epoch = [{g.tuple_index: str(g.query_input) for b in plan_epoch(tuples, e, 3, 3, 6, variants=mix) for g in b}
                for e in (0, 1)]
    common = set(by_epoch[0]) & set(by_epoch[1])
    assert any(by_epoch[0][i] != by_epoch[1][i] for i in common)
    with pytest.raises(UsageError, match="unknown query input"):
        plan_epoch(tuples, 0, 3, 3, 6, variants=["nope"])


def _kind(text: str) -> str:
    """Which mixture variant a decoded (lower-cased) query text was written in."""
    if "reasoning :" not in text:
        return "query"
    if "reasoning : empty" in text:
        return "empty_reasoning"
    return "reasoning" if "full thinking" in text else "current_reasoning"


def test_a_weighted_mixture_with_empty_reasoning_reaches_the_collated_queries(tmp_path, tiny_bert_dir):
    from hopscotch.retriever.model.config import EncoderConfig
    from hopscotch.retriever.model.dual_encoder import DualEncoder
    from hopscotch.retriever.training.batches import EMPTY_REASONING

    rows = synthetic(40, negs=2)
    for i, row in enumerate(rows):
        row["reasoning"], row["current_reasoning"] = f"full thinking {i} then since {i}", f"since {i}"
    tuples = read_training_tuples(write(tmp_path / "t.jsonl", rows))
    model = DualEncoder.from_pretrained(tiny_bert_dir, EncoderConfig(query_max_len=32, passage_max_len=32,
                                                                     query_input="reasoning"))
    mix = ["query", "current_reasoning", "reasoning", EMPTY_REASONING]
    texts = []
    for batch in plan_epoch(tuples, 0, 3, group_size=2, global_batch=8, variants=mix):
        ids = Collator(model)(batch).queries["input_ids"]
        texts += [model.tokenizer.decode(row, skip_special_tokens=True) for row in ids]
    assert {_kind(t) for t in texts} == set(mix)
    # weights: a zero weight is never drawn, a heavy one dominates; the plan itself does not change
    only = plan_epoch(tuples, 0, 3, 2, 8, variants=mix, weights=[0, 0, 0, 1])
    assert all(str(g.query_input) == "reasoning" for b in only for g in b)
    assert all(g.context.reasoning is None for b in only for g in b)
    heavy = [str(g.query_input) for b in plan_epoch(tuples, 0, 3, 2, 8, variants=["query", "reasoning"],
                                                    weights=[9, 1]) for g in b]
    assert heavy.count("query") > 3 * heavy.count("reasoning")
    assert [[g.tuple_index for g in b] for b in only] == \
        [[g.tuple_index for g in b] for b in plan_epoch(tuples, 0, 3, 2, 8)]
    with pytest.raises(UsageError, match="one weight >= 0 per variant"):
        plan_epoch(tuples, 0, 3, 2, 8, variants=mix, weights=[1, 1])
    with pytest.raises(UsageError, match="empty_reasoning"):
        plan_epoch(tuples, 0, 3, 2, 8, variants=["empty"])
