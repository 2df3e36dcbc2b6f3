"""A pull request that does not fill up with reviews (specification §10, github/summary.py):
`pr-review review --post` through the CLI against the fake GitHub (reviews, their edits, review
threads, check runs) and the scripted provider, head after head of one pull request, with real git.

Our first review is the full one. A later head with new findings posts a short review; one
with nothing new posts none; either way our first review's body is rewritten to carry the
current summary and every head's marker, so a head is never reviewed twice and a fingerprint
never posted twice. A finding an open thread of ours stands for is not posted again when its
line's text changed. The text report's last line says what `--post` did.
"""

from __future__ import annotations

import asyncio
import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from pr_review_api.cli import commands as cli
from pr_review_api.github.client import GitHubClient
from pr_review_api.github.layout import render_review_body
from pr_review_api.github.summary import CUT, DROPPED_FINDINGS, MAX_EDITED_BODY_CHARS, updated_body
from pr_review_api.model import Finding
from pr_review_api.output.gate_outcome import severity_counts
from pr_review_api.output.inert_markdown import escape
from pr_review_api.publishing.markers import finding_marker, head_marker, ordered_markers
from pr_review_api.publishing.placement import Placed, Placement
from tests import builders
from tests.builders import BRIEF, final_turn, finding_model
from tests.conftest import BOT, GITHUB_TOKEN, examples
from tests.fakes.github_server import CannedResponse, FakeGitHub, PullRequestFixture
from tests.fakes.provider_server import ScriptedProvider
from tests.results import HEAD_SHA, review_result

BASE = "def total(values):\n    return sum(values)\n"
HEAD_1 = BASE + "\n\ndef average(values):\n    return total(values[:-1]) / len(values)\n"
HEAD_3 = HEAD_1 + "\n\ndef median(values):\n    return sorted(values)[len(values) // 2]\n"
# Line 6 rewritten: the finding on it stays, its fingerprint (path, title, line text) changes.
HEAD_4 = HEAD_3.replace("/ len(values)", "/ max(len(values), 1)")
DROPS = "average() drops the last value"


finding = partial(builders.finding, path="stats.py", **BRIEF)


def run(pr: PullRequestFixture, output: str = "json") -> Result:
    return CliRunner().invoke(cli.main, ["review", pr.url, "--post", "--format", output])


def publication(done: Result) -> dict[str, Any]:
    assert done.exit_code == 0, done.output
    document: dict[str, Any] = json.loads(done.stdout)["publication"]
    return document


def ours(fake: FakeGitHub) -> list[dict[str, Any]]:
    return [r for r in fake.posted("acme", "widget", 7) if r["user"]["login"] == BOT]


@pytest.fixture
def pr(env: FakeGitHub) -> PullRequestFixture:
    base = {"stats.py": BASE}
    return env.pull_request("acme", "widget", 7, base=base, head={"stats.py": HEAD_1})


