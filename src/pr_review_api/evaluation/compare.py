"""`pr-review eval compare A.json B.json`: which differences between two reports are not noise.

Both files are `pr-review eval --format json` documents of the same corpus: the same case ids,
each with the same number of golden issues; anything else is refused (`invalid_request`), as
is a file that is not a regular file, is larger than `MAX_REPORT_BYTES`, or is not such a
document. Messages name a report as "first" or "second", never by its path.

Each case's counts are summed over its runs; the paired bootstrap (evaluation/bootstrap.py)
then gives, per figure, B - A, its 95% interval and whether that interval excludes 0.
Reports with different numbers of runs may be compared: every figure is a ratio of sums.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Annotated, Any, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from pr_review_api.errors import InvalidRequest
from pr_review_api.evaluation import bootstrap
from pr_review_api.evaluation.scoring import Counts

MAX_REPORT_BYTES = 32 * 1024 * 1024
MAX_REPORT_CASES = 10_000

Count = Annotated[int, Field(ge=0, strict=True)]


class CaseFigures(BaseModel):
    """What comparing needs of one case of a report: its id and its counts over all runs."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    id: Annotated[str, Field(min_length=1, max_length=200, strict=True)]
    golden_issues: Count
    findings: Count
    matched_findings: Count
    golden: Count
    matched_golden: Count
    duplicates: Count = 0  # reports made before duplicates were counted have none

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.matched_findings + self.duplicates > self.findings:
            raise ValueError("more matched findings than findings")
        if self.matched_golden > self.golden:
            raise ValueError("more matched golden issues than golden issues")
        return self

    def counts(self) -> Counts:
        return Counts(
            self.findings, self.matched_findings, self.golden, self.matched_golden, self.duplicates
        )


class ReportFigures(BaseModel):
    """The parts of an evaluation report that comparing reads."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    runs: Annotated[int, Field(ge=1, strict=True)]
    settings: dict[str, Any] = Field(default_factory=dict)
    cases: Annotated[list[CaseFigures], Field(max_length=MAX_REPORT_CASES)]


def read_report(path: Path, label: str) -> ReportFigures:
    """Read and check one report; `label` ("first", "second") names it in errors."""
    data = _read_regular_file(path, label)
    try:
        document = json.loads(data.decode("utf-8"))
        report = ReportFigures.model_validate(document)
    except (ValueError, RecursionError):  # a decoding or a validation error is a ValueError
        raise InvalidRequest(f"The {label} report is not a pr-review eval JSON report.") from None
    ids = [case.id for case in report.cases]
    if len(set(ids)) != len(ids):
        raise InvalidRequest(f"The {label} report names a case twice.")
    return report


def _read_regular_file(path: Path, label: str) -> bytes:
    # O_NONBLOCK: opening a FIFO must not wait for a writer; the type is checked right after,
    # on the descriptor (a directory opens, then is refused; nothing is read before the check).
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        descriptor = os.open(path, flags)
    except OSError:
        raise InvalidRequest(f"The {label} report could not be opened.") from None
    too_large = InvalidRequest(f"The {label} report is larger than 32 MiB.")
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise InvalidRequest(f"The {label} report is not a regular file.")
        if info.st_size > MAX_REPORT_BYTES:
            raise too_large
        with os.fdopen(descriptor, "rb", closefd=False) as handle:
            data = handle.read(MAX_REPORT_BYTES + 1)
    except OSError:
        raise InvalidRequest(f"The {label} report could not be read.") from None
    finally:
        os.close(descriptor)
    if len(data) > MAX_REPORT_BYTES:  # it grew after fstat
        raise too_large
    return data


def _paired_counts(
    first: ReportFigures, second: ReportFigures
) -> tuple[list[Counts], list[Counts]]:
    """Both reports' per-case counts, in the first report's case order."""
    theirs = {case.id: case for case in second.cases}
    if {case.id for case in first.cases} != set(theirs) or any(
        case.golden_issues != theirs[case.id].golden_issues for case in first.cases
    ):
        raise InvalidRequest(
            "The two reports are not of the same corpus: their cases or golden issues differ."
        )
    if not first.cases:
        raise InvalidRequest("The reports have no cases to compare.")
    return (
        [case.counts() for case in first.cases],
        [theirs[case.id].counts() for case in first.cases],
    )


def _side(report: ReportFigures, cases: list[Counts]) -> dict[str, Any]:
    total = sum(cases, Counts())
    found = bootstrap.intervals(cases)
    figures: dict[str, Any] = {"runs": report.runs, "settings": report.settings}
    for name in bootstrap.METRICS:
        value = bootstrap.figure(total, name)
        interval = found[name]
        figures[name] = None if value is None else round(value, 4)
        figures[f"{name}_interval"] = None if interval is None else interval.rounded()
    figures["duplicates"] = total.duplicates
    figures["false_positives"] = total.false_positives
    return figures


def compare_document(first: ReportFigures, second: ReportFigures) -> dict[str, Any]:
    """The `eval compare --format json` document: each side, and B - A per figure."""
    a, b = _paired_counts(first, second)
    differences = bootstrap.paired_differences(a, b)
    changed = {
        name: [first.settings.get(name), second.settings.get(name)]
        for name in sorted(set(first.settings) | set(second.settings))
        if first.settings.get(name) != second.settings.get(name)
    }
    return {
        "cases": len(a),
        "first": _side(first, a),
        "second": _side(second, b),
        "settings_changed": changed,
        "differences": {
            name: {
                "observed": None if d.observed is None else round(d.observed, 4),
                "interval": None if d.interval is None else d.interval.rounded(),
                "beyond_noise": d.beyond_noise,
            }
            for name, d in differences.items()
        },
        "bootstrap": bootstrap.METHOD,
    }


_LABELS = {"precision": "precision", "recall": "recall", "f1": "F1"}


def _number(value: float | None, sign: str = "") -> str:
    return "-" if value is None else f"{value:{sign}.2f}"


def _span(interval: list[float] | None, sign: str = "") -> str:
    if interval is None:
        return "no interval"
    return f"{_number(interval[0], sign)} to {_number(interval[1], sign)}"


def render_compare_text(document: dict[str, Any]) -> str:
    """One line per figure: both values with their intervals, the difference, the verdict."""
    first, second = document["first"], document["second"]
    method = document["bootstrap"]
    out = [
        f"Paired bootstrap over the {document['cases']} cases of both reports "
        f"({method['resamples']} resamples, seed {method['seed']}, 95% percentile intervals); "
        "difference = second - first."
    ]
    for name, label in _LABELS.items():
        difference = document["differences"][name]
        verdict = "beyond noise" if difference["beyond_noise"] else "within noise"
        if difference["interval"] is None:
            verdict = "not comparable (undefined in a report or every resample)"
        out.append(
            f"{label}: {_number(first[name])} ({_span(first[f'{name}_interval'])}) -> "
            f"{_number(second[name])} ({_span(second[f'{name}_interval'])}); difference "
            f"{_number(difference['observed'], '+')} ({_span(difference['interval'], '+')}): "
            f"{verdict}."
        )
    out.append(
        f"Duplicates {first['duplicates']} -> {second['duplicates']}; "
        f"false positives {first['false_positives']} -> {second['false_positives']}."
    )
    changed = document["settings_changed"]
    shown = "; ".join(
        f"{name} {json.dumps(a)} -> {json.dumps(b)}" for name, (a, b) in changed.items()
    )
    out.append(f"Settings that differ: {shown or 'none'}.")
    return "\n".join(out)
