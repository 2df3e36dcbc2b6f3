"""Bootstrap intervals: how far precision, recall and F1 could move by the luck of the cases.

The unit resampled is the **case**, with all of its runs together: runs of one case share its
code and its golden issues, so they are not independent draws, while cases are. One resample
draws as many cases as the report has, with replacement, sums their counts (as a report's
total sums them) and computes the three figures. A figure a resample cannot compute (precision
of a resample without findings, recall and F1 of one without golden issues) is left out of
that figure's distribution.

The interval is the percentile interval: the 2.5th and 97.5th percentiles of the resampled
figures (linear interpolation between order statistics), from `RESAMPLES` resamples drawn by a
`random.Random` seeded with `SEED`, so the same report always gives the same interval.

A paired comparison of two reports of the same cases draws the same cases for both in each
resample and takes the difference B - A of each figure; the difference is **beyond noise**
when its interval excludes 0, and within noise otherwise. Pairing matters: most of the spread
of either report comes from which cases are hard, and that part cancels in the difference.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import astuple, dataclass

from pr_review_api.evaluation.scoring import Counts

RESAMPLES = 2000
SEED = 29
CONFIDENCE = 0.95
METRICS = ("precision", "recall", "f1")
METHOD = {
    "method": "percentile",
    "unit": "case",
    "confidence": CONFIDENCE,
    "resamples": RESAMPLES,
    "seed": SEED,
}
"""How the intervals were computed, as reports state it."""


@dataclass(frozen=True)
class Interval:
    """A two-sided percentile interval."""

    low: float
    high: float

    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0

    def rounded(self) -> list[float]:
        return [round(self.low, 4), round(self.high, 4)]


@dataclass(frozen=True)
class Difference:
    """One figure of report B minus the same figure of report A."""

    observed: float | None  # B's total minus A's total; None when either is undefined
    interval: Interval | None  # None when no resample could compute the difference

    @property
    def beyond_noise(self) -> bool:
        return self.interval is not None and self.interval.excludes_zero()


def figure(counts: Counts, name: str) -> float | None:
    """precision, recall or f1 of `counts`."""
    value: float | None = getattr(counts, name)
    return value


def percentile(ordered: Sequence[float], share: float) -> float:
    """The `share` quantile of sorted values, linear between order statistics."""
    position = share * (len(ordered) - 1)
    below = int(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


def percentile_interval(values: Sequence[float]) -> Interval | None:
    """The central CONFIDENCE interval of `values`; None when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    tail = (1 - CONFIDENCE) / 2
    return Interval(percentile(ordered, tail), percentile(ordered, 1 - tail))


def _drawer(cases: int, seed: int) -> Callable[[], list[int]]:
    """Each call draws `cases` case indices with replacement, from one seeded generator."""
    rng = random.Random(seed)  # noqa: S311  (resampling, not secrecy)
    return lambda: [rng.randrange(cases) for _ in range(cases)]


def _summer(cases: Sequence[Counts]) -> Callable[[list[int]], Counts]:
    """The total of the cases at the given indices (plain tuples: thousands of resamples)."""
    rows = [astuple(case) for case in cases]
    width = len(rows[0]) if rows else 0
    return lambda picked: Counts(*(sum(rows[i][column] for i in picked) for column in range(width)))


def intervals(
    cases: Sequence[Counts], *, resamples: int = RESAMPLES, seed: int = SEED
) -> dict[str, Interval | None]:
    """The interval of each figure of the cases' total; None for a figure never defined."""
    values: dict[str, list[float]] = {name: [] for name in METRICS}
    if cases:
        draw, total_of = _drawer(len(cases), seed), _summer(cases)
        for _ in range(resamples):
            total = total_of(draw())
            for name in METRICS:
                value = figure(total, name)
                if value is not None:
                    values[name].append(value)
    return {name: percentile_interval(values[name]) for name in METRICS}


def paired_differences(
    first: Sequence[Counts],
    second: Sequence[Counts],
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> dict[str, Difference]:
    """Per figure, `second` minus `first`, over cases given in the same order in both."""
    if len(first) != len(second):
        raise ValueError("a paired comparison needs the same cases on both sides")
    values: dict[str, list[float]] = {name: [] for name in METRICS}
    if first:
        draw, first_of, second_of = _drawer(len(first), seed), _summer(first), _summer(second)
        for _ in range(resamples):
            picked = draw()
            a, b = first_of(picked), second_of(picked)
            for name in METRICS:
                before, after = figure(a, name), figure(b, name)
                if before is not None and after is not None:
                    values[name].append(after - before)
    total_a, total_b = sum(first, Counts()), sum(second, Counts())
    differences = {}
    for name in METRICS:
        before, after = figure(total_a, name), figure(total_b, name)
        observed = None if before is None or after is None else after - before
        differences[name] = Difference(observed, percentile_interval(values[name]))
    return differences


def ratio_intervals(
    cases: Sequence[dict[str, tuple[int, int]]], *, resamples: int = RESAMPLES, seed: int = SEED
) -> dict[str, Interval | None]:
    """For figures that are one count over another (a custom check's accuracy: right results
    over expected results, specification §20), each case giving (numerator, denominator) per name:
    the interval of each figure of the total, resampling cases as `intervals` does."""
    names = sorted({name for case in cases for name in case})
    values: dict[str, list[float]] = {name: [] for name in names}
    if cases:
        draw = _drawer(len(cases), seed)
        for _ in range(resamples):
            picked = draw()
            for name in names:
                hits = sum(cases[i].get(name, (0, 0))[0] for i in picked)
                total = sum(cases[i].get(name, (0, 0))[1] for i in picked)
                if total:
                    values[name].append(hits / total)
    return {name: percentile_interval(values[name]) for name in names}
