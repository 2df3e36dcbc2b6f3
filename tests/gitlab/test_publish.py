"""Publishing a review on a merge request (specification §§10, 14, 17), through the fake GitLab.

The fake checks every discussion's position against the real diff and the merge request's
`diff_refs`, and records what each posted body would have run as a quick action. The git
directory read for hunks and line texts is the fake project's own repository: the commits the
merge request names, as the cache would hold them.
"""

from __future__ import annotations

import asyncio
import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from pr_review_api.errors import ConfigurationError, PublishNotPossible
from pr_review_api.gitlab.client import GitLabClient
from pr_review_api.gitlab.preflight import NEEDS_CREDENTIALS, REFUSED, ensure_can_publish
from pr_review_api.gitlab.publish import publish, publish_merge_request
from pr_review_api.gitlab.urls import MergeRequestRef, parse_merge_request_url
from pr_review_api.model import (
    FinalReview,
    Finding,
    Publication,
    ReviewResult,
    Revisions,
    Usage,
)
from pr_review_api.publishing.markers import finding_marker, head_marker
from pr_review_api.publishing.placement import fingerprint_of, line_texts
from pr_review_api.settings import Settings
from tests import builders
from tests.builders import BRIEF, suggestion
from tests.conftest import GITLAB_TOKEN
from tests.fakes.gitlab_notes import FakeNotes
from tests.fakes.gitlab_server import FakeGitLab, MergeRequestFixture
from tests.gitlab.support import active_parts

BOT = "pr-review-bot"
PROJECT = "grp/sub/widget"
IID = 3
TEN = "".join(f"line {n}\n" for n in range(1, 11))
FIFTY = "".join(f"row {n}\n" for n in range(1, 51))
# a.py: a line inserted after line 5, so the head's line 6 is added; context lines 3-5 keep
# their numbers and 7-9 are the base's 6-8.
HEAD_A = TEN.replace("line 5\n", "line 5\ninserted\n")


finding = partial(builders.finding_model, severity="medium", title="T", **BRIEF)


def settings_for(fake: FakeGitLab, tmp_path: Path, **overrides: Any) -> Settings:
    fake.users.setdefault(GITLAB_TOKEN, BOT)
    return fake.settings(tmp_path / "cache", token=GITLAB_TOKEN, **overrides)


def merge_request(fake: FakeGitLab) -> MergeRequestFixture:
    base = {"a.py": TEN, "other.py": FIFTY}
    return fake.merge_request(PROJECT, IID, base=base, head={"a.py": HEAD_A})


def result_of(
    mr: MergeRequestFixture,
    ref: MergeRequestRef,
    findings: list[Finding],
    *,
    summary: str = "Summary.",
    notes: tuple[str, ...] = (),
    head_sha: str | None = None,
) -> ReviewResult:
    return ReviewResult(
        pull_request=ref.info,
        revisions=Revisions(
            base_sha=mr.start_sha,
            head_sha=head_sha or mr.head_sha,
            merge_base_sha=mr.base_sha,
        ),
        model="test-model",
        review=FinalReview(summary=summary, findings=findings, notes=list(notes)),
        usage=Usage(prompt_tokens=10, completion_tokens=5, total_tokens=15),
        rounds=2,
        tool_calls=1,
        trace=None,
    )


def run_publish(
    fake: FakeGitLab,
    settings: Settings,
    result: ReviewResult,
    *,
    max_inline: int = 30,
) -> Publication:
    mr = fake.fixture(PROJECT, IID)
    ref = parse_merge_request_url(mr.url, settings)

    async def go() -> Publication:
        deadline = asyncio.get_running_loop().time() + 60
        async with GitLabClient(settings) as gitlab:
            return await publish(
                result, ref, gitlab, mr.project.bare, deadline=deadline, max_inline=max_inline
            )

    return asyncio.run(go())


def posts(fake: FakeGitLab) -> list[tuple[str, str]]:
    """(endpoint, status) of every POST, in order."""
    return [
        (r.path.rsplit("/", 1)[-1], str(r.status))
        for r in fake.api_requests()
        if r.method == "POST"
    ]


