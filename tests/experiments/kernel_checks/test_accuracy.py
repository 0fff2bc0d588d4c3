"""hopscotch_experiments.kernel_checks.accuracy's case builders and error helpers (the sweeps themselves run in
test_infonce.py / test_reference.py): the one copy the kernel bench's check uses too."""

from __future__ import annotations

import math

import pytest
import torch

from hopscotch.kernels import reference_infonce_loss
from hopscotch_experiments.kernel_checks import maxsim_accuracy
from hopscotch_experiments.kernel_checks.accuracy import (DTYPES, FIXED_SEEDS, Errors, SweepReport, compare, draw_case,
                                                          grade, main, make_case, reference_grads, relative_error,
                                                          report_sweep, sweep_parser)


@pytest.mark.parametrize("exclusion", ["none", "ids", "dense", "all-but-positive"])
def test_make_case_builds_unit_vectors_labels_and_each_exclusion(exclusion):
    case = make_case(7, 5, 12, 16, 0.05, exclusion)
    assert case.q.shape == (5, 16) and case.p.shape == (12, 16) and case.labels.shape == (5,)
    assert torch.allclose(case.q.norm(dim=-1), torch.ones(5)) and torch.allclose(case.p.norm(dim=-1), torch.ones(12))
    assert case.kind == f"exclude={exclusion}" and case.temperature == 0.05
    if exclusion == "none":
        assert case.exclude is None
    elif exclusion == "ids":
        q_ids, p_ids = case.exclude
        assert q_ids.shape == (5,) and p_ids.shape == (12,) and torch.equal(q_ids, p_ids[case.labels])
    else:
        assert case.exclude.shape == (5, 12) and case.exclude.dtype == torch.bool
        assert bool(case.exclude.all()) == (exclusion == "all-but-positive")
    again = make_case(7, 5, 12, 16, 0.05, exclusion)
    assert torch.equal(case.q, again.q) and torch.equal(case.labels, again.labels)


def test_make_case_refuses_an_unknown_exclusion():
    with pytest.raises(ValueError, match="exclusion"):
        make_case(0, 2, 3, 4, 0.1, "some")


def test_draw_case_is_make_case_of_the_drawn_shape():
    """Same seed, same shape: the same q, labels and exclusion; p too, except the positives a dominant draw
    rebuilds near their queries."""
    checked = 0
    for seed in (*FIXED_SEEDS, *range(30)):
        drawn = draw_case(seed)
        exclusion = drawn.kind.split()[0].split("=")[1]
        made = make_case(seed, drawn.q.shape[0], drawn.p.shape[0], drawn.q.shape[1], drawn.temperature, exclusion)
        assert torch.equal(drawn.q, made.q) and torch.equal(drawn.labels, made.labels)
        if "dominant-positive" not in drawn.kind:
            assert torch.equal(drawn.p, made.p) and drawn.kind == made.kind
            if exclusion == "ids":
                assert all(torch.equal(a, b) for a, b in zip(drawn.exclude, made.exclude))
            elif exclusion == "dense":
                assert torch.equal(drawn.exclude, made.exclude)
            checked += 1
    assert checked >= 10


def test_relative_error():
    assert relative_error(torch.zeros(3), torch.zeros(3)) == 0.0
    assert relative_error(torch.ones(3), torch.zeros(3)) == math.inf
    assert relative_error(torch.tensor([3.0, 4.0]), torch.tensor([0.0, 4.0])) == pytest.approx(3 / 4)
    assert relative_error(torch.tensor([1.0, 1.0], dtype=torch.bfloat16), torch.tensor([1.0, 1.0])) == 0.0


def test_the_reference_graded_against_its_own_float64_truth_passes():
    case = make_case(3, 4, 20, 32, 0.05, "ids")
    truth = reference_grads(case, torch.float32)
    assert all(t.dtype == torch.float64 for t in truth)
    errors = grade(case.describe(), truth, truth, torch.float32)
    assert errors.ok and errors.loss == errors.dq == errors.dp == 0.0
    assert compare(reference_infonce_loss, case).ok
    broken = (truth[0] * 1.01, truth[1], truth[2])
    assert not grade("broken", broken, truth, torch.float32).ok


def test_both_accuracy_tools_take_the_same_flags_with_their_own_draws():
    args = sweep_parser("prog", "what it does", 7).parse_args([])
    assert (args.draws, args.impl, args.device, args.dtype, args.describe) == (7, "fused", "cpu", "fp32", False)
    args = sweep_parser("prog", "d", 7).parse_args(["--impl", "reference", "--dtype", "bf16", "--draws", "3"])
    assert (args.impl, DTYPES[args.dtype], args.draws) == ("reference", torch.bfloat16, 3)
    with pytest.raises(SystemExit):
        sweep_parser("prog", "d", 7).parse_args(["--dtype", "fp64"])


def test_report_sweep_prints_the_first_failures_and_the_summary(capsys):
    worst = {"loss": 1e-3, "dq": 2e-3, "dp": 0.0}
    failures = [Errors(f"case {i}", 1e-3, 2e-3, 0.0, False) for i in range(25)]
    assert report_sweep(SweepReport(30, failures, worst), "fused fp32 on cpu") == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 21 and lines[0] == "FAIL case 0: loss 1.00e-03 dq 2.00e-03 dp 0.00e+00"
    assert lines[-1].startswith("fused fp32 on cpu: 30 draws: FAIL (25 of 30)")
    assert report_sweep(SweepReport(4, [], worst), "reference") == 0
    assert capsys.readouterr().out.startswith("reference: 4 draws: PASS")


def test_the_tools_sweep_the_reference_from_the_command_line(capsys):
    assert main(["--impl", "reference", "--draws", "2"]) == 0
    assert capsys.readouterr().out.startswith("reference fp32 on cpu: 2 draws: PASS")
    assert maxsim_accuracy.main(["--impl", "reference", "--draws", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"maxsim reference fp32 on cpu: {len(maxsim_accuracy.FIXED_SEEDS) + 1} draws: PASS"), out
