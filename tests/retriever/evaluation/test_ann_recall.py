"""recall@k of an ANN search against the exact one: -1 padding, the denominator, ties, k."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hopscotch.retriever.evaluation.ann_recall import recall_at, recall_per_query


def test_hits_over_the_true_neighbours():
    ann = np.array([[1, 2, 3, 4], [9, 8, 7, 6]])
    truth = np.array([[4, 3, 2, 1], [1, 2, 3, 6]])
    assert recall_per_query(ann, truth).tolist() == [1.0, 0.25]
    assert recall_at(ann, truth) == pytest.approx(0.625)


def test_minus_one_is_never_a_hit_and_the_denominator_is_the_true_neighbours_count():
    # the exact search found only 2 neighbours; the ANN found one of them and padded the rest with -1
    ann = np.array([[5, -1, -1], [-1, -1, -1]])
    truth = np.array([[5, 6, -1], [7, -1, -1]])
    assert recall_per_query(ann, truth).tolist() == [0.5, 0.0]
    # both -1-padded: -1 matching -1 is no hit
    assert recall_per_query(np.array([[3, -1]]), np.array([[3, -1]])).tolist() == [1.0]


def test_repeated_ann_ids_count_once():
    assert recall_per_query(np.array([[1, 1, 1]]), np.array([[1, 2, 3]])).tolist() == pytest.approx([1 / 3])


def test_k_cuts_both_lists():
    ann = np.array([[1, 9, 2]])
    truth = np.array([[1, 2, 3]])
    assert recall_per_query(ann, truth, k=1).tolist() == [1.0]
    assert recall_per_query(ann, truth, k=2).tolist() == [0.5]  # 2 is in ANN's top 3, not its top 2


def test_a_query_without_true_neighbours_is_left_out_of_the_mean():
    ann = np.array([[1, 2], [3, -1]])
    truth = np.array([[1, 2], [-1, -1]])
    per_query = recall_per_query(ann, truth)
    assert per_query[0] == 1.0 and math.isnan(per_query[1])
    assert recall_at(ann, truth) == 1.0
    assert math.isnan(recall_at(ann[1:], truth[1:]))


def test_ties_at_the_cut_count_as_hits_with_scores():
    # rows 7 and 8 tie at the k-th score: the ANN returning 8 where exact search returned 7 is still exact
    truth, truth_scores = np.array([[5, 7]]), np.array([[0.9, 0.5]])
    ann, ann_scores = np.array([[5, 8]]), np.array([[0.9, 0.5 - 1e-7]])
    assert recall_per_query(ann, truth).tolist() == [0.5]
    assert recall_per_query(ann, truth, ann_scores=ann_scores, truth_scores=truth_scores).tolist() == [1.0]
    worse = np.array([[0.9, 0.4]])
    assert recall_per_query(ann, truth, ann_scores=worse, truth_scores=truth_scores).tolist() == [0.5]
    # -1 padding is never a hit, whatever score stands beside it
    padded = recall_per_query(np.array([[5, -1]]), truth, ann_scores=np.array([[0.9, 1.0]]),
                              truth_scores=truth_scores)
    assert padded.tolist() == [0.5]


def test_bad_shapes_and_arguments_are_errors():
    with pytest.raises(ValueError, match="same n"):
        recall_per_query(np.zeros((2, 3)), np.zeros((3, 3)))
    with pytest.raises(ValueError, match="both"):
        recall_per_query(np.zeros((1, 3)), np.zeros((1, 3)), ann_scores=np.zeros((1, 3)))
    with pytest.raises(ValueError, match="k must be"):
        recall_per_query(np.zeros((1, 3)), np.zeros((1, 3)), k=0)
