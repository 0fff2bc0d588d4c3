"""Distillation beside InfoNCE (``loss.distill: kl | margin_mse``): exact values on a hand-computed batch, duplicate
masking, both backends, GradCache equal to the plain step (single- and multi-vector), two processes equal to one,
the teacher ``score`` of every passage read, written and refused where missing, the recipe keys, and short runs.

This file is also the worker of its two-process test: ``torchrun --nproc_per_node 2 test_distillation.py --worker
OUT MODEL``."""

from __future__ import annotations

import json
import math
import os
import re
import socket
import subprocess
import sys

import pytest
import torch

from hopscotch.retriever.errors import FormatError, UsageError
from hopscotch.retriever.io.tuples import Passage, passage_dict, read_training_tuples, tuple_line
from hopscotch.retriever.model.multi_vector_trainable import TokenEmbeddings
from hopscotch.retriever.training.loss import InfoNCELoss, distill_loss

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma".split()

# -- a hand-computed batch ------------------------------------------------------------------------------------
# Two queries; query 0's group is passages 0-2 (positive 0), query 1's is passages 3-4 (positive 3).
# Student dot products: query 0 -> [1, 0, 1], query 1 -> [1, 0] (passages 0-2, then 3-4).
Q = [[1.0, 0.0], [0.0, 1.0]]
P = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 1.0], [1.0, 0.0]]
LABELS = [0, 3]
TEACHER = [2.0, 0.0, 1.0, 1.0, 0.5]
T_STUDENT, T_TEACHER = 0.5, 2.0
# logits z = s / 0.5: [2, 0, 2] and [2, 0]; y = t / 2: [1, 0, 0.5] and [0.5, 0.25]
# KL(q0) = 0.11107978540437727, KL(q1) = 0.31717971461398226 (see _kl below), batchmean:
KL_EXPECTED = 0.21412975000917978
# MarginMSE: q0 pairs (0,1): (2-0) - (1-0) = 1 -> 1; (0,2): (2-2) - (1-0.5) = -0.5 -> 0.25; mean 0.625
#            q1 pair  (3,4): (2-0) - (0.5-0.25) = 1.75 -> 3.0625; batch mean (0.625 + 3.0625) / 2
MARGIN_EXPECTED = 1.84375


def _softmax(xs):
    top = max(xs)
    e = [math.exp(x - top) for x in xs]
    return [v / sum(e) for v in e]


def _kl(teacher_logits, student_logits):
    """KL(softmax(teacher) || softmax(student)) with the math module."""
    pt, ps = _softmax(teacher_logits), _softmax(student_logits)
    return sum(a * (math.log(a) - math.log(b)) for a, b in zip(pt, ps))


def batch_tensors():
    return torch.tensor(Q), torch.tensor(P), torch.tensor(LABELS), torch.tensor(TEACHER)


def test_the_hand_numbers_are_what_the_formulas_say():
    assert _kl([1, 0, 0.5], [2, 0, 2]) == pytest.approx(0.11107978540437727, abs=1e-15)
    assert (_kl([1, 0, 0.5], [2, 0, 2]) + _kl([0.5, 0.25], [2, 0])) / 2 == pytest.approx(KL_EXPECTED, abs=1e-15)
    assert ((2 - 1) ** 2 + (0 - 0.5) ** 2) / 2 == 0.625 and (0.625 + 1.75 ** 2) / 2 == MARGIN_EXPECTED


@pytest.mark.parametrize("kind, expected", [("kl", KL_EXPECTED), ("margin_mse", MARGIN_EXPECTED)])
def test_exact_values_on_the_hand_computed_batch(kind, expected):
    q, p, labels, teacher = batch_tensors()
    got = distill_loss(kind, q.double(), p.double(), labels, T_STUDENT, T_TEACHER, teacher.double())
    assert float(got) == pytest.approx(expected, abs=1e-12)
    # the loss module's own: InfoNCELoss with infonce_weight 0 is the distillation term alone, times its weight
    loss = InfoNCELoss("reference", distill=kind, distill_weight=3.0, infonce_weight=0.0,
                       teacher_temperature=T_TEACHER, student_temperature=T_STUDENT)
    out = loss(q, p, labels, 0.05, teacher_scores=teacher)
    assert out.value == pytest.approx(3 * expected, abs=1e-5)
    assert float(out.loss.detach()) == pytest.approx(3 * expected, abs=1e-5)


