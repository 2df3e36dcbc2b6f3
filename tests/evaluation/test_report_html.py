"""`pr-review eval --format html` (evaluation/report_html.py): the page, its inline SVG chart of
precision and recall per case and in total, and a corpus's hostile case ids kept as text.
"""

from __future__ import annotations

import copy
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from pr_review_api.evaluation.report_html import render_html
from tests.cli.test_eval import CLEAN, DEFECT, _eval, _script_two_runs
from tests.fakes.provider_server import ScriptedProvider


class Elements(HTMLParser):
    """Each element with its attributes, and the page's text."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, {name: value or "" for name, value in attrs}))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def bars(self) -> list[dict[str, str]]:
        return [attrs for tag, attrs in self.elements if tag == "rect"]


def _figures(precision: float | None, recall: float | None, **extra: Any) -> dict[str, Any]:
    return {
        "reviews": 2,
        "final_review_share": 1.0,
        "termination_reasons": {"final_review": 2},
        "findings": 3,
        "precision": precision,
        "recall": recall,
        "f1": None,
        "tokens_per_review": 100.0,
        "rounds_per_review": 2.0,
        "wall_seconds_per_review": 1.5,
        "coverage": None,
        **extra,
    }


DOCUMENT: dict[str, Any] = {
    "runs": 2,
    "settings": {"opencode_model": "m<1>", "review_max_rounds": 8},
    "cases": [
        {"id": "a-defect", "kind": "k", **_figures(0.5, 1.0)},
        {"id": "<script>alert(1)</script>", "kind": "k", **_figures(0.0, None)},
    ],
    "total": {"cases": 2, **_figures(0.25, 0.5)},
}


def test_the_chart_has_a_bar_per_known_figure_with_its_height_in_proportion() -> None:
    page = Elements(render_html(copy.deepcopy(DOCUMENT)))
    bars = page.bars()
    # Precision and recall of each case and the total; the unknown recall has no bar.
    assert [bar["class"] for bar in bars] == [
        "bar precision",
        "bar recall",
        "bar precision",
        "bar precision",
        "bar recall",
    ]
    heights = [float(bar["height"]) for bar in bars]
    assert heights == [100.0, 200.0, 0.0, 50.0, 100.0]
    assert [tag for tag, _ in page.elements].count("svg") == 1
    text = "".join(page.text)
    assert "n/a" in text
    assert "TOTAL" in text


def test_the_page_has_no_script_and_keeps_corpus_text_as_text() -> None:
    html = render_html(copy.deepcopy(DOCUMENT))
    page = Elements(html)
    assert "script" not in [tag for tag, _ in page.elements]
    assert "<script>alert(1)</script>" in "".join(page.text)
    assert "m<1>" in "".join(page.text)
    for _, attrs in page.elements:
        assert not [name for name in attrs if name.startswith("on")]
        assert "http" not in attrs.get("href", "") + attrs.get("src", "")


@pytest.fixture
def source(tmp_path: Path) -> Path:
    folder = tmp_path / "source"
    (folder / "cases").mkdir(parents=True)
    (folder / "cases" / "a.toml").write_text(DEFECT)
    (folder / "cases" / "b.toml").write_text(CLEAN)
    return folder


def test_eval_format_html_prints_the_page(
    scripted_provider: ScriptedProvider, source: Path
) -> None:
    _script_two_runs(scripted_provider)
    result = _eval(scripted_provider, str(source), "--runs", "2", "--format", "html")
    assert result.exit_code == 0, result.output
    page = Elements(result.stdout)
    # a-defect: precision 0.5 and recall 0.5; b-clean: precision 0, no golden issue (no
    # recall); total: precision 1/3, recall 0.5.
    heights = [(bar["class"], float(bar["height"])) for bar in page.bars()]
    assert heights == [
        ("bar precision", 100.0),
        ("bar recall", 100.0),
        ("bar precision", 0.0),
        ("bar precision", 66.66),  # 0.3333 of the plot height
        ("bar recall", 100.0),
    ]
    assert result.stdout.startswith("<!doctype html>")
