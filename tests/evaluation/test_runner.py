"""Reviewing a case (evaluation/runner.py): findings the evidence rule drops are counted; a
review that ends with an error keeps its tokens and its error."""

from __future__ import annotations

import asyncio
from functools import partial
from pathlib import Path
from typing import Any

from pr_review_api.errors import ReviewTimeout
from pr_review_api.evaluation.corpus import build_corpus
from pr_review_api.evaluation.runner import RunError, review_case
from pr_review_api.settings import Settings, load_settings
from tests import builders
from tests.conftest import PROVIDER_KEY
from tests.fakes.provider_server import Reply, ScriptedProvider, stop_turn, tool_call_turn

CASE = """\
id = "a-defect"
kind = "off-by-one"
language = "python"
title = "last item"

[source]
project = "CPython"
licence = "PSF-2.0"
file = "Lib/example.py"

[[base]]
path = "lib/last.py"
text = '''
def last(items):
    return items[len(items) - 1]
'''

[[edit]]
path = "lib/last.py"
old = "items[len(items) - 1]"
new = "items[len(items)]"

[[golden]]
path = "lib/last.py"
lines = [2, 2]
issue = "Indexing with len(items) is one past the end."
"""


finding = partial(builders.finding, path="lib/last.py", line=2, **builders.TERSE)


def test_findings_dropped_for_ungrounded_evidence_are_counted(
    scripted_provider: ScriptedProvider, tmp_path: Path
) -> None:
    (tmp_path / "source" / "cases").mkdir(parents=True)
    (tmp_path / "source" / "cases" / "a.toml").write_text(CASE)
    built = build_corpus(tmp_path / "source", tmp_path / "built")
    scripted_provider.script(
        stop_turn(
            {
                "summary": "s",
                "findings": [
                    finding(evidence="+    return items[len(items)]"),  # in the inline diff
                    finding(evidence="return items[len(items) + 1]"),  # never shown
                    finding(evidence="Indexing is one past the end."),  # prose only
                ],
                "notes": [],
            }
        )
    )
    settings = load_settings(
        opencode_api_key=PROVIDER_KEY,
        opencode_base_url=scripted_provider.base_url,
        opencode_max_retries=0,
        review_timeout_seconds=30,
        review_inline_diff_bytes=16384,
        review_require_evidence=True,
    )
    outcome = asyncio.run(review_case(tmp_path / "built", built.cases[0], 1, settings))
    assert outcome.termination_reason == "final_review"
    assert outcome.ungrounded == 2
    assert (outcome.counts.findings, outcome.counts.matched_golden) == (1, 1)
    scripted_provider.assert_complete()


def _settings(provider: ScriptedProvider, **overrides: Any) -> Settings:
    return load_settings(
        opencode_api_key=PROVIDER_KEY,
        opencode_base_url=provider.base_url,
        opencode_max_retries=0,
        **overrides,
    )


def _built(tmp_path: Path) -> Any:
    (tmp_path / "source" / "cases").mkdir(parents=True)
    (tmp_path / "source" / "cases" / "a.toml").write_text(CASE)
    return build_corpus(tmp_path / "source", tmp_path / "built")


def test_a_review_that_times_out_reports_the_tokens_it_spent(
    scripted_provider: ScriptedProvider, tmp_path: Path
) -> None:
    # A failed review still counts its tokens: one answered turn (15 tokens), then a reply
    # that never comes in time.
    built = _built(tmp_path)
    scripted_provider.script(
        tool_call_turn([("call_1", "inspect_git_diff", {})]),
        Reply(status=200, body=b"{}", delay=60.0),
    )
    settings = _settings(scripted_provider, review_timeout_seconds=2)
    outcome = asyncio.run(review_case(tmp_path / "built", built.cases[0], 1, settings))
    assert outcome.termination_reason == "review_timeout"
    assert (outcome.tokens, outcome.rounds) == (15, 2)
    assert outcome.error == RunError("review_timeout", ReviewTimeout.default_message, rule=None)


def test_a_refused_final_review_keeps_its_code_message_and_rule(
    scripted_provider: ScriptedProvider, tmp_path: Path
) -> None:
    built = _built(tmp_path)
    scripted_provider.script(stop_turn("```json\n{}\n```"))
    settings = _settings(scripted_provider, review_timeout_seconds=30)
    outcome = asyncio.run(review_case(tmp_path / "built", built.cases[0], 1, settings))
    assert outcome.termination_reason == "invalid_model_response"
    assert outcome.tokens == 15
    assert outcome.error is not None
    assert (outcome.error.code, outcome.error.rule) == ("invalid_model_response", "fence")
    assert outcome.error.message.startswith("The final review was wrapped in a Markdown code fence")
    scripted_provider.assert_complete()