def test_the_student_temperature_defaults_to_the_models_and_learns_with_it():
    q, p, labels, teacher = batch_tensors()
    t = torch.tensor(T_STUDENT, requires_grad=True)
    out = InfoNCELoss("reference", distill="kl", infonce_weight=0.0, teacher_temperature=T_TEACHER)(
        q, p, labels, t, teacher_scores=teacher)
    assert out.value == pytest.approx(KL_EXPECTED, abs=1e-6)
    out.loss.backward()
    assert t.grad is not None and float(t.grad) != 0


def test_kl_gradient_is_student_minus_teacher_probabilities():
    """d batchmean-KL / d z_ik = (softmax(z_i)_k - softmax(y_i)_k) / B."""
    from hopscotch.retriever.training.loss import kl_distill

    z = torch.tensor([[2.0, 0.0, 2.0], [2.0, 0.0, 0.0]], dtype=torch.float64, requires_grad=True)
    y = torch.tensor([[1.0, 0.0, 0.5], [0.5, 0.25, float("nan")]], dtype=torch.float64)
    keep = torch.tensor([[True, True, True], [True, True, False]])
    kl_distill(z, y, keep).backward()
    expected = [[(a - b) / 2 for a, b in zip(_softmax([2, 0, 2]), _softmax([1, 0, 0.5]))],
                [(a - b) / 2 for a, b in zip(_softmax([2, 0]), _softmax([0.5, 0.25]))] + [0.0]]
    assert torch.allclose(z.grad, torch.tensor(expected, dtype=torch.float64), atol=1e-12)


def test_combined_with_infonce_and_defaults_unchanged():
    torch.manual_seed(0)
    q = torch.nn.functional.normalize(torch.randn(2, 8), dim=-1)
    p = torch.nn.functional.normalize(torch.randn(5, 8), dim=-1)
    labels, teacher = torch.tensor(LABELS), torch.tensor(TEACHER)
    q_pos, p_ids = torch.tensor([10, 13]), torch.arange(10, 15)
    plain = InfoNCELoss("reference")(q, p, labels, 0.05, q_pos, p_ids)
    ignored = InfoNCELoss("reference")(q, p, labels, 0.05, q_pos, p_ids, teacher_scores=teacher)
    assert torch.equal(plain.loss, ignored.loss) and plain.value == ignored.value  # distill none: scores unused
    for kind in ("kl", "margin_mse"):
        term = float(distill_loss(kind, q, p, labels, 0.05, 1.0, teacher, q_pos, p_ids))
        both = InfoNCELoss("reference", distill=kind, distill_weight=0.5, infonce_weight=2.0)(
            q, p, labels, 0.05, q_pos, p_ids, teacher)
        assert both.value == pytest.approx(2.0 * plain.value + 0.5 * term, rel=1e-6)
        assert float(both.loss.detach()) == pytest.approx(both.value, rel=1e-6)


