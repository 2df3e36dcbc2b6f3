"""Fixed findings' threads resolved (specification §15, github/resolve.py): `pr-review review
--post` twice through the CLI against the fake GitHub (its GraphQL review threads and
`resolveReviewThread`) and the scripted provider.

At the second head, the thread of a finding whose line changed and that the review no longer
reports is resolved; one whose line did not change, one the review reports again, and one with a
question we have not answered stay open; `publication.resolved` counts them.
"""

from __future__ import annotations

import json
from functools import partial

from tests import builders
from tests.builders import BRIEF, final_turn
from tests.conftest import GITHUB_TOKEN
from tests.fakes.github_server import FakeGitHub
from tests.fakes.provider_server import ScriptedProvider
from tests.github.test_preflight import review

BASE = "one\ntwo\nthree\nfour\nfive\n"
HEAD = "one\nTWO\nTHREE\nFOUR\nfive\n"
FIXED = "one\n2\n3\nFOUR\nfive\n"


finding = partial(builders.finding, severity="medium", path="a.py", **BRIEF)


def test_a_fixed_findings_thread_is_resolved_and_no_other(
    env: FakeGitHub, scripted_provider: ScriptedProvider
) -> None:
    pr = env.pull_request("acme", "widget", 7, base={"a.py": BASE}, head={"a.py": HEAD})
    fixed, asked, unchanged, again = (
        finding(title="Two is loud", line=2),
        finding(title="Three is loud", line=3),
        finding(title="Four is loud", line=4),
        finding(title="Five is plain", line=5),
    )
    scripted_provider.script(final_turn(fixed, asked, unchanged, again))
    first = review(pr)
    assert first.exit_code == 0, first.output
    threads = {c["line"]: c for c in env.review_comments[("acme", "widget", 7)]}
    env.add_review_comment("acme", "widget", 7, "alice", "Is this really loud?", threads[3]["id"])
    pushed = env.push_head(pr, {"a.py": FIXED})
    scripted_provider.script(final_turn(again))
    second = review(pushed)
    assert second.exit_code == 0, second.output
    publication = json.loads(second.stdout)["publication"]
    assert publication["resolved"] == 1
    assert env.resolved_threads == {f"PRRT_{threads[2]['id']}"}
    assert GITHUB_TOKEN not in second.output
