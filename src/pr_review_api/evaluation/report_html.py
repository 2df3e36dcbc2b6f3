"""The evaluation report as one HTML page: `pr-review eval --format html`.

The same document as `--format json` (evaluation/report.py): the settings the reviews ran
with, a bar chart of precision and recall per case and in total (an inline SVG: no script,
no external file, so the page opens anywhere and can be attached to a CI run), and the table
of every figure. Case ids and kinds come from someone else's corpus: Jinja2's autoescape
makes them text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

from pr_review_api.evaluation.report import errors

_CHART_HEIGHT = 200  # the plot area, in SVG units
_TOP = 20
_LEFT = 72  # the axis labels, and room for the first case's slanted name
_NAME_CHARS = 14  # a longer case id is cut in the chart (the table has it whole)
_BAR = 22
_GROUP_GAP = 26
_LABEL_SPACE = 70
_TICKS = (0.0, 0.25, 0.5, 0.75, 1.0)

_templates = Environment(
    loader=PackageLoader("pr_review_api.evaluation", "templates"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


@dataclass(frozen=True)
class Bar:
    """One bar: its place, and its value (None: no bar, `n/a` written instead)."""

    metric: str  # "precision" or "recall"
    x: float
    value: float | None

    @property
    def height(self) -> float:
        return 0.0 if self.value is None else round(self.value * _CHART_HEIGHT, 2)

    @property
    def y(self) -> float:
        return _TOP + _CHART_HEIGHT - self.height

    @property
    def label(self) -> str:
        return "n/a" if self.value is None else f"{self.value:.2f}"


@dataclass(frozen=True)
class Group:
    """A case (or the total): its two bars and where its name goes."""

    name: str
    bars: tuple[Bar, Bar]
    center: float


@dataclass(frozen=True)
class Chart:
    groups: list[Group]
    width: float
    height: float
    top: float
    left: float
    bottom: float
    bar: float
    ticks: list[tuple[float, str]]  # (y, label)


def chart(document: dict[str, Any]) -> Chart:
    """Precision and recall of each case, then of the total, as SVG geometry."""
    rows = [(case["id"], case) for case in document["cases"]] + [("TOTAL", document["total"])]
    groups = []
    for index, (name, figures) in enumerate(rows):
        start = _LEFT + _GROUP_GAP / 2 + index * (2 * _BAR + _GROUP_GAP)
        bars = (
            Bar("precision", start, figures.get("precision")),
            Bar("recall", start + _BAR, figures.get("recall")),
        )
        label = str(name) if len(str(name)) <= _NAME_CHARS else str(name)[: _NAME_CHARS - 1] + "…"
        groups.append(Group(label, bars, start + _BAR))
    width = _LEFT + len(rows) * (2 * _BAR + _GROUP_GAP) + 10
    ticks = [(_TOP + _CHART_HEIGHT * (1 - tick), f"{tick:.2f}") for tick in _TICKS]
    return Chart(
        groups=groups,
        width=width,
        height=_TOP + _CHART_HEIGHT + _LABEL_SPACE,
        top=_TOP,
        left=_LEFT,
        bottom=_TOP + _CHART_HEIGHT,
        bar=_BAR,
        ticks=ticks,
    )


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def understanding_rows(document: dict[str, Any]) -> list[dict[str, Any]]:
    """specification §21, per case that measured it: the walkthrough's coverage, the linked issue's
    expected verdict and the runs' verdicts, and the first run's walkthrough (its table)."""
    rows = []
    for case in document["cases"]:
        if "walkthrough_coverage" not in case and "linked_issues" not in case:
            continue
        runs = case.get("runs", [])
        linked = [run["linked_issue"] for run in runs if "linked_issue" in run]
        rows.append(
            {
                "id": case["id"],
                "coverage": case.get("walkthrough_coverage"),
                "expected": linked[0]["expected"] if linked else None,
                "verdicts": [item["verdict"] or "none" for item in linked],
                "walkthrough": runs[0].get("walkthrough", []) if runs else [],
            }
        )
    return rows


def render_html(document: dict[str, Any]) -> str:
    """The page for `document` (`report.report_document`)."""
    return _templates.get_template("report.html").render(
        document=document,
        chart=chart(document),
        cell=_cell,
        understanding=understanding_rows(document),
        errors=errors(document),
    )