def test_duplicates_leave_the_student_and_teacher_distributions():
    q, p, labels, teacher = batch_tensors()
    # passage 2 is a copy of query 0's positive (same docid hash as passage 0): it leaves query 0's candidates
    q_pos, p_ids = torch.tensor([100, 103]), torch.tensor([100, 101, 100, 103, 104])
    kl = distill_loss("kl", q.double(), p.double(), labels, T_STUDENT, T_TEACHER, teacher.double(), q_pos, p_ids)
    # query 0 over passages 0, 1 only: z = [2, 0], y = [1, 0]
    assert float(kl) == pytest.approx((_kl([1, 0], [2, 0]) + _kl([0.5, 0.25], [2, 0])) / 2, abs=1e-12)
    assert float(kl) == pytest.approx(0.1998937297543636, abs=1e-12)
    mse = distill_loss("margin_mse", q.double(), p.double(), labels, T_STUDENT, T_TEACHER, teacher.double(),
                       q_pos, p_ids)
    assert float(mse) == pytest.approx((1.0 + 3.0625) / 2, abs=1e-12)  # the pair (0, 2) is gone
    # a negative repeated within a group: the later copy leaves too (passage 2 = passage 1)
    repeated = torch.tensor([100, 101, 101, 103, 104])
    again = distill_loss("kl", q.double(), p.double(), labels, T_STUDENT, T_TEACHER, teacher.double(), q_pos,
                         repeated)
    assert float(again) == pytest.approx((_kl([1, 0], [2, 0]) + _kl([0.5, 0.25], [2, 0])) / 2, abs=1e-12)
    # the duplicate's teacher score may even be missing: it is masked before it is read
    assert torch.isfinite(distill_loss("kl", q, p, labels, 0.5, 2.0, torch.tensor([2.0, 0.0, math.nan, 1.0, 0.5]),
                                       q_pos, p_ids))
    # with exclude_positive_duplicates off, the copy stays (the unmasked value)
    loss = InfoNCELoss("reference", exclude_positive_duplicates=False, distill="kl", infonce_weight=0.0,
                       teacher_temperature=T_TEACHER, student_temperature=T_STUDENT)
    assert loss(q, p, labels, 0.05, q_pos, p_ids, teacher).value == pytest.approx(KL_EXPECTED, abs=1e-6)
    masked = InfoNCELoss("reference", distill="kl", infonce_weight=0.0, teacher_temperature=T_TEACHER,
                         student_temperature=T_STUDENT)
    assert masked(q, p, labels, 0.05, q_pos, p_ids, teacher).value == pytest.approx(0.1998937297543636, abs=1e-6)


def test_masked_candidates_get_no_gradient_and_no_nan():
    q, p, labels, _ = batch_tensors()
    p = p.clone().requires_grad_(True)
    teacher = torch.tensor([2.0, 0.0, math.nan, 1.0, 0.5])
    q_pos, p_ids = torch.tensor([100, 103]), torch.tensor([100, 101, 100, 103, 104])
    for kind in ("kl", "margin_mse"):
        p.grad = None
        distill_loss(kind, q, p, labels, 0.5, 2.0, teacher, q_pos, p_ids).backward()
        assert torch.isfinite(p.grad).all() and torch.equal(p.grad[2], torch.zeros(2)), kind


def test_missing_teacher_scores_are_refused():
    q, p, labels, teacher = batch_tensors()
    with pytest.raises(UsageError, match="loss.distill: kl needs teacher scores"):
        InfoNCELoss("reference", distill="kl")(q, p, labels, 0.05)
    with pytest.raises(UsageError, match="needs a teacher score on every passage"):
        distill_loss("margin_mse", q, p, labels, 1.0, 1.0, torch.tensor([2.0, math.nan, 1.0, 1.0, 0.5]))
    with pytest.raises(UsageError, match="loss.distill: expected one of"):
        InfoNCELoss("reference", distill="mse")
    with pytest.raises(UsageError, match="infonce_weight: 0 leaves no loss"):
        InfoNCELoss("reference", infonce_weight=0.0)