def position_of(fake: FakeGitLab, notes: FakeNotes, body_part: str) -> dict[str, Any]:
    found = [n for n in notes.discussions(PROJECT, IID) if body_part in n.body]
    assert len(found) == 1
    assert found[0].position is not None
    return found[0].position


@pytest.fixture
def setup(
    fake_gitlab: FakeGitLab, fake_gitlab_notes: FakeNotes, tmp_path: Path
) -> tuple[FakeGitLab, FakeNotes, Settings, MergeRequestFixture, MergeRequestRef]:
    mr = merge_request(fake_gitlab)
    settings = settings_for(fake_gitlab, tmp_path)
    return fake_gitlab, fake_gitlab_notes, settings, mr, parse_merge_request_url(mr.url, settings)


Setup = tuple[FakeGitLab, FakeNotes, Settings, MergeRequestFixture, MergeRequestRef]


# --- placement and positions ---


def test_added_and_context_lines_get_discussions_the_rest_is_in_the_note(setup: Setup) -> None:
    fake, notes, settings, mr, ref = setup
    findings = [
        finding(path="a.py", line=6, severity="high", title="Added line"),
        finding(path="a.py", line=8, severity="medium", title="Context line"),
        finding(path="other.py", line=20, severity="low", title="Outside every hunk"),
        finding(path="a.py", line=None, severity="info", title="No line"),
    ]
    publication = run_publish(fake, settings, result_of(mr, ref, findings))

    assert publication.status == "published"
    assert (publication.inline_comments, publication.body_findings) == (2, 2)
    assert publication.duplicates_skipped == 0
    note = notes.plain_notes(PROJECT, IID)
    assert len(note) == 1
    assert publication.review_id == note[0].id
    assert publication.url == f"{mr.url}#note_{note[0].id}"
    assert note[0].author == BOT
    # The discussions first, the note with the head's marker last.
    assert posts(fake) == [("discussions", "201"), ("discussions", "201"), ("notes", "201")]
    common = {
        "position_type": "text",
        "base_sha": mr.base_sha,
        "start_sha": mr.start_sha,
        "head_sha": mr.head_sha,
        "new_path": "a.py",
        "old_path": "a.py",
    }
    assert position_of(fake, notes, "Added line") == {**common, "new_line": 6}
    # A context line names both sides: the head's line 8 is the base's line 7.
    assert position_of(fake, notes, "Context line") == {**common, "new_line": 8, "old_line": 7}
    body = note[0].body
    assert head_marker(mr.head_sha) in body
    assert "other\\.py line 20" in body
    assert "Outside every hunk" in body
    assert "No line" in body
    assert "Added line" not in body
    assert "**Findings:** 1 high, 1 medium, 1 low, 1 info" in body
    assert "test\\-model · 2 rounds · 15 tokens" in body
    texts = line_texts(mr.project.bare, mr.head_sha, findings)
    for f in findings:
        every = "".join(n.body for n in notes.of(PROJECT, IID))
        assert every.count(finding_marker(fingerprint_of(f, texts))) == 1
    assert notes.quick_actions == []


def test_at_most_max_inline_discussions_most_severe_first(setup: Setup) -> None:
    fake, notes, settings, mr, ref = setup
    findings = [
        finding(path="a.py", line=8, severity="low", title="Low one"),
        finding(path="a.py", line=6, severity="critical", title="Worst"),
    ]
    publication = run_publish(fake, settings, result_of(mr, ref, findings), max_inline=1)
    assert (publication.inline_comments, publication.body_findings) == (1, 1)
    (discussion,) = notes.discussions(PROJECT, IID)
    assert "Worst" in discussion.body
    assert "Low one" in notes.plain_notes(PROJECT, IID)[0].body


def test_a_refused_position_moves_its_finding_into_the_note(setup: Setup) -> None:
    fake, notes, settings, mr, ref = setup
    notes.refuse_discussions = True
    findings = [
        finding(path="a.py", line=6, severity="high", title="Added line"),
        finding(path="a.py", line=8, title="Context"),
    ]
    publication = run_publish(fake, settings, result_of(mr, ref, findings))
    assert publication.status == "published"
    assert (publication.inline_comments, publication.body_findings) == (0, 2)
    assert posts(fake) == [("discussions", "400"), ("discussions", "400"), ("notes", "201")]
    body = notes.plain_notes(PROJECT, IID)[0].body
    assert "a\\.py line 6" in body
    assert "a\\.py line 8" in body
    assert "in threads on the diff" not in body


