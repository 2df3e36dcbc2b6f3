"""Custom checks in every output and the gate (specification §20): text, Markdown, JSON, SARIF, the
GitHub and GitLab bodies and the gate's outcome; their words escaped wherever shown; without
checks, nothing changes (tests/output/test_suggestion_outputs.py holds every output byte for
byte)."""

from __future__ import annotations

import json

from markdown_it import MarkdownIt

from pr_review_api.github.layout import render_review_body
from pr_review_api.gitlab.note_text import render_note
from pr_review_api.model import CheckResult, Coverage, ReviewResult
from pr_review_api.output import formats
from pr_review_api.output.custom_checks import Mode, blocking, closed_on_checks, gate_with_checks
from pr_review_api.output.gate_outcome import ended_outcome, review_outcome
from pr_review_api.publishing.placement import Placement
from tests.output.test_formats import _sarif
from tests.results import review_result

HOSTILE = "@org/admins see #12 <img src=x> [x](https://evil.example) | cell\n# heading\u202e"


def check(name: str, result: str, evidence: str = "save(widget)") -> CheckResult:
    return CheckResult.model_validate(
        {"name": name, "result": result, "explanation": HOSTILE, "evidence": evidence}
    )


def with_checks(*results: CheckResult) -> ReviewResult:
    result = review_result([])
    review = result.review.model_copy(update={"checks": list(results)})
    return result.model_copy(update={"review": review})


CHECKS = (check("Migrations have a downgrade", "fail"), check(HOSTILE, "pass"))


def test_json_carries_the_checks_and_text_shows_each_escaped() -> None:
    result = with_checks(*CHECKS)
    document = json.loads(formats.render(result, "json"))
    assert [c["result"] for c in document["review"]["checks"]] == ["fail", "pass"]
    text = formats.render(result, "text")
    assert "Checks: 2 checks: 1 pass, 1 fail" in text
    assert "[FAIL] Migrations have a downgrade" in text
    assert "\u202e" not in text
    assert "Evidence:\n        save(widget)" in text


def test_markdown_and_the_forge_bodies_make_the_words_inert() -> None:
    result = with_checks(*CHECKS)
    bodies = [
        formats.render(result, "markdown"),
        render_review_body(result, Placement())[0],
        render_note(result, Placement())[0],
    ]
    for body in bodies:
        assert "Checks" in body
        html = MarkdownIt("commonmark").enable("table").render(body)
        assert "<img" not in html
        assert "<a " not in html
        assert "<h1" not in html
        assert "@org" not in body.replace("@\u2060", "")  # no mention survives
        assert "| Migrations have a downgrade |" in body


def test_sarif_keeps_them_in_the_runs_property_bag_and_stays_valid() -> None:
    document = _sarif(with_checks(*CHECKS))
    (run,) = document["runs"]
    assert [c["name"] for c in run["properties"]["checks"]] == [CHECKS[0].name, HOSTILE]
    assert run["results"] == []
    assert "checks" not in _sarif(review_result([]))["runs"][0]["properties"]


def test_only_error_checks_that_did_not_pass_block() -> None:
    modes: dict[str, Mode] = {"a": "error", "b": "error", "c": "warning", "d": "error"}
    results = [
        check("a", "fail"),
        check("b", "inconclusive"),
        check("c", "fail"),
        check("d", "pass"),
    ]
    assert [r.name for r in blocking(results, modes)] == ["a", "b"]


def test_the_gate_fails_on_an_error_check_whatever_fail_on_and_names_no_check_in_its_title() -> (
    None
):
    passing = review_outcome([], "none", (), Coverage(), None)
    assert passing.conclusion == "success"
    modes: dict[str, Mode] = {HOSTILE: "error", "warn": "warning"}
    failed = gate_with_checks(passing, [check(HOSTILE, "fail"), check("warn", "fail")], modes)
    assert failed.conclusion == "failure"
    assert failed.title == "1 error check not passed (1 failed, 0 inconclusive)"
    assert HOSTILE not in failed.brief
    assert "| warn | warning |" in failed.summary
    assert "<img" not in MarkdownIt("commonmark").enable("table").render(failed.summary)
    kept = gate_with_checks(passing, [check("warn", "fail")], modes)
    assert kept.conclusion == "success"
    assert gate_with_checks(passing, [], modes) is passing


def test_an_outcome_without_the_checks_results_fails_closed_only_with_an_error_check() -> None:
    neutral = ended_outcome("invalid_model_response", "none")
    assert neutral.conclusion == "neutral"
    closed = closed_on_checks(neutral, {"a": "error", "b": "warning"})
    assert closed.conclusion == "failure"
    assert closed.title.startswith("1 error check not decided.")
    assert closed_on_checks(neutral, {"b": "warning"}) is neutral
    failing = ended_outcome("invalid_model_response", "high")
    assert closed_on_checks(failing, {"a": "error"}) is failing
