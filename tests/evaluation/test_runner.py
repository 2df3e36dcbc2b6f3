"""Reviewing a case (evaluation/runner.py): findings the evidence rule drops are counted."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from pr_review_api.evaluation.corpus import build_corpus
from pr_review_api.evaluation.runner import review_case
from pr_review_api.settings import load_settings
from tests.conftest import PROVIDER_KEY
from tests.fakes.provider_server import ScriptedProvider, stop_turn

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


def finding(evidence: str) -> dict[str, Any]:
    return {
        "severity": "high",
        "title": "t",
        "explanation": "e",
        "path": "lib/last.py",
        "line": 2,
        "evidence": evidence,
        "recommendation": "r",
    }


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
                    finding("+    return items[len(items)]"),  # in the inline diff
                    finding("return items[len(items) + 1]"),  # never shown
                    finding("Indexing is one past the end."),  # prose only
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