def test_multi_vector_students_are_scored_by_maxsim():
    # query 0: tokens [1,0], [0,1]; query 1: [1,0] and a masked [5,5] (must not score)
    q = TokenEmbeddings(torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [5.0, 5.0]]]),
                        torch.tensor([[True, True], [True, False]]))
    p = TokenEmbeddings(torch.tensor([[[1.0, 0.0], [9.0, 9.0]],     # p0 (2nd token masked): q0 1 + 0 = 1
                                      [[0.0, 1.0], [1.0, 1.0]],     # p1: q0 max(0,1) + max(1,1) = 2
                                      [[0.5, 0.5], [9.0, 9.0]],     # p2: q0 0.5 + 0.5 = 1
                                      [[0.0, 1.0], [2.0, 0.0]],     # p3: q1 max(0, 2) = 2
                                      [[1.0, 0.0], [9.0, 9.0]]]),   # p4: q1 1
                        torch.tensor([[True, False], [True, True], [True, False], [True, True], [True, False]]))
    labels, teacher = torch.tensor(LABELS), torch.tensor(TEACHER)
    # student MaxSim [1, 2, 1] and [2, 1]; temperatures 1
    kl = distill_loss("kl", q, p, labels, 1.0, 1.0, teacher)
    assert float(kl) == pytest.approx((_kl([2, 0, 1], [1, 2, 1]) + _kl([1, 0.5], [2, 1])) / 2, abs=1e-6)
    assert float(kl) == pytest.approx(0.3284867983294602, abs=1e-6)
    # MarginMSE: q0 ((1-2) - (2-0))^2 = 9, ((1-1) - (2-1))^2 = 1 -> 5; q1 ((2-1) - (1-0.5))^2 = 0.25 -> 2.625
    assert float(distill_loss("margin_mse", q, p, labels, 1.0, 1.0, teacher)) == pytest.approx(2.625, abs=1e-6)
    out = InfoNCELoss("reference", distill="margin_mse", distill_weight=2.0)(q, p, labels, 1.0, teacher_scores=teacher)
    plain = InfoNCELoss("reference")(q, p, labels, 1.0)
    assert out.value == pytest.approx(plain.value + 2 * 2.625, abs=1e-5)


@pytest.mark.parametrize("multi_vector", [False, True])
def test_both_backends_take_the_distillation_term(monkeypatch, multi_vector):
    """``fused`` (Triton's interpreter on CPU) and ``reference`` give the same total; the backend is still asked for."""
    from hopscotch import kernels

    name = "select_maxsim_infonce_loss" if multi_vector else "select_infonce_loss"
    asked = []
    original = getattr(kernels, name)
    monkeypatch.setattr(kernels, name, lambda device, impl="auto": asked.append(impl) or original(device, impl))
    torch.manual_seed(1)
    if multi_vector:
        q = TokenEmbeddings(torch.nn.functional.normalize(torch.randn(2, 3, 16), dim=-1), torch.ones(2, 3).bool())
        p = TokenEmbeddings(torch.nn.functional.normalize(torch.randn(5, 4, 16), dim=-1), torch.ones(5, 4).bool())
    else:
        q = torch.nn.functional.normalize(torch.randn(2, 16), dim=-1)
        p = torch.nn.functional.normalize(torch.randn(5, 16), dim=-1)
    labels, teacher = torch.tensor(LABELS), torch.tensor(TEACHER)
    ids = (torch.tensor([10, 13]), torch.arange(10, 15))
    values = {}
    for backend in ("reference", "fused"):
        values[backend] = InfoNCELoss(backend, distill="kl")(q, p, labels, 0.5, *ids, teacher).value
    assert asked == ["reference", "fused"]
    plain = InfoNCELoss("reference")(q, p, labels, 0.5, *ids).value
    assert values["fused"] == pytest.approx(values["reference"], abs=1e-5) and values["reference"] > plain


# -- GradCache equals the plain step -----------------------------------------------------------------------------