def test_positions_on_a_head_the_merge_request_moved_past_go_in_the_note(setup: Setup) -> None:
    # GitLab's diff_refs name a newer head: our positions (on the head we reviewed) are refused
    # by the fake as GitLab refuses a position off the merge request's diff.
    fake, _notes, settings, mr, ref = setup
    newer = mr.project.commit({"b.py": "b\n"}, mr.head_sha, "newer")
    document = fake.documents[(mr.project.id, IID)]
    document["diff_refs"] = {**document["diff_refs"], "head_sha": newer}
    publication = run_publish(fake, settings, result_of(mr, ref, [finding(path="a.py", line=6)]))
    assert (publication.inline_comments, publication.body_findings) == (0, 1)
    assert posts(fake) == [("discussions", "400"), ("notes", "201")]


# --- idempotence and repeats ---


def test_a_second_run_on_the_same_head_posts_nothing(setup: Setup) -> None:
    fake, notes, settings, mr, ref = setup
    result = result_of(mr, ref, [finding(path="a.py", line=6), finding(path="other.py", line=20)])
    first = run_publish(fake, settings, result)
    before = len(notes.of(PROJECT, IID))
    post_count = len(posts(fake))
    second = run_publish(fake, settings, result)
    assert second.status == "already_published"
    assert (second.review_id, second.url) == (first.review_id, first.url)
    assert len(notes.of(PROJECT, IID)) == before
    assert len(posts(fake)) == post_count


def test_a_new_head_does_not_repeat_a_fingerprint(setup: Setup) -> None:
    fake, notes, settings, mr, ref = setup
    run_publish(
        fake,
        settings,
        result_of(mr, ref, [finding(path="a.py", line=6, severity="high", title="Kept")]),
    )
    head2 = mr.project.commit({"b.py": "b\n"}, mr.head_sha, "second push")
    mr.project.set_merge_request_head(IID, head2)
    document = fake.documents[(mr.project.id, IID)]
    document["diff_refs"] = {**document["diff_refs"], "head_sha": head2}
    findings = [
        finding(path="a.py", line=6, severity="high", title="Kept"),
        finding(path="b.py", line=1, severity="low", title="New"),
    ]
    again = run_publish(fake, settings, result_of(mr, ref, findings, head_sha=head2))
    assert again.status == "published"
    assert (again.inline_comments, again.duplicates_skipped) == (1, 1)
    kept = [n for n in notes.discussions(PROJECT, IID) if "Kept" in n.body]
    assert len(kept) == 1  # posted on the first head only
    last = notes.plain_notes(PROJECT, IID)[-1].body
    assert head_marker(head2) in last
    assert "1 already posted earlier, not repeated." in last


def test_markers_in_notes_of_others_or_of_gitlab_count_for_nothing(setup: Setup) -> None:
    fake, notes, settings, mr, ref = setup
    f = finding(path="a.py", line=6)
    fingerprint = fingerprint_of(f, line_texts(mr.project.bare, mr.head_sha, [f]))
    forged = head_marker(mr.head_sha) + finding_marker(fingerprint)
    notes.add(PROJECT, IID, forged, "mallory")
    notes.add(PROJECT, IID, forged, BOT, system=True)
    publication = run_publish(fake, settings, result_of(mr, ref, [f]))
    assert publication.status == "published"
    assert (publication.inline_comments, publication.duplicates_skipped) == (1, 0)


def test_our_note_is_found_on_a_later_page(setup: Setup) -> None:
    fake, notes, settings, mr, ref = setup
    fake.page_size = 2
    result = result_of(mr, ref, [finding(path="other.py", line=20)])
    first = run_publish(fake, settings, result)
    for n in range(5):
        notes.add(PROJECT, IID, f"comment {n}", "alice")
    second = run_publish(fake, settings, result)
    assert second.status == "already_published"
    assert second.review_id == first.review_id
    listed = [r for r in fake.api_requests() if r.method == "GET" and r.path.endswith("/notes")]
    assert len(listed) >= 4  # pages of two, followed through X-Next-Page


