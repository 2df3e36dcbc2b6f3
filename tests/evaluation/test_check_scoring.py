"""Custom checks in the evaluation (evaluation/check_scoring.py, specification §20): a case of kind
`check` names what its checks should come out as; a review of it is scored per expected kind,
with bootstrap intervals, in the report's JSON and text; a corpus without checks reports
nothing new. The eval/checks corpus builds and is sound."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from pr_review_api.errors import InvalidRequest
from pr_review_api.evaluation.check_scoring import CheckScore, check_figures, check_intervals
from pr_review_api.evaluation.corpus import build_corpus, check_case, load_source
from pr_review_api.evaluation.report import render_text, report_document
from pr_review_api.evaluation.runner import CaseReport, review_case
from pr_review_api.settings import load_settings
from tests.builders import final_turn
from tests.conftest import PROVIDER_KEY
from tests.fakes.provider_server import ScriptedProvider

CHECKS = Path(__file__).parents[2] / "eval" / "checks"


def test_the_checks_corpus_builds_sound_with_four_fails_and_four_passes(tmp_path: Path) -> None:
    built = build_corpus(CHECKS, tmp_path / "built")
    assert [check_case(tmp_path / "built", case) for case in built.cases] == [[]] * 8
    expected = [check.result for case in built.cases for check in case.checks]
    assert sorted(expected) == ["fail"] * 4 + ["pass"] * 4
    manifest = json.loads((tmp_path / "built" / "corpus.json").read_text())
    assert all("checks" in case for case in manifest["cases"])


def test_a_check_case_needs_expected_checks_named_once(tmp_path: Path) -> None:
    text = (CHECKS / "cases" / "check-sql-bound.toml").read_text()
    for broken in (
        text.rsplit("[[checks]]", maxsplit=1)[0],  # none expected
        text + '\n[[checks]]\nname = "SQL uses bound parameters"\nresult = "fail"\n',
    ):
        (tmp_path / "cases").mkdir(exist_ok=True)
        (tmp_path / "cases" / "a.toml").write_text(broken)
        with pytest.raises(InvalidRequest, match="invalid"):
            load_source(tmp_path)


def test_a_review_of_a_check_case_is_scored_and_reported(
    scripted_provider: ScriptedProvider, tmp_path: Path
) -> None:
    built = build_corpus(CHECKS, tmp_path / "built")
    case = next(c for c in built.cases if c.id == "check-sql-interpolated")
    check = {
        "name": "SQL uses bound parameters",
        "result": "fail",
        "explanation": "The name is put into the SQL text.",
        "evidence": (
            "+    cursor.execute(f\"SELECT id, name, email FROM users WHERE name = '{name}' "
            'ORDER BY id")'
        ),
    }
    scripted_provider.script(final_turn(summary="s", checks=[check]))
    settings = load_settings(
        opencode_api_key=PROVIDER_KEY,
        opencode_base_url=scripted_provider.base_url,
        opencode_max_retries=0,
        review_timeout_seconds=30,
        review_inline_diff_bytes=16384,
    )
    outcome = asyncio.run(review_case(tmp_path / "built", case, 1, settings))
    assert outcome.checks == (CheckScore("SQL uses bound parameters", "fail", "fail"),)
    document = report_document([CaseReport(case, [outcome])], settings, runs=1)
    total = document["total"]["checks"]
    assert total["accuracy"]["all"] == {"expected": 1, "right": 1, "accuracy": 1.0}
    assert total["accuracy"]["fail"]["right"] == 1
    assert total["results"] == {"fail": 1}
    assert document["cases"][0]["runs"][0]["checks"][0]["got"] == "fail"
    assert "Custom checks right: all checks 1/1 (1.00, 95% 1.00-1.00)" in render_text(document)


def test_accuracy_per_expected_kind_with_intervals_over_cases() -> None:
    right = CheckScore("a", "fail", "fail")
    wrong = CheckScore("b", "pass", "inconclusive")
    missing = CheckScore("c", "fail", None)
    figures = check_figures([right, wrong, missing])
    assert figures["accuracy"]["all"]["accuracy"] == round(1 / 3, 4)
    assert figures["accuracy"]["fail"] == {"expected": 2, "right": 1, "accuracy": 0.5}
    assert figures["accuracy"]["pass"]["right"] == 0
    assert figures["results"] == {"fail": 1, "inconclusive": 1, "none": 1}
    intervals = check_intervals([[right], [wrong], [missing], []])
    assert intervals["all"] is not None
    assert 0.0 <= intervals["all"][0] <= intervals["all"][1] <= 1.0
    assert intervals == check_intervals([[right], [wrong], [missing], []])  # seeded