def scored_tuples_file(tmp_path, n=8, scores=True):
    rows = []
    for i in range(n):
        text = lambda k: " ".join(WORDS[(i * 3 + j * k) % len(WORDS)] for j in range(3 + (i * k) % 11))  # noqa: E731
        pos = [passage_dict(f"p{i}", "", text(5), 2.0 + 0.1 * i if scores else None)]
        neg = [passage_dict(f"n{i}_{k}", "", text(7 + k), 0.3 * k - 0.05 * i if scores else None) for k in range(2)]
        rows.append(tuple_line(f"q{i}", text(1), text(2) if i % 2 else None, pos, neg))
    path = tmp_path / ("scored.jsonl" if scores else "plain.jsonl")
    path.write_text("".join(r + "\n" for r in rows))
    return path


def grads(model):
    out = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return out


def backward(loss):
    loss.backward()


def assert_cached_equals_full(model, batch, loss_fn, learn_temperature):
    from hopscotch.retriever.training.step import GradCache, cached_step, full_step

    full_loss = full_step(model, batch, loss_fn, backward)
    full = grads(model)
    cached_loss = cached_step(model, batch, loss_fn, backward, model.temperature,
                              GradCache(3, model.config.padding_side, learn_temperature))
    cached = grads(model)
    assert cached_loss == pytest.approx(full_loss, abs=1e-5)
    assert set(cached) == set(full) and len(full) > 10
    assert ("log_temperature" in full) == learn_temperature
    for name in full:
        assert torch.allclose(cached[name], full[name], atol=1e-5, rtol=1e-4), name
    return full_loss


@pytest.mark.parametrize("kind, learn_temperature", [("kl", False), ("kl", True), ("margin_mse", True)])
def test_gradcache_equals_the_plain_step_with_distillation(tiny_bert_dir, tmp_path, kind, learn_temperature):
    from hopscotch.retriever.model.config import EncoderConfig
    from hopscotch.retriever.model.dual_encoder import DualEncoder
    from hopscotch.retriever.training.batches import Collator, plan_epoch

    torch.manual_seed(0)
    model = DualEncoder.from_pretrained(tiny_bert_dir, EncoderConfig(query_max_len=32, passage_max_len=48,
                                                                     learn_temperature=learn_temperature)).eval()
    batch = Collator(model)(plan_epoch(read_training_tuples(scored_tuples_file(tmp_path)), 0, 0, group_size=3,
                                       global_batch=8)[0])
    assert batch.teacher_scores is not None and batch.teacher_scores.shape == batch.p_ids.shape
    with_distill = assert_cached_equals_full(model, batch, InfoNCELoss("reference", distill=kind,
                                                                       teacher_temperature=0.5), learn_temperature)
    plain = assert_cached_equals_full(model, batch, InfoNCELoss("reference"), learn_temperature)
    assert with_distill > plain  # the term is there


def test_gradcache_equals_the_plain_step_for_a_multi_vector_student(tiny_bert_dir):
    from hopscotch.retriever.training.batches import Collator
    from hopscotch.retriever.training.recipe import load_recipe
    from hopscotch.retriever.training.setup import build_model

    recipe = {"model": {"name": str(tiny_bert_dir), "kind": "multi_vector", "dim": 16, "query_max_len": 32,
                        "passage_max_len": 32, "query_augmentation": 12},
              "loss": {"temperature": 1.0, "learn_temperature": True},
              "data": {"train": "unused.jsonl", "group_size": 3}}
    torch.manual_seed(0)
    model = build_model(load_recipe(recipe)).eval()

    groups = scored_groups(6)
    batch = Collator(model)(groups)
    assert_cached_equals_full(model, batch, InfoNCELoss("reference", distill="kl"), True)


def scored_groups(n: int = 8):
    """``n`` groups with teacher scores; rank 1's first group (index 4) carries a copy of its own positive."""
    from hopscotch.retriever.training.batches import Group

    def text(i, k):
        return " ".join(WORDS[(i * 3 + j * k) % len(WORDS)] for j in range(3 + (i * k) % 11))

    groups = [Group(i, text(i, 1), text(i, 2) if i % 2 else None,
                    [Passage(f"p{i}", "", text(i, 5), 1.0 + 0.1 * i)] +
                    [Passage(f"n{i}_{k}", "", text(i, 7 + k), 0.5 * k - 0.1 * i) for k in range(2)],
                    frozenset({f"p{i}"})) for i in range(n)]
    groups[4].passages[2] = groups[4].passages[0]
    return groups