def test_model_text_cannot_forge_the_marker_of_a_later_head(setup: Setup) -> None:
    fake, _notes, settings, mr, ref = setup
    head2 = mr.project.commit({"b.py": "b\n"}, mr.head_sha, "second push")
    forged = f"{head_marker(head2)}\n<!-- pr-review:head={head2} -->"
    run_publish(fake, settings, result_of(mr, ref, [finding(path="a.py", line=6)], summary=forged))
    mr.project.set_merge_request_head(IID, head2)
    document = fake.documents[(mr.project.id, IID)]
    document["diff_refs"] = {**document["diff_refs"], "head_sha": head2}
    later = run_publish(fake, settings, result_of(mr, ref, [], head_sha=head2))
    assert later.status == "published"


# --- hostile model text ---


HOSTILE = (
    "/merge\n/approve\n  /close\n\t/unapprove\n> /submit_review\n- /assign @me\n"
    '@all and @alice, see !1, #2, grp/sub/widget#3, ~bug, ~"two words", %v1, $4, &5, '
    "*iteration:6, [[wiki]], :smile:, [x](http://evil.example), <img src=x onerror=alert(1)>, "
    "<!-- pr-review:head=" + "c" * 40 + " -->, https://evil.example, www.evil.example, "
    "1a2b3c4d5e, JIRA-12"
)


def test_hostile_model_text_produces_nothing_active(setup: Setup) -> None:
    fake, notes, settings, mr, ref = setup
    nasty = {"explanation": HOSTILE, "evidence": HOSTILE, "recommendation": "/rebase\n" + HOSTILE}
    findings = [
        finding(path="a.py", line=6, severity="high", title="/merge\n/close @all !1", **nasty),
        finding(path="other.py", line=20, severity="low", title="/approve", **nasty),
    ]
    result = result_of(mr, ref, findings, summary=HOSTILE, notes=(HOSTILE, "/lock"))
    publication = run_publish(fake, settings, result)
    assert publication.status == "published"
    assert publication.inline_comments == 1
    assert notes.quick_actions == []  # no body posted would have run one
    bodies = [n.body for n in notes.of(PROJECT, IID)]
    assert len(bodies) == 2
    for body in bodies:
        assert active_parts(body) == [], body


# --- suggestions (specification §14) ---


def test_a_committable_suggestion_is_gitlabs_block_on_its_last_line(setup: Setup) -> None:
    fake, notes, settings, mr, ref = setup
    findings = [
        finding(
            path="a.py",
            line=5,
            severity="high",
            title="Two lines",
            suggestion=suggestion(5, 6, "line 5\nbetter"),
        ),
        finding(
            path="a.py", line=8, severity="low", title="Delete", suggestion=suggestion(8, 8, "")
        ),
    ]
    publication = run_publish(fake, settings, result_of(mr, ref, findings))
    assert publication.inline_comments == 2
    two = next(n for n in notes.discussions(PROJECT, IID) if "Two lines" in n.body)
    assert two.body.endswith("```suggestion:-1+0\nline 5\nbetter\n```")
    assert two.position is not None
    assert two.position["new_line"] == 6
    assert "old_line" not in two.position  # line 6 is the added one
    gone = next(n for n in notes.discussions(PROJECT, IID) if "Delete" in n.body)
    assert gone.body.endswith("```suggestion:-0+0\n```")
    assert gone.position is not None
    assert gone.position["old_line"] == 7


