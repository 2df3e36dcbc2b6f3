"""Bootstrap intervals (evaluation/bootstrap.py) on hand-made case counts."""

from __future__ import annotations

import pytest

from pr_review_api.evaluation.bootstrap import (
    Interval,
    intervals,
    paired_differences,
    percentile,
    percentile_interval,
)
from pr_review_api.evaluation.scoring import Counts

HIT = Counts(findings=1, matched_findings=1, golden=1, matched_golden=1)
MISS = Counts(findings=1, matched_findings=0, golden=1, matched_golden=0)
CLEAN_FP = Counts(findings=1)


def varied() -> list[Counts]:
    return [HIT, MISS, CLEAN_FP, HIT, Counts(3, 1, 2, 1, 1), MISS, HIT, Counts(), MISS, HIT]


def test_percentiles_interpolate_between_order_statistics() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert percentile([float(n) for n in range(101)], 0.025) == pytest.approx(2.5)
    assert percentile([7.0], 0.975) == 7.0
    assert percentile_interval([]) is None
    spread = percentile_interval([float(n) for n in range(101)])
    assert spread is not None
    assert spread.low == pytest.approx(2.5)
    assert spread.high == pytest.approx(97.5)


def test_the_same_seed_gives_the_same_intervals() -> None:
    first = intervals(varied(), seed=5)
    assert intervals(varied(), seed=5) == first
    assert intervals(varied(), seed=6) != first  # the seed is what makes it repeatable
    assert intervals(varied()) == intervals(varied())  # the default seed


def test_identical_cases_give_a_point_interval() -> None:
    cases = [Counts(2, 1, 1, 1)] * 5
    found = intervals(cases, resamples=50)
    assert found["precision"] == Interval(0.5, 0.5)
    assert found["recall"] == Interval(1.0, 1.0)
    f1 = found["f1"]
    assert f1 is not None
    assert f1.low == pytest.approx(2 / 3)
    assert f1.high == pytest.approx(2 / 3)


def test_two_opposite_cases_span_from_zero_to_one() -> None:
    # Resamples of two cases: both hits (P = 1, a quarter), both misses (P = 0, a quarter) or
    # one of each (P = 0.5): the 2.5th and 97.5th percentiles are 0 and 1.
    found = intervals([HIT, MISS], resamples=400)
    assert found["precision"] == Interval(0.0, 1.0)
    assert found["recall"] == Interval(0.0, 1.0)


def test_a_figure_no_resample_defines_has_no_interval() -> None:
    found = intervals([CLEAN_FP, CLEAN_FP], resamples=20)
    assert found["precision"] == Interval(0.0, 0.0)
    assert found["recall"] is None
    assert found["f1"] is None
    assert intervals([], resamples=20) == {"precision": None, "recall": None, "f1": None}


def test_the_same_results_differ_by_nothing() -> None:
    differences = paired_differences(varied(), varied(), resamples=200)
    for difference in differences.values():
        assert difference.observed == 0
        assert difference.interval == Interval(0.0, 0.0)
        assert not difference.beyond_noise


def test_a_gain_on_every_case_is_beyond_noise() -> None:
    before = [MISS] * 12
    after = [HIT] * 12
    differences = paired_differences(before, after, resamples=200)
    assert differences["recall"].observed == 1.0
    assert differences["recall"].interval == Interval(1.0, 1.0)
    assert differences["recall"].beyond_noise
    assert differences["precision"].beyond_noise


def test_gains_and_losses_that_balance_are_within_noise() -> None:
    before = [HIT, MISS] * 6
    after = [MISS, HIT] * 6
    differences = paired_differences(before, after)
    recall = differences["recall"]
    assert recall.observed == 0
    assert recall.interval is not None
    assert recall.interval.low < 0 < recall.interval.high
    assert not recall.beyond_noise


def test_one_gain_among_many_cases_is_within_noise_and_many_are_not() -> None:
    one = paired_differences([MISS] * 12, [HIT] + [MISS] * 11)["recall"]
    assert one.observed == pytest.approx(1 / 12)
    assert not one.beyond_noise  # a quarter of the resamples or more leave the one case out
    nine = paired_differences([MISS] * 12, [HIT] * 9 + [MISS] * 3)["recall"]
    assert nine.beyond_noise


def test_pairing_needs_the_same_number_of_cases() -> None:
    with pytest.raises(ValueError, match="same cases"):
        paired_differences([HIT], [HIT, MISS])