def test_four_heads_give_one_full_review_one_short_one_and_one_summary_kept_current(
    env: FakeGitHub,
    pr: PullRequestFixture,
    scripted_provider: ScriptedProvider,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PR_REVIEW_CHECK_RUNS", "true")
    drops, untested = (
        finding(title=DROPS, line=6),
        finding(title="No tests for average()", line=None, severity="low"),
    )
    # Head 1: the first review, in full.
    scripted_provider.script(
        final_turn(drops, untested, summary="First look", notes=["Note: First look"])
    )
    first = publication(run(pr))
    assert (first["status"], first["inline_comments"], first["body_findings"]) == (
        "published",
        1,
        1,
    )
    (summary,) = ours(env)
    assert summary["body"].startswith("### pr-review\n\nFirst look\n")
    # Head 2: an unrelated push, the same two findings: no review, the summary edited.
    two = env.push_head(pr, {"README.md": "Stats.\n"})
    scripted_provider.script(
        final_turn(drops, untested, summary="Second look", notes=["Note: Second look"])
    )
    second = publication(run(two))
    assert len(ours(env)) == 1
    assert second["status"] == "published"
    assert (second["review_id"], second["url"]) == (summary["id"], summary["html_url"])
    assert (second["inline_comments"], second["body_findings"]) == (0, 0)
    assert second["duplicates_skipped"] == 2
    # Head 3: one new finding, in a short review; the summary edited again.
    three = env.push_head(two, {"stats.py": HEAD_3})
    middle = finding(title="median() of an empty list fails", line=10, severity="medium")
    scripted_provider.script(
        final_turn(drops, untested, middle, summary="Third look", notes=["Note: Third look"])
    )
    asked = len(scripted_provider.requests)
    third = publication(run(three))
    message = scripted_provider.requests[asked].json["messages"][1]["content"]
    assert f"our last review was of {two.head_sha}" in message  # the quiet head, in the summary
    assert len(ours(env)) == 2
    short = ours(env)[1]
    assert (third["review_id"], third["inline_comments"], third["duplicates_skipped"]) == (
        short["id"],
        1,
        2,
    )
    assert short["body"].split("\n")[0] == (
        f"**Findings:** 1 high, 1 medium, 1 low at `{three.head_sha[:7]}`, 1 of them new; "
        "the summary is kept in the first review."
    )
    assert [c["line"] for c in short["comments"]] == [10]
    # Head 4: line 6's text changed; its finding stays in its open thread, not posted again.
    four = env.push_head(three, {"stats.py": HEAD_4})
    scripted_provider.script(
        final_turn(drops, untested, middle, summary="Fourth look", notes=["Note: Fourth look"])
    )
    asked = len(scripted_provider.requests)
    fourth = publication(run(four))
    message = scripted_provider.requests[asked].json["messages"][1]["content"]
    assert f"our last review was of {three.head_sha}" in message  # read from the summary
    assert len(ours(env)) == 2
    assert fourth["review_id"] == summary["id"]
    assert (fourth["inline_comments"], fourth["duplicates_skipped"]) == (0, 3)
    assert fourth["resolved"] == 0  # the finding is still there: its thread stays open
    assert env.resolved_threads == set()
    bodies = [c["body"] for c in env.review_comments[("acme", "widget", 7)]]
    assert sum("drops the last value" in body for body in bodies) == 1
    # Four heads: one full review, one short one, three edits of the first.
    assert len(env.review_posts) == 2
    assert [review_id for review_id, _ in env.review_edits] == [summary["id"]] * 3
    body = ours(env)[0]["body"]
    heads, fingerprints = ordered_markers(body)
    assert heads == [pr.head_sha, two.head_sha, three.head_sha, four.head_sha]
    assert len(fingerprints) == 2  # the body finding's, and line 6's new one (its thread's)
    assert body.startswith("### pr-review\n\nFourth look\n\n**Findings:** 1 high, 1 medium, 1 low")
    assert f"Updated for head `{four.head_sha[:7]}`: no new finding to post; 3 already" in body
    assert "No tests for average" in body  # the first review's body finding, kept
    assert "First look" not in body
    # The check of the quiet head carries its outcome.
    (check,) = env.runs_on(four.head_sha)
    assert check["status"] == "completed"
    assert check["conclusion"] == "success"


def test_a_quiet_head_is_known_and_a_third_run_asks_no_model(
    env: FakeGitHub, pr: PullRequestFixture, scripted_provider: ScriptedProvider
) -> None:
    scripted_provider.script(
        final_turn(finding(title=DROPS, line=6), summary="One", notes=["Note: One"])
    )
    publication(run(pr))
    two = env.push_head(pr, {"README.md": "Stats.\n"})
    scripted_provider.script(
        final_turn(finding(title=DROPS, line=6), summary="Two", notes=["Note: Two"])
    )
    published = run(two, "text")
    assert published.exit_code == 0, published.output
    (summary,) = ours(env)
    assert published.stdout.splitlines()[-1] == f"Published: {summary['html_url']}"
    asked = len(scripted_provider.requests)
    again = run(two, "text")
    assert again.exit_code == 0, again.output
    assert len(scripted_provider.requests) == asked
    assert again.stdout.splitlines()[-1] == f"Already published: {summary['html_url']}"
    document = json.loads(run(two).stdout)
    assert document["termination_reason"] == "already_published"
    assert document["publication"]["review_id"] == summary["id"]
    assert len(scripted_provider.requests) == asked
    assert len(env.review_posts) == 1


def test_a_head_with_new_findings_run_again_names_its_own_review(
    env: FakeGitHub, pr: PullRequestFixture, scripted_provider: ScriptedProvider
) -> None:
    scripted_provider.script(
        final_turn(finding(title=DROPS, line=6), summary="One", notes=["Note: One"])
    )
    publication(run(pr))
    three = env.push_head(pr, {"stats.py": HEAD_3})
    scripted_provider.script(
        final_turn(
            finding(title=DROPS, line=6),
            finding(title="Empty", line=10, severity="low"),
            summary="Two",
            notes=["Note: Two"],
        )
    )
    posted = publication(run(three))
    again = publication(run(three))
    assert again["status"] == "already_published"
    assert again["review_id"] == posted["review_id"] == ours(env)[1]["id"]
    assert len(env.review_posts) == 2


def test_a_finding_near_a_resolved_thread_is_posted_again(
    env: FakeGitHub, pr: PullRequestFixture, scripted_provider: ScriptedProvider
) -> None:
    scripted_provider.script(
        final_turn(finding(title=DROPS, line=6), summary="One", notes=["Note: One"])
    )
    publication(run(pr))
    (thread,) = env.review_comments[("acme", "widget", 7)]
    env.resolved_threads.add(f"PRRT_{thread['id']}")  # someone resolved it
    changed = env.push_head(pr, {"stats.py": HEAD_1.replace("/ len(values)", "/ 2")})
    scripted_provider.script(
        final_turn(finding(title=DROPS, line=6), summary="Two", notes=["Note: Two"])
    )
    again = publication(run(changed))
    assert (again["inline_comments"], again["duplicates_skipped"]) == (1, 0)
    assert len(ours(env)) == 2


def test_a_finding_with_another_title_or_far_from_the_thread_is_new(
    env: FakeGitHub, pr: PullRequestFixture, scripted_provider: ScriptedProvider
) -> None:
    scripted_provider.script(
        final_turn(finding(title=DROPS, line=6), summary="One", notes=["Note: One"])
    )
    publication(run(pr))
    changed = env.push_head(pr, {"stats.py": HEAD_1.replace("/ len(values)", "/ 2")})
    scripted_provider.script(
        final_turn(
            finding(title="average() divides by zero", line=5),
            finding(title=DROPS, line=2),
            summary="Two",
            notes=["Note: Two"],
        )
    )
    again = publication(run(changed))
    assert (again["inline_comments"], again["duplicates_skipped"]) == (2, 0)


def test_a_refused_edit_of_a_quiet_head_marks_it_with_a_short_review(
    env: FakeGitHub, pr: PullRequestFixture, scripted_provider: ScriptedProvider
) -> None:
    scripted_provider.script(
        final_turn(finding(title=DROPS, line=6), summary="One", notes=["Note: One"])
    )
    publication(run(pr))
    two = env.push_head(pr, {"README.md": "Stats.\n"})
    env.edit_faults.append(CannedResponse(500, b"{}"))
    scripted_provider.script(
        final_turn(finding(title=DROPS, line=6), summary="Two", notes=["Note: Two"])
    )
    done = publication(run(two))
    short = ours(env)[1]
    assert (done["status"], done["review_id"], done["duplicates_skipped"]) == (
        "published",
        short["id"],
        1,
    )
    assert short["body"].startswith(
        f"**Findings:** 1 high at `{two.head_sha[:7]}`, none of them new;"
    )
    asked = len(scripted_provider.requests)
    assert publication(run(two))["status"] == "already_published"
    assert len(scripted_provider.requests) == asked


def test_a_failed_publication_is_the_text_reports_last_line(
    env: FakeGitHub, pr: PullRequestFixture, scripted_provider: ScriptedProvider
) -> None:
    env.review_faults.append(CannedResponse(500, b"{}"))
    scripted_provider.script(
        final_turn(finding(title=DROPS, line=6), summary="One", notes=["Note: One"])
    )
    done = run(pr, "text")
    assert done.exit_code == 1
    assert done.stdout.splitlines()[-1] == (
        "Publishing failed: GitHub answered with a server error (status 500)."
    )


# --- the fake applies GitHub's rules, so the tests above mean something ---


def test_the_fake_edits_a_review_only_as_github_does(
    env: FakeGitHub, pr: PullRequestFixture, tmp_path: Path
) -> None:
    other = env.pull_request("acme", "widget", 8)
    env.users["ghp_someone_else"] = "mallory"
    mine = env.add_review("acme", "widget", 7, BOT, "mine", pr.head_sha)
    elsewhere = env.add_review("acme", "widget", other.number, BOT, "there", other.head_sha)
    api = f"{env.api_url}/repos/acme/widget/pulls/7/reviews"

    async def edit(review_id: int, body: Any, token: str = GITHUB_TOKEN) -> int:
        settings = env.settings(tmp_path / "cache", token=token)
        async with GitHubClient(settings) as github:
            answer = await github.request("PUT", f"{api}/{review_id}", json_body={"body": body})
            return answer.status

    assert asyncio.run(edit(mine["id"], "x" * 65_536)) == 200
    assert asyncio.run(edit(mine["id"], "x" * 65_537)) == 422
    assert asyncio.run(edit(mine["id"], None)) == 422
    assert asyncio.run(edit(mine["id"], "mallory's", "ghp_someone_else")) == 403
    assert asyncio.run(edit(elsewhere["id"], "not on this pull request")) == 404
    assert [body for _, body in env.review_edits] == ["x" * 65_536]
    assert env.posted("acme", "widget", 7)[0]["body"] == "x" * 65_536


def test_the_fakes_comment_lines_follow_pushes_and_go_null_when_changed(
    env: FakeGitHub, pr: PullRequestFixture, scripted_provider: ScriptedProvider, tmp_path: Path
) -> None:
    scripted_provider.script(
        final_turn(
            finding(title=DROPS, line=6),
            finding(title="Loud", line=5, severity="low"),
            summary="One",
            notes=["Note: One"],
        )
    )
    publication(run(pr))
    # Two lines inserted at the top, line 6 (now 8) changed: the comment on 5 moves to 7.
    pushed = env.push_head(pr, {"stats.py": "# a\n# b\n" + HEAD_1.replace("/ len", "/ 2 / len")})
    settings = env.settings(tmp_path / "cache", token=GITHUB_TOKEN)

    async def listed() -> list[dict[str, Any]]:
        async with GitHubClient(settings) as github:
            answer = await github.request(
                "GET", f"{env.api_url}/repos/acme/widget/pulls/7/comments"
            )
            document: list[dict[str, Any]] = json.loads(answer.body)
            return document

    lines = {c["original_line"]: (c["line"], c["commit_id"]) for c in asyncio.run(listed())}
    assert lines == {5: (7, pushed.head_sha), 6: (None, pr.head_sha)}


# --- the rewritten body (github/summary.py), on its own ---


def _placed(found: list[Finding], start: int = 0) -> list[Placed]:
    return [Placed(f, f"{start + n:032x}") for n, f in enumerate(found)]


def _first_body(body_findings: list[Finding], summary: str = "First") -> str:
    result = review_result(body_findings, summary=summary)
    body, shown = render_review_body(result, Placement(body=_placed(body_findings)))
    assert shown == len(body_findings)
    return body


def test_the_rewrite_keeps_the_first_reviews_findings_and_every_marker() -> None:
    listed = [finding_model(title=f"Listed {n}", line=None) for n in range(3)]
    old = _first_body(listed) + "\n" + finding_marker("f" * 32)  # a matched one, earlier
    later = review_result([finding_model(title="Now")], summary="Now", notes=["A note"])
    once = updated_body(old, later, Placement(skipped=1), new_review=False, matched=["e" * 32])
    assert once is not None
    twice = updated_body(once, later, Placement(skipped=1), new_review=False)
    assert twice == once  # the same head again changes nothing
    heads, fingerprints = ordered_markers(once)
    assert heads == [HEAD_SHA]  # review_result's head; the old body's was the same
    assert sorted(fingerprints) == sorted([f"{n:032x}" for n in range(3)] + ["f" * 32, "e" * 32])
    kept = old[old.index("#### Findings not on") : old.index("\n\n\n#### Notes")]
    assert kept in once
    assert once.startswith("### pr-review\n\nNow\n\n**Findings:** 1 high\n")
    assert "A note" in once
    assert severity_counts(once) == {"high": 1}


@given(
    summary=st.text(min_size=1, max_size=300),
    note=st.text(min_size=1, max_size=300),
    explanation=st.text(min_size=1, max_size=300),
)
@hypothesis_settings(max_examples=examples(40), deadline=None)
def test_model_text_never_moves_what_the_rewrite_keeps(
    summary: str, note: str, explanation: str
) -> None:
    hostile = f"{explanation}\n#### Notes\n<sub>x</sub>\n<!-- pr-review:head={'9' * 40} -->"
    listed = [finding_model(title="Listed", line=None, explanation=hostile)]
    old = _first_body(listed, summary=hostile)
    later = review_result([], summary=summary + hostile, notes=[note + hostile])
    once = updated_body(old, later, Placement(), new_review=False)
    assert once is not None
    again = updated_body(once, later, Placement(), new_review=False)
    assert again == once
    assert ordered_markers(once) == ([HEAD_SHA], [f"{0:032x}"])
    assert escape(hostile).replace("\n", "\n  ") in once  # the listed finding, as posted


def test_a_rewrite_too_long_for_github_gives_way_in_order_notes_list_summary() -> None:
    many = [
        finding_model(title=f"Listed {n}", line=None, explanation="x" * 4000) for n in range(14)
    ]
    old = _first_body(many)
    assert len(old) > 56_000
    long_notes = review_result([], summary="Short", notes=["n" * 8000])
    body = updated_body(old, long_notes, Placement(), new_review=False)
    assert body is not None
    assert len(body) <= MAX_EDITED_BODY_CHARS
    assert "#### Notes" not in body
    assert "Listed 13" in body
    long_summary = review_result([], summary="s" * 4000 + "@" * 4000, notes=[])
    body = updated_body(old, long_summary, Placement(), new_review=False)
    assert body is not None
    assert len(body) <= MAX_EDITED_BODY_CHARS
    assert "Listed 13" not in body
    assert DROPPED_FINDINGS in body
    assert len(ordered_markers(body)[1]) == 14  # the list's markers stay, invisible
    assert "s" * 4000 in body
    heads = "".join(head_marker(f"{n:040x}") for n in range(900))
    shortened = updated_body(old + heads, long_summary, Placement(), new_review=False)
    assert shortened is not None
    assert len(shortened) <= MAX_EDITED_BODY_CHARS
    assert CUT in shortened
    assert len(ordered_markers(shortened)[0]) == 901  # the old head is this one
    heads = "".join(head_marker(f"{n:040x}") for n in range(1200))
    assert updated_body(heads, long_summary, Placement(), new_review=False) is None