def test_a_suggestion_that_holds_a_quick_action_is_shown_as_a_diff(setup: Setup) -> None:
    fake, notes, settings, mr, ref = setup
    findings = [
        finding(
            path="a.py",
            line=6,
            severity="high",
            title="Sneaky",
            suggestion=suggestion(5, 6, "x\n  /merge"),
        ),
        finding(
            path="a.py",
            line=None,
            severity="low",
            title="No line",
            suggestion=suggestion(7, 8, "/approve\r/close"),
        ),
    ]
    publication = run_publish(fake, settings, result_of(mr, ref, findings))
    assert (publication.inline_comments, publication.body_findings) == (1, 1)
    (discussion,) = notes.discussions(PROJECT, IID)
    assert discussion.position is not None
    assert discussion.position["new_line"] == 6
    assert "suggestion:" not in discussion.body
    assert "```diff\n@@ -5,2 +5,2 @@\n-line 5\n-inserted\n+x\n+  /merge\n```" in discussion.body
    assert "not committable here" in notes.plain_notes(PROJECT, IID)[0].body
    assert notes.quick_actions == []


def test_a_suggestion_whose_replacement_holds_a_fence_stays_in_its_block(setup: Setup) -> None:
    fake, notes, settings, mr, ref = setup
    replacement = "```\nline 5\n````"
    findings = [finding(path="a.py", line=6, suggestion=suggestion(6, 6, replacement))]
    run_publish(fake, settings, result_of(mr, ref, findings))
    (discussion,) = notes.discussions(PROJECT, IID)
    assert discussion.body.endswith(f"`````suggestion:-0+0\n{replacement}\n`````")


# --- failures ---


def test_a_merge_request_gitlab_no_longer_shows_fails_with_a_fixed_sentence(
    setup: Setup,
) -> None:
    fake, notes, settings, mr, ref = setup
    fake.respond(PROJECT, IID, 404, json.dumps({"message": "404 secret detail"}))
    publication = run_publish(fake, settings, result_of(mr, ref, [finding(path="a.py", line=6)]))
    assert publication.status == "failed"
    assert publication.error is not None
    assert publication.error.code == "gitlab_publish_failed"
    assert publication.error.message == (
        "The merge request or project does not exist or is not visible."
    )
    assert notes.of(PROJECT, IID) == []


def test_a_refused_token_fails_without_posting(setup: Setup) -> None:
    fake, notes, settings, mr, ref = setup
    settings = fake.settings(settings.pr_review_cache_dir, token="glpat-unknown")
    publication = run_publish(fake, settings, result_of(mr, ref, [finding(path="a.py", line=6)]))
    assert publication.status == "failed"
    assert publication.error is not None
    assert "glpat-unknown" not in publication.error.message
    assert notes.of(PROJECT, IID) == []


def test_only_a_finished_review_of_a_merge_request_is_published(setup: Setup) -> None:
    _fake, _notes, settings, mr, ref = setup
    result = result_of(mr, ref, [finding(path="a.py", line=6)])

    async def go(result: ReviewResult) -> Publication | None:
        async with GitLabClient(settings) as gitlab:
            return await publish_merge_request(
                result, gitlab, mr.project.bare, deadline=asyncio.get_running_loop().time() + 60
            )

    skipped = result.model_copy(update={"termination_reason": "no_changes"})
    github = result.model_copy(
        update={"pull_request": result.pull_request.model_copy(update={"forge": "github"})}
        if result.pull_request is not None
        else {}
    )
    assert asyncio.run(go(skipped)) is None
    assert asyncio.run(go(github)) is None
    published = asyncio.run(go(result))
    assert published is not None
    assert published.status == "published"


# --- the preflight ---


def test_preflight_needs_a_token_and_one_gitlab_accepts(
    fake_gitlab: FakeGitLab, tmp_path: Path
) -> None:
    async def check(settings: Settings) -> None:
        async with GitLabClient(settings) as gitlab:
            await ensure_can_publish(gitlab)

    with pytest.raises(ConfigurationError) as missing:
        asyncio.run(check(fake_gitlab.settings(tmp_path)))
    assert missing.value.message == NEEDS_CREDENTIALS
    with pytest.raises(PublishNotPossible) as refused:
        asyncio.run(check(fake_gitlab.settings(tmp_path, token="glpat-unknown")))
    assert refused.value.message == REFUSED
    assert refused.value.code == "gitlab_publish_failed"
    asyncio.run(check(settings_for(fake_gitlab, tmp_path)))
    asked = [r.path for r in fake_gitlab.api_requests()]
    assert asked == [f"{'/gitlab/api/v4'}/user"] * 2  # no token: nothing asked
