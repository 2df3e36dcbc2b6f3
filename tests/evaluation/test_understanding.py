"""evaluation/understanding.py: a case's linked issue given to the review, the walkthrough's
coverage and the verdict's accuracy scored, and both shown in the JSON, text and HTML reports
(specification §21; docs/walkthrough.md)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from pr_review_api.evaluation.corpus import build_corpus
from pr_review_api.evaluation.report import render_text, report_document
from pr_review_api.evaluation.report_html import render_html
from pr_review_api.evaluation.runner import CaseReport, review_case
from pr_review_api.settings import Settings, load_settings
from tests.builders import final_review
from tests.conftest import PROVIDER_KEY
from tests.fakes.provider_server import ScriptedProvider, stop_turn

CASE = """\
id = "a-feature"
kind = "feature"
language = "python"
title = "retry at most three times"

[source]
project = "pr-review evaluation"
licence = "MIT"
file = "lib/fetch.py"

[linked_issue]
title = "fetch <b>retries</b> forever"
body = "Stop after three retries."
expected = "no"

[[base]]
path = "lib/fetch.py"
text = '''
def fetch(get):
    while True:
        return get()
'''

[[edit]]
path = "lib/fetch.py"
old = "    while True:"
new = "    while 1:"

[[edit]]
path = "lib/other.py"
old = ""
new = "X = 1\\n"
"""


WALKED = {"paths": ["lib/fetch.py"], "summary": "while 1 <i>now</i>."}
NOT_ADDRESSED = {"ref": "#1", "addressed": "no", "explanation": "x"}


def settings_for(provider: ScriptedProvider, **extra: Any) -> Settings:
    return load_settings(
        opencode_api_key=PROVIDER_KEY,
        opencode_base_url=provider.base_url,
        opencode_max_retries=0,
        review_timeout_seconds=30,
        review_walkthrough=True,
        **extra,
    )


def test_a_case_issue_is_given_judged_and_reported(
    scripted_provider: ScriptedProvider, tmp_path: Path
) -> None:
    (tmp_path / "source" / "cases").mkdir(parents=True)
    (tmp_path / "source" / "cases" / "a.toml").write_text(CASE)
    built = build_corpus(tmp_path / "source", tmp_path / "built")
    [case] = built.cases
    assert case.linked_issue is not None
    # The walkthrough leaves out lib/other.py: a repair turn, then the same again: accepted
    # only once it names both files.
    second = final_review(summary="s", walkthrough=[WALKED], linked_issues=[NOT_ADDRESSED])
    second["walkthrough"].append({"paths": ["lib/other.py"], "summary": "A constant."})
    scripted_provider.script(
        stop_turn(final_review(summary="s", walkthrough=[WALKED], linked_issues=[NOT_ADDRESSED])),
        stop_turn(second),
    )
    settings = settings_for(scripted_provider, review_repair_attempts=1)
    outcome = asyncio.run(review_case(tmp_path / "built", case, 1, settings))
    first = scripted_provider.requests[0].json["messages"][1]["content"]
    assert '"ref": "#1"' in first
    assert "fetch \\u003cb>retries\\u003c/b> forever" in first  # untrusted, in its block
    assert outcome.understood.walkthrough == 1.0
    assert outcome.understood.correct
    document = report_document([CaseReport(case, [outcome])], settings, 1)
    assert document["total"]["walkthrough_coverage"] == 1.0
    assert document["total"]["linked_issues"] == {"reviews": 1, "correct": 1, "accuracy": 1.0}
    assert document["cases"][0]["runs"][0]["linked_issue"] == {"expected": "no", "verdict": "no"}
    assert "linked-issue verdicts as expected 1 of 1 (accuracy 1.00)" in render_text(document)
    page = render_html(document)
    assert 'id="understanding"' in page
    assert "while 1 &lt;i&gt;now&lt;/i&gt;." in page  # model text is text


def test_a_failed_review_covers_nothing_and_judges_wrong(
    scripted_provider: ScriptedProvider, tmp_path: Path
) -> None:
    (tmp_path / "source" / "cases").mkdir(parents=True)
    (tmp_path / "source" / "cases" / "a.toml").write_text(CASE)
    built = build_corpus(tmp_path / "source", tmp_path / "built")
    scripted_provider.script(stop_turn("not json"))
    settings = settings_for(scripted_provider)
    outcome = asyncio.run(review_case(tmp_path / "built", built.cases[0], 1, settings))
    assert outcome.termination_reason == "invalid_model_response"
    assert outcome.understood.walkthrough == 0.0
    assert not outcome.understood.correct
    document = report_document([CaseReport(built.cases[0], [outcome])], settings, 1)
    assert document["total"]["linked_issues"]["accuracy"] == 0.0


def test_without_them_a_report_reads_as_before(tmp_path: Path) -> None:
    document = report_document([], load_settings(opencode_api_key=PROVIDER_KEY), 1)
    assert "walkthrough_coverage" not in document["total"]
    assert "linked_issues" not in document["total"]
    assert "Understanding" not in render_text(document)
    assert 'id="understanding"' not in render_html(document)