def _ddp_steps(model, batch, backward, no_sync=None):
    """Loss and gradients of a plain step, then of a GradCache step (mini-batches of 2), KL distillation on."""
    import contextlib

    from hopscotch.retriever.training.step import GradCache, cached_step, full_step

    unwrapped = getattr(model, "module", model)
    loss_fn = InfoNCELoss("reference", distill="kl", distill_weight=0.7, teacher_temperature=0.5)
    out = {}
    for mode in ("full", "cached"):
        if mode == "full":
            loss = full_step(model, batch, loss_fn, backward)
        else:
            cache = GradCache(2, "right", learn_temperature=True, no_sync=no_sync or contextlib.nullcontext)
            loss = cached_step(model, batch, loss_fn, backward, unwrapped.temperature, cache)
        out[mode] = {"loss": loss, "grads": {n: p.grad.clone() for n, p in unwrapped.named_parameters()
                                               if p.requires_grad}}
        unwrapped.zero_grad(set_to_none=True)
    return out


def _load_model(model_dir):
    from hopscotch.retriever.model.config import EncoderConfig
    from hopscotch.retriever.model.dual_encoder import DualEncoder

    torch.manual_seed(0)
    return DualEncoder.from_pretrained(model_dir, EncoderConfig(query_max_len=32, passage_max_len=48,
                                                                learn_temperature=True)).eval()


def worker(out_file: str, model_dir: str) -> None:
    from accelerate import Accelerator

    from hopscotch.retriever.training.batches import Collator, local_share

    torch.set_num_threads(1)
    accelerator = Accelerator(cpu=True)
    assert accelerator.num_processes == 2, accelerator.state
    model = _load_model(model_dir)
    batch = Collator(model)(local_share(scored_groups(), accelerator.process_index, 2))
    ddp = accelerator.prepare(model)
    result = _ddp_steps(ddp, batch, accelerator.backward, lambda: accelerator.no_sync(ddp))
    if accelerator.is_main_process:
        torch.save(result, out_file)
    accelerator.wait_for_everyone()


