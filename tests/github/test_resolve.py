"""Fixed findings' threads resolved (CONTRACT 15, github/resolve.py): `pr-review review --post`
twice through the CLI against the fake GitHub (its GraphQL review threads and
`resolveReviewThread`) and the scripted provider.

At the second head, the thread of a finding whose line changed and that the review no longer
reports is resolved; one whose line did not change, one the review reports again, and one with a
question we have not answered stay open; `publication.resolved` counts them.
"""

from __future__ import annotations

import json
from typing import Any

from tests.conftest import GITHUB_TOKEN
from tests.fakes.github_server import FakeGitHub, fake_github
from tests.fakes.provider_server import ScriptedProvider, stop_turn
from tests.github.test_preflight import env, review

__all__ = ["env", "fake_github"]

BASE = "one\ntwo\nthree\nfour\nfive\n"
HEAD = "one\nTWO\nTHREE\nFOUR\nfive\n"
FIXED = "one\n2\n3\nFOUR\nfive\n"


def finding(title: str, line: int) -> dict[str, Any]:
    return {
        "severity": "medium",
        "title": title,
        "explanation": "Explained.",
        "path": "a.py",
        "line": line,
        "evidence": "e",
        "recommendation": "r",
    }


def final(*findings: dict[str, Any]) -> dict[str, Any]:
    return stop_turn(json.dumps({"summary": "S", "findings": list(findings), "notes": []}))


def test_a_fixed_findings_thread_is_resolved_and_no_other(
    env: FakeGitHub, scripted_provider: ScriptedProvider
) -> None:
    pr = env.pull_request("acme", "widget", 7, base={"a.py": BASE}, head={"a.py": HEAD})
    fixed, asked, unchanged, again = (
        finding("Two is loud", 2),
        finding("Three is loud", 3),
        finding("Four is loud", 4),
        finding("Five is plain", 5),
    )
    scripted_provider.script(final(fixed, asked, unchanged, again))
    first = review(pr)
    assert first.exit_code == 0, first.output
    threads = {c["line"]: c for c in env.review_comments[("acme", "widget", 7)]}
    env.add_review_comment("acme", "widget", 7, "alice", "Is this really loud?", threads[3]["id"])
    pushed = env.push_head(pr, {"a.py": FIXED})
    scripted_provider.script(final(again))
    second = review(pushed)
    assert second.exit_code == 0, second.output
    publication = json.loads(second.stdout)["publication"]
    assert publication["resolved"] == 1
    assert env.resolved_threads == {f"PRRT_{threads[2]['id']}"}
    assert GITHUB_TOKEN not in second.output