@pytest.mark.slow
def test_two_processes_equal_one_with_distillation(tiny_bert_dir, tmp_path):
    from hopscotch.retriever.training.batches import Collator

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    out_file = tmp_path / "rank0.pt"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
           "--master_port", str(port), __file__, "--worker", str(out_file), str(tiny_bert_dir)]
    proc = subprocess.run(cmd, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True,
                          timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    distributed = torch.load(out_file)
    model = _load_model(tiny_bert_dir)
    single = _ddp_steps(model, Collator(model)(scored_groups()), lambda loss: loss.backward())
    for mode in ("full", "cached"):
        assert distributed[mode]["loss"] == pytest.approx(single[mode]["loss"], abs=1e-5)
        grads, expected = distributed[mode]["grads"], single[mode]["grads"]
        assert grads.keys() == expected.keys() and "log_temperature" in grads
        for name, g in expected.items():
            assert torch.allclose(grads[name], g, atol=1e-5, rtol=1e-4), (mode, name, (grads[name] - g).abs().max())


# -- tuples carry the teacher's score ----------------------------------------------------------------------------

def test_scores_round_trip_and_old_tuples_still_read(tmp_path):
    line = tuple_line("q1", "query", None, [passage_dict("d1", "T", "text one", 2.5)],
                      [passage_dict("d2", "", "text two", -1), passage_dict("d3", "", "text three")])
    row = json.loads(line)
    assert row["positive_passages"][0] == {"docid": "d1", "title": "T", "text": "text one", "score": 2.5}
    assert "score" not in row["negative_passages"][1]  # no score given: the old layout
    (tmp_path / "t.jsonl").write_text(line + "\n")
    t = read_training_tuples(tmp_path / "t.jsonl")[0]
    assert [p.score for p in t.positives + t.negatives] == [2.5, -1.0, None]
    old = scored_tuples_file(tmp_path, scores=False)
    assert all(p.score is None for t in read_training_tuples(old) for p in t.positives + t.negatives)
    scored = read_training_tuples(scored_tuples_file(tmp_path), scores_for="loss.distill: kl")
    assert scored[1].positives[0].score == pytest.approx(2.1) and scored[1].negatives[1].score == pytest.approx(0.25)


def test_tuples_without_scores_are_refused_naming_file_and_line(tmp_path):
    path = scored_tuples_file(tmp_path)
    lines = path.read_text().splitlines()
    row = json.loads(lines[2])
    del row["negative_passages"][1]["score"]
    lines[2] = json.dumps(row)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(UsageError) as err:
        read_training_tuples(path, scores_for="loss.distill: kl")
    message = str(err.value)
    assert message.startswith(f"{path}:3: loss.distill: kl needs a teacher 'score' on every passage")
    assert "'n2_1'" in message and "\n" not in message
    for bad in ('"high"', "true", "NaN"):
        path.write_text(lines[0].replace('"score": 2.0', f'"score": {bad}') + "\n")
        with pytest.raises(FormatError, match=r"scored\.jsonl:1: expected a finite number as the 'score'"):
            read_training_tuples(path)


def test_the_collator_gives_teacher_scores_in_passage_order(tiny_bert_dir, tmp_path):
    from hopscotch.retriever.model.config import EncoderConfig
    from hopscotch.retriever.model.dual_encoder import DualEncoder
    from hopscotch.retriever.training.batches import Collator, plan_epoch

    model = DualEncoder.from_pretrained(tiny_bert_dir, EncoderConfig(query_max_len=32, passage_max_len=32))
    tuples = read_training_tuples(scored_tuples_file(tmp_path))
    groups = plan_epoch(tuples, 0, 0, group_size=3, global_batch=4)[0]
    batch = Collator(model)(groups)
    expected = [p.score for g in groups for p in g.passages]
    assert torch.allclose(batch.teacher_scores, torch.tensor(expected))
    assert Collator(model)(plan_epoch(read_training_tuples(scored_tuples_file(tmp_path, scores=False)), 0, 0,
                                      group_size=3, global_batch=4)[0]).teacher_scores is None


# -- recipes and training runs -----------------------------------------------------------------------------------

def test_recipe_keys_and_their_refusals():
    from hopscotch.retriever.training.recipe import load_recipe, recipe_keys
    from hopscotch.retriever.training.setup import build_loss

    keys = set(recipe_keys())
    assert {"loss.distill", "loss.distill_weight", "loss.infonce_weight", "loss.teacher_temperature",
            "loss.student_temperature"} <= keys
    base = {"data": {"train": "t.jsonl", "group_size": 2}}
    default = load_recipe(base)
    assert (default.loss.distill, default.loss.distill_weight, default.loss.infonce_weight) == ("none", 1.0, 1.0)
    built = build_loss(load_recipe(base, ["loss.distill=margin_mse", "loss.distill_weight=0.5",
                                          "loss.teacher_temperature=2", "loss.student_temperature=0.1"]))
    assert (built.distill, built.distill_weight, built.teacher_temperature, built.student_temperature) == \
        ("margin_mse", 0.5, 2.0, 0.1)
    for overrides, message in [
            (["loss.distill=kd"], "recipe key loss.distill: expected one of 'none', 'kl', 'margin_mse', got 'kd'"),
            (["loss.distill=kl", "data.group_size=1"], "loss.distill: kl needs data.group_size >= 2"),
            (["loss.distill_weight=2"], "loss.distill_weight applies with loss.distill kl or margin_mse"),
            (["loss.infonce_weight=0"], "loss.infonce_weight: 0 leaves nothing to train"),
            (["loss.distill=kl", "loss.teacher_temperature=0"], "loss.teacher_temperature must be > 0"),
            (["loss.distill=kl", "loss.distill_weight=0"], "loss.distill_weight must be > 0")]:
        with pytest.raises(UsageError, match=re.escape(message)):
            load_recipe(base, overrides)
    assert load_recipe(base, ["loss.distill=kl", "loss.infonce_weight=0"]).loss.infonce_weight == 0


def test_the_distillation_recipes_load():
    from pathlib import Path

    from hopscotch.retriever.training.recipe import load_recipe

    root = Path(__file__).resolve().parents[3] / "recipes"
    kl = load_recipe(root / "minilm_agent_kl.yaml")
    assert kl.loss.distill == "kl" and kl.data.group_size >= 2
    mv = load_recipe(root / "minilm_agent_multivector_margin_mse.yaml")
    assert mv.loss.distill == "margin_mse" and mv.model.kind == "multi_vector"


def test_training_on_tuples_without_scores_fails_on_one_line(cli, tiny_bert_dir, tmp_path, write_training_tuples):
    from hopscotch.retriever.training.trainer import train

    tuples = write_training_tuples(tmp_path / "old.jsonl")
    recipe = {"model": {"name": str(tiny_bert_dir), "query_max_len": 32, "passage_max_len": 32},
              "loss": {"distill": "kl"}, "data": {"train": str(tuples), "group_size": 3},
              "train": {"batch_size": 4, "max_steps": 2, "save_every": 0, "threads": 1}}
    with pytest.raises(UsageError, match="^" + re.escape(f"{tuples}:1: loss.distill: kl needs a teacher 'score'")):
        train(recipe, tmp_path / "run", show_progress=False)
    assert not (tmp_path / "run" / "final").exists()
    (tmp_path / "r.yaml").write_text(json.dumps(recipe))
    code, _, err = cli("train", "--recipe", tmp_path / "r.yaml", "--output", tmp_path / "run2")
    assert code == 2 and err.strip().count("\n") == 0 and "old.jsonl:1: loss.distill: kl needs" in err


@pytest.mark.parametrize("overrides", [["loss.distill=kl"],
                                       ["loss.distill=margin_mse", "loss.infonce_weight=0",
                                        "train.gradcache_chunk_size=3"]])
def test_a_short_run_with_distillation_trains(tiny_bert_dir, tmp_path, write_training_tuples, overrides):
    from hopscotch.retriever.training.trainer import train

    rows = [json.loads(line) for line in write_training_tuples(tmp_path / "t.jsonl", n=24).read_text().splitlines()]
    for r in rows:  # a teacher that prefers the positive, then the negatives in order
        r["positive_passages"][0]["score"] = 3.0
        for k, n in enumerate(r["negative_passages"]):
            n["score"] = 1.0 - 0.25 * k
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    recipe = {"model": {"name": str(tiny_bert_dir), "query_max_len": 32, "passage_max_len": 32},
              "data": {"train": str(tmp_path / "t.jsonl"), "group_size": 3},
              "train": {"batch_size": 6, "max_steps": 3, "lr": 1e-3, "save_every": 0, "threads": 1}}
    losses = []
    final = train(recipe, tmp_path / "run", overrides, on_step_end=lambda state, loss: losses.append(loss),
                  show_progress=False)
    assert len(losses) == 3 and all(math.isfinite(v) and 0 < v < 100 for v in losses)
    summary = json.loads((tmp_path / "run" / "train_summary.json").read_text())
    assert summary["recipe"]["loss"]["distill"] == overrides[0].split("=")[1]
    assert (tmp_path / "run" / "final" / "modules.json").is_file() and final.endswith("final")


if __name__ == "__main__" and "--worker" in sys.argv:
    worker(*sys.argv[sys.argv.index("--worker") + 1:])
