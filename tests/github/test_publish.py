"""Publishing a review on the pull request (specification §10), through the fake GitHub.

The fake computes hunks with git and answers 422 for the whole request when any comment is off
the diff, paginates with `Link`, records authors and can inject failures. Reviews run through
`run_review(..., post=True)` with a scripted model, so findings pass the real final-review
checks before they are placed.
"""

from __future__ import annotations

import asyncio
import html
import json
import re
import time
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from pydantic import SecretStr

from pr_review_api.cli import commands as cli
from pr_review_api.github.client import GitHubClient
from pr_review_api.github.publish import publish
from pr_review_api.github.urls import PullRequestRef
from pr_review_api.llm.testing import ScriptedModel, stop_turn
from pr_review_api.loop.run import ReviewOptions, run_review
from pr_review_api.loop.workspace import ChangeTarget
from pr_review_api.model import Publication, ReviewResult
from pr_review_api.output.inert_markdown import WORD_JOINER
from pr_review_api.publishing.markers import finding_marker, head_marker
from pr_review_api.service.app import create_app
from pr_review_api.settings import Settings
from tests import builders
from tests.builders import BRIEF, final_review, final_turn
from tests.conftest import GITHUB_TOKEN, PROVIDER_KEY, examples
from tests.fakes.github_server import (
    CannedResponse,
    FakeGitHub,
    PullRequestFixture,
)
from tests.fakes.provider_server import ScriptedProvider

BOT = "pr-review-bot"
TEN = "".join(f"line {n}\n" for n in range(1, 11))
FIFTY = "".join(f"row {n}\n" for n in range(1, 51))
# a.py: line 5 edited (added line 5), context 2-4 and 6-8.
HEAD_A = TEN.replace("line 5\n", "line five\n")


finding = partial(builders.finding, severity="medium", title="T", **BRIEF)


def settings_for(fake: FakeGitHub, tmp_path: Path, **overrides: Any) -> Settings:
    fake.users.setdefault(GITHUB_TOKEN, BOT)
    return fake.settings(
        tmp_path / "cache",
        token=GITHUB_TOKEN,
        opencode_api_key=PROVIDER_KEY,
        review_timeout_seconds=60,
        **overrides,
    )


def pull_request(fake: FakeGitHub, **extra: str) -> PullRequestFixture:
    base = {"a.py": TEN, "other.py": FIFTY, "gone.py": TEN, "old/name.py": FIFTY}
    head = {"a.py": HEAD_A, "gone.py": TEN.replace("line 5\n", "")}
    return fake.pull_request("acme", "widget", 7, base=base, head={**head, **extra})


def review(
    url: str,
    settings: Settings,
    findings: list[dict[str, Any]],
    *,
    post: bool = True,
    summary: str = "Summary.",
    notes: list[str] | None = None,
) -> ReviewResult:
    document = {"summary": summary, "findings": findings, "notes": notes or []}
    model = ScriptedModel(stop_turn(document))
    return asyncio.run(
        run_review(ChangeTarget(url), settings, ReviewOptions(model=model, post=post))
    )


def posted(fake: FakeGitHub) -> list[dict[str, Any]]:
    return fake.posted("acme", "widget", 7)


def text(markdown: str) -> str:
    """What a reader sees: the Markdown rendered (CommonMark), tags dropped, invisible joins
    removed."""
    rendered = MarkdownIt("commonmark").render(markdown)
    return html.unescape(re.sub(r"<[^>]+>", "", rendered)).replace(WORD_JOINER, "")


def comment_lines(review: dict[str, Any]) -> list[tuple[str, int]]:
    return [(c["path"], c["line"]) for c in review["comments"]]


# --- placement ---


def test_added_and_context_lines_are_inline_the_rest_in_the_body(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = pull_request(fake_github)
    findings = [
        finding(path="a.py", line=5, title="added"),
        finding(path="a.py", line=3, title="context"),
        finding(path="gone.py", line=5, title="context after a deletion"),
        finding(path="a.py", line=10, title="outside every hunk"),
        finding(path="other.py", line=3, title="file outside the diff"),
        finding(path="a.py", line=None, title="no line"),
    ]
    result = review(pull.url, settings_for(fake_github, tmp_path), findings)
    publication = result.publication
    assert publication is not None
    assert publication.status == "published"
    assert publication.inline_comments == 3
    assert publication.body_findings == 3
    assert len(fake_github.review_posts) == 1  # no 422, no second attempt
    (done,) = posted(fake_github)
    assert sorted(comment_lines(done)) == [("a.py", 3), ("a.py", 5), ("gone.py", 5)]
    assert all(c["side"] == "RIGHT" for c in done["comments"])
    body = text(done["body"])
    assert "a.py line 10" in body
    assert "other.py line 3" in body
    assert "outside every hunk" in body
    assert "no line" in body
    assert done["commit_id"] == pull.head_sha
    assert done["user"]["login"] == BOT
    assert publication.review_id == done["id"]
    assert publication.url == done["html_url"]


def test_deleted_only_file_lines_outside_its_hunk_go_in_the_body(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = pull_request(fake_github)
    findings = [
        finding(path="gone.py", line=1, title="far from the deletion"),
        finding(path="gone.py", line=4),
    ]
    result = review(pull.url, settings_for(fake_github, tmp_path), findings)
    assert result.publication is not None
    (done,) = posted(fake_github)
    assert comment_lines(done) == [("gone.py", 4)]
    assert "gone.py line 1" in text(done["body"])


def test_renamed_file_is_commented_on_under_its_new_path(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    origin = fake_github.repository("acme", "widget")
    pull = fake_github.pull_request("acme", "widget", 7, base={"old/name.py": FIFTY})
    # Move the file and edit line 40 in a second head, as a rename GitHub detects.
    origin.work.checkout(pull.head_sha)
    origin.work.commit_files({"new/name.py": FIFTY.replace("row 40\n", "row forty\n")})
    moved = origin.work.commit_files({}, "move", delete=("old/name.py",))
    origin.set_pull_head(7, moved)
    fake_github.set_pull(
        "acme", "widget", 7, base_sha=pull.base_sha, head_sha=moved, base_ref="main"
    )
    fake_github._pulls[("acme", "widget", 7)] = PullRequestFixture(
        origin, 7, pull.base_sha, moved, "main", pull.url
    )
    findings = [
        finding(path="new/name.py", line=40, title="in"),
        finding(path="new/name.py", line=2, title="out"),
    ]
    result = review(pull.url, settings_for(fake_github, tmp_path), findings)
    assert result.publication is not None
    assert result.publication.status == "published"
    (done,) = posted(fake_github)
    assert comment_lines(done) == [("new/name.py", 40)]
    assert "new/name.py line 2" in text(done["body"])


def test_the_cap_keeps_the_most_severe_inline_then_path_then_line(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = pull_request(fake_github, **{"b.py": "1\n2\n3\n"})
    findings = [
        finding(path="b.py", line=3, severity="low"),
        finding(path="b.py", line=1, severity="critical"),
        finding(path="a.py", line=5, severity="critical"),
        finding(path="a.py", line=4, severity="high"),
        finding(path="b.py", line=2, severity="info"),
    ]
    settings = settings_for(fake_github, tmp_path, pr_review_max_inline_comments=3)
    result = review(pull.url, settings, findings)
    assert result.publication is not None
    assert result.publication.inline_comments == 3
    assert result.publication.body_findings == 2
    (done,) = posted(fake_github)
    assert comment_lines(done) == [("a.py", 5), ("b.py", 1), ("a.py", 4)]
    assert text(done["body"]).index("b.py line 3") < text(done["body"]).index(
        "b.py line 2"
    )  # low, info


# --- markers ---


def test_markers_are_in_the_body_and_on_every_finding(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = pull_request(fake_github)
    findings = [finding(path="a.py", line=5), finding(path="other.py", line=1, title="body")]
    review(pull.url, settings_for(fake_github, tmp_path), findings)
    (done,) = posted(fake_github)
    assert head_marker(pull.head_sha) in done["body"]
    assert done["body"].count("<!-- pr-review:finding=") == 1
    assert done["comments"][0]["body"].count("<!-- pr-review:finding=") == 1


def test_the_same_head_is_never_published_twice(fake_github: FakeGitHub, tmp_path: Path) -> None:
    pull = pull_request(fake_github)
    settings = settings_for(fake_github, tmp_path)
    first = review(pull.url, settings, [finding(path="a.py", line=5)])
    second = review(pull.url, settings, [finding(path="a.py", line=5)])
    assert first.publication is not None
    assert second.publication is not None
    assert second.publication.status == "already_published"
    assert second.publication.review_id == first.publication.review_id
    assert len(posted(fake_github)) == 1
    assert len(fake_github.review_posts) == 1


def test_a_workflow_token_is_github_actions_bot(fake_github: FakeGitHub, tmp_path: Path) -> None:
    pull = pull_request(fake_github)
    fake_github.workflow_tokens.add("ghs_workflow")
    settings = settings_for(fake_github, tmp_path).model_copy(
        update={"github_token": SecretStr("ghs_workflow")}
    )
    review(pull.url, settings, [finding(path="a.py", line=5)])
    again = review(pull.url, settings, [finding(path="a.py", line=5)])
    assert posted(fake_github)[0]["user"]["login"] == "github-actions[bot]"
    assert again.publication is not None
    assert again.publication.status == "already_published"


def test_planted_markers_of_someone_else_change_nothing(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = pull_request(fake_github)
    settings = settings_for(fake_github, tmp_path)
    # The author copies our markers: this head's, and the fingerprint the finding will have.
    probe = review(pull.url, settings, [finding(path="a.py", line=5)], post=False)
    assert probe.publication is None
    from pr_review_api.publishing.placement import fingerprint_of

    fingerprint = fingerprint_of(probe.review.findings[0], {"a.py": HEAD_A.splitlines()})
    planted = head_marker(pull.head_sha) + finding_marker(fingerprint)
    fake_github.add_review("acme", "widget", 7, "octocat", planted, pull.head_sha)
    fake_github.add_review_comment("acme", "widget", 7, "octocat", finding_marker(fingerprint))
    result = review(pull.url, settings, [finding(path="a.py", line=5)])
    assert result.publication is not None
    assert result.publication.status == "published"
    assert result.publication.duplicates_skipped == 0
    assert result.publication.inline_comments == 1


def test_model_text_cannot_forge_a_marker(fake_github: FakeGitHub, tmp_path: Path) -> None:
    pull = pull_request(fake_github)
    settings = settings_for(fake_github, tmp_path)
    forged = head_marker(pull.head_sha)
    # The first review's summary carries this head's marker as text; it must not count...
    fake_github.add_review("acme", "widget", 7, BOT, "\\" + forged)
    result = review(pull.url, settings, [], summary=forged, notes=[forged])
    assert result.publication is not None
    assert result.publication.status == "published"
    (_, done) = posted(fake_github)
    assert done["body"].count(forged) == 1  # ours, at the end; the model's copy is escaped


def test_a_re_review_skips_findings_already_posted(fake_github: FakeGitHub, tmp_path: Path) -> None:
    pull = pull_request(fake_github)
    settings = settings_for(fake_github, tmp_path)
    fake_github.page_size = 1  # every listing takes several pages (Link: rel="next")
    review(
        pull.url,
        settings,
        [finding(path="a.py", line=5, title="kept"), finding(path="a.py", line=3)],
    )
    # A push inserts two lines at the top: the same finding moves to line 7, same text.
    newer = fake_github.push_head(pull, {"a.py": "new 1\nnew 2\n" + HEAD_A})
    result = review(
        newer.url,
        settings,
        [finding(path="a.py", line=7, title="kept"), finding(path="a.py", line=1, title="new")],
    )
    assert result.publication is not None
    assert result.publication.status == "published"
    assert result.publication.duplicates_skipped == 1
    assert result.publication.inline_comments == 1
    first, second = posted(fake_github)
    assert comment_lines(second) == [("a.py", 1)]
    # The count of what was not repeated lives in the summary, our first review's body.
    assert "1 already posted, not repeated" in text(first["body"])
    listing = [r for r in fake_github.api_requests() if r.path.endswith("/comments")]
    assert any("page=2" in r.query for r in listing)  # both inline comments of the first


# --- failures ---


def test_422_makes_one_more_attempt_with_everything_in_the_body(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = pull_request(fake_github)
    fake_github.review_faults.append(
        CannedResponse(
            422, b'{"message":"Pull request review thread line must be part of the diff"}'
        )
    )
    result = review(pull.url, settings_for(fake_github, tmp_path), [finding(path="a.py", line=5)])
    assert result.publication is not None
    assert result.publication.status == "published"
    assert result.publication.inline_comments == 0
    assert result.publication.body_findings == 1
    first, second = fake_github.review_posts
    assert len(first["comments"]) == 1
    assert second["comments"] == []
    assert "a.py line 5" in text(second["body"])


@pytest.mark.parametrize(
    "headers",
    [{"Retry-After": "1"}, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "RESET"}],
)
@pytest.mark.parametrize("status", [403, 429])
def test_a_secondary_rate_limit_is_waited_out(
    fake_github: FakeGitHub, tmp_path: Path, status: int, headers: dict[str, str]
) -> None:
    pull = pull_request(fake_github)
    wanted = {k: str(int(time.time()) + 1) if v == "RESET" else v for k, v in headers.items()}
    fake_github.review_faults.append(CannedResponse(status, b"{}", wanted))
    started = time.monotonic()
    result = review(pull.url, settings_for(fake_github, tmp_path), [finding(path="a.py", line=5)])
    assert result.publication is not None
    assert result.publication.status == "published"
    assert len(fake_github.review_posts) == 2
    assert time.monotonic() - started >= 0.9 or "x-ratelimit-reset" in wanted


def test_a_rate_limit_past_the_deadline_fails_at_once(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = pull_request(fake_github)
    fake_github.review_faults.append(CannedResponse(429, b"{}", {"Retry-After": "3600"}))
    started = time.monotonic()
    result = review(pull.url, settings_for(fake_github, tmp_path), [finding(path="a.py", line=5)])
    assert time.monotonic() - started < 30
    assert result.publication is not None
    assert result.publication.status == "failed"
    assert result.publication.error is not None
    assert result.publication.error.code == "github_publish_failed"


@pytest.mark.parametrize(
    ("status", "fragment"), [(403, "write access"), (500, "server error"), (503, "server error")]
)
def test_other_failures_return_the_review_with_a_failed_publication(
    fake_github: FakeGitHub, tmp_path: Path, status: int, fragment: str
) -> None:
    pull = pull_request(fake_github)
    marker = "GITHUB-BODY-MARKER-9e1"
    fake_github.review_faults.append(
        CannedResponse(status, json.dumps({"message": marker}).encode())
    )
    result = review(pull.url, settings_for(fake_github, tmp_path), [finding(path="a.py", line=5)])
    assert result.review.findings[0].path == "a.py"  # the paid-for review is kept
    publication = result.publication
    assert publication is not None
    assert publication.status == "failed"
    assert publication.error is not None
    assert publication.error.code == "github_publish_failed"
    assert fragment in publication.error.message
    dumped = result.model_dump_json()
    assert marker not in dumped
    assert GITHUB_TOKEN not in dumped
    assert len(fake_github.review_posts) == 1


def test_a_token_without_write_access_fails(fake_github: FakeGitHub, tmp_path: Path) -> None:
    pull = pull_request(fake_github)
    settings = settings_for(fake_github, tmp_path).model_copy(
        update={"github_token": SecretStr("read-only-token")}
    )
    result = review(pull.url, settings, [finding(path="a.py", line=5)])
    assert result.publication is not None
    assert result.publication.status == "failed"


# --- no write without post ---


def test_no_write_request_and_no_publication_without_post(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = pull_request(fake_github)
    result = review(
        pull.url, settings_for(fake_github, tmp_path), [finding(path="a.py", line=5)], post=False
    )
    assert result.publication is None
    assert result.model_dump()["publication"] is None
    assert all(r.method == "GET" for r in fake_github.api_requests())
    assert not any(
        r.path.endswith(("/reviews", "/comments", "/user")) for r in fake_github.api_requests()
    )
    assert fake_github.review_posts == []


def test_every_api_request_goes_to_github_with_the_token(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = pull_request(fake_github)
    review(pull.url, settings_for(fake_github, tmp_path), [finding(path="a.py", line=5)])
    requests = fake_github.api_requests()
    assert {r.method for r in requests} == {"GET", "POST", "PATCH"}  # PATCH: the check run
    assert all(r.authorization == f"Bearer {GITHUB_TOKEN}" for r in requests)


# --- the command line and the HTTP API ---


@pytest.mark.usefixtures("github_cli")
def test_cli_post_publishes_and_exits_0(
    fake_github: FakeGitHub,
    scripted_provider: ScriptedProvider,
    tmp_path: Path,
) -> None:
    pull = pull_request(fake_github)
    scripted_provider.script(final_turn(finding(path="a.py", line=5)))
    done = CliRunner().invoke(cli.main, ["review", pull.url, "--post", "--format", "json"])
    assert done.exit_code == 0, done.output
    document = json.loads(done.stdout)
    assert document["publication"]["status"] == "published"
    assert document["publication"]["inline_comments"] == 1
    assert len(posted(fake_github)) == 1


@pytest.mark.usefixtures("github_cli")
def test_cli_failed_publication_prints_the_review_and_exits_1(
    fake_github: FakeGitHub,
    scripted_provider: ScriptedProvider,
    tmp_path: Path,
) -> None:
    pull = pull_request(fake_github)
    fake_github.review_faults.append(CannedResponse(500, b"{}"))
    scripted_provider.script(final_turn(finding(path="a.py", line=5)))
    done = CliRunner().invoke(cli.main, ["review", pull.url, "--post", "--format", "json"])
    assert done.exit_code == 1
    document = json.loads(done.stdout)
    assert document["review"]["findings"][0]["path"] == "a.py"
    assert document["publication"]["status"] == "failed"
    assert document["publication"]["error"]["code"] == "github_publish_failed"
    assert "github_publish_failed" in done.stderr


@pytest.mark.usefixtures("github_cli")
def test_cli_without_post_has_a_null_publication_and_writes_nothing(
    fake_github: FakeGitHub,
    scripted_provider: ScriptedProvider,
    tmp_path: Path,
) -> None:
    pull = pull_request(fake_github)
    scripted_provider.script(final_turn(finding(path="a.py", line=5)))
    done = CliRunner().invoke(cli.main, ["review", pull.url, "--format", "json"])
    assert done.exit_code == 0
    assert json.loads(done.stdout)["publication"] is None
    assert all(r.method == "GET" for r in fake_github.api_requests())


def test_cli_post_with_a_local_repository_is_bad_input(tmp_path: Path) -> None:
    done = CliRunner().invoke(
        cli.main, ["review", "--repo", str(tmp_path), "--base", "a", "--head", "b", "--post"]
    )
    assert done.exit_code == 2


def test_api_post_true_publishes(fake_github: FakeGitHub, tmp_path: Path) -> None:
    pull = pull_request(fake_github)
    settings = settings_for(fake_github, tmp_path)
    model = ScriptedModel(stop_turn(final_review(finding(path="a.py", line=5), summary="S")))
    app = create_app(settings)
    app.state.model = model
    with TestClient(app) as client:
        app.state.model = model
        answer = client.post("/v1/reviews", json={"pull_request_url": pull.url, "post": True})
    assert answer.status_code == 200, answer.text
    assert answer.json()["publication"]["status"] == "published"
    assert len(posted(fake_github)) == 1


def test_api_post_must_be_a_boolean(fake_github: FakeGitHub, tmp_path: Path) -> None:
    app = create_app(settings_for(fake_github, tmp_path))
    with TestClient(app) as client:
        answer = client.post(
            "/v1/reviews", json={"pull_request_url": "https://github.com/a/b/pull/1", "post": 1}
        )
    assert answer.status_code == 422
    assert answer.json()["error"]["code"] == "invalid_request"
    assert fake_github.review_posts == []


# --- the property: no first attempt is ever refused ---


_LINES = st.lists(st.sampled_from(["a", "b", "c", "d", "e", ""]), min_size=1, max_size=25)


@hypothesis_settings(
    max_examples=examples(20),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    old=_LINES,
    new=_LINES,
    picks=st.lists(
        st.tuples(
            st.sampled_from(["f.txt", "same.txt", "moved.txt"]),
            st.integers(min_value=0, max_value=30),
            st.sampled_from(["critical", "high", "medium", "low", "info"]),
        ),
        max_size=12,
    ),
    cap=st.integers(min_value=0, max_value=6),
)
def test_no_first_attempt_is_ever_refused(
    fake_github: FakeGitHub,
    old: list[str],
    new: list[str],
    picks: list[tuple[str, int, str]],
    cap: int,
) -> None:
    number = len(fake_github._pulls) + 1
    moved_old = "".join(f"m{n}\n" for n in range(30))
    files_old = {"f.txt": "\n".join(old) + "\n", "same.txt": "s\n" * 30, "was.txt": moved_old}
    base_sha = fake_github.repository("acme", "widget").commit(files_old, None, "base")
    origin = fake_github.repository("acme", "widget")
    origin.set_branch(f"b{number}", base_sha)
    work = origin.work
    work.checkout(base_sha)
    work.commit_files({"f.txt": "\n".join(new) + "\n"})
    work.commit_files({"moved.txt": moved_old.replace("m20\n", "m twenty\n")}, delete=("was.txt",))
    head_sha = work.head()
    origin.set_pull_head(number, head_sha)
    fake_github._pulls[("acme", "widget", number)] = PullRequestFixture(
        origin, number, base_sha, head_sha, f"b{number}", ""
    )
    sizes = {"f.txt": len(new), "same.txt": 30, "moved.txt": 30}
    findings = [
        finding(
            path=path,
            line=None if line == 0 else min(line, sizes[path]),
            severity=severity,
            title=f"t{i}",
        )
        for i, (path, line, severity) in enumerate(picks)
    ]
    result = ReviewResult.model_validate(
        {
            "pull_request": {"url": "u", "owner": "acme", "repo": "widget", "number": number},
            "revisions": {"base_sha": base_sha, "head_sha": head_sha, "merge_base_sha": base_sha},
            "model": "m",
            "review": {"summary": "s", "findings": findings, "notes": []},
            "usage": {},
            "rounds": 1,
            "tool_calls": 0,
            "trace": None,
        }
    )
    fake_github.users[GITHUB_TOKEN] = BOT
    settings = fake_github.settings(Path("unused"), token=GITHUB_TOKEN)
    ref = PullRequestRef("acme", "widget", number, "u")
    before = len(fake_github.review_posts)

    async def go() -> Publication:
        async with GitHubClient(settings) as github:
            deadline = asyncio.get_running_loop().time() + 30
            return await publish(
                result, ref, github, origin.bare, deadline=deadline, max_inline=cap
            )

    publication = asyncio.run(go())
    assert publication.status == "published", publication
    assert len(fake_github.review_posts) == before + 1  # the first attempt was accepted
    assert publication.inline_comments <= cap
    assert publication.inline_comments + publication.body_findings == len(findings)


# --- re-reviews ---


def _first_message(url: str, settings: Settings, *, post: bool) -> str:
    model = ScriptedModel(stop_turn(final_review(summary="S")))
    asyncio.run(run_review(ChangeTarget(url), settings, ReviewOptions(model=model, post=post)))
    content = model.requests[0].messages[1]["content"]
    assert isinstance(content, str)
    return content


def test_a_re_review_names_the_files_changed_since_our_last_head(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = pull_request(fake_github)
    settings = settings_for(fake_github, tmp_path)
    first = _first_message(pull.url, settings, post=True)
    assert "re-review" not in first
    newer = fake_github.push_head(pull, {"later.py": "x\n"})
    message = _first_message(newer.url, settings, post=True)
    assert f"our last review was of {pull.head_sha}" in message
    assert '"changed_since_last_review": [\n  "later.py"\n ]' in message
    assert "1 files changed since then" in message


def test_a_force_pushed_head_is_not_called_a_re_review(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = pull_request(fake_github)
    settings = settings_for(fake_github, tmp_path)
    _first_message(pull.url, settings, post=True)
    rewritten = fake_github.push_head(pull, {"other.py": "rewritten\n"}, parent=pull.base_sha)
    message = _first_message(rewritten.url, settings, post=True)
    assert "re-review" not in message
    assert "changed_since_last_review" not in message


def test_without_post_there_is_no_re_review_look_up(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = pull_request(fake_github)
    settings = settings_for(fake_github, tmp_path)
    _first_message(pull.url, settings, post=True)
    newer = fake_github.push_head(pull, {"later.py": "x\n"})
    before = len(fake_github.api_requests())
    message = _first_message(newer.url, settings, post=False)
    assert "re-review" not in message
    assert all(r.path.endswith("/pulls/7") for r in fake_github.api_requests()[before:])


def test_the_service_keeps_one_github_client_for_every_review(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = pull_request(fake_github)
    settings = settings_for(fake_github, tmp_path)
    app = create_app(settings)
    with TestClient(app) as client:
        for _ in range(3):
            app.state.model = ScriptedModel(
                stop_turn(final_review(finding(path="a.py", line=5), summary="S"))
            )
            answer = client.post("/v1/reviews", json={"pull_request_url": pull.url, "post": True})
            assert answer.status_code == 200
    statuses = [r.status for r in fake_github.api_requests()]
    assert all(status in (200, 201) for status in statuses)  # 201: the check run created
    assert len({r.client_port for r in fake_github.api_requests()}) == 1  # one pooled connection
    assert [p["status"] for p in [answer.json()["publication"]]] == ["already_published"]


def test_a_second_422_fails_the_publication(fake_github: FakeGitHub, tmp_path: Path) -> None:
    pull = pull_request(fake_github)
    fake_github.review_faults += [CannedResponse(422, b"{}"), CannedResponse(422, b"{}")]
    result = review(pull.url, settings_for(fake_github, tmp_path), [finding(path="a.py", line=5)])
    assert result.publication is not None
    assert result.publication.status == "failed"
    assert len(fake_github.review_posts) == 2  # one more attempt, never a third


def test_the_inline_cap_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().pr_review_max_inline_comments == 30
    monkeypatch.setenv("PR_REVIEW_MAX_INLINE_COMMENTS", "5")
    assert Settings().pr_review_max_inline_comments == 5


def test_a_link_to_another_origin_never_gets_the_token(tmp_path: Path) -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        if request.url.path.endswith("/user"):
            return httpx.Response(200, json={"login": BOT})
        return httpx.Response(
            200, json=[], headers={"Link": '<https://evil.example/steal?page=2>; rel="next"'}
        )

    settings = Settings(
        github_api_url="https://api.github.test", github_token=SecretStr(GITHUB_TOKEN)
    )
    result = ReviewResult.model_validate(
        {
            "pull_request": {"url": "u", "owner": "acme", "repo": "widget", "number": 7},
            "revisions": {"base_sha": "a" * 40, "head_sha": "b" * 40, "merge_base_sha": "a" * 40},
            "model": "m",
            "review": {"summary": "s", "findings": [], "notes": []},
            "usage": {},
            "rounds": 1,
            "tool_calls": 0,
            "trace": None,
        }
    )

    async def go() -> Publication:
        async with (
            httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http,
            GitHubClient(settings, http=http) as github,
        ):
            ref = PullRequestRef("acme", "widget", 7, "u")
            deadline = asyncio.get_running_loop().time() + 10
            return await publish(result, ref, github, tmp_path, deadline=deadline, max_inline=30)

    publication = asyncio.run(go())
    assert publication.status == "failed"
    assert all(url.startswith("https://api.github.test/") for url in seen)
    assert not any("evil" in url for url in seen)


def test_the_fake_refuses_a_whole_review_with_one_comment_off_the_diff(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    # The property above means something only if the fake applies GitHub's rule.
    pull = pull_request(fake_github)
    settings = settings_for(fake_github, tmp_path)
    url = f"{fake_github.api_url}/repos/acme/widget/pulls/7/reviews"

    def payload(*lines: int) -> dict[str, Any]:
        comments = [{"path": "a.py", "line": n, "side": "RIGHT", "body": "b"} for n in lines]
        return {"commit_id": pull.head_sha, "event": "COMMENT", "body": "x", "comments": comments}

    async def go() -> list[int]:
        async with GitHubClient(settings) as github:
            statuses = []
            for lines in ((5, 10), (1,), (2, 8), ()):
                answer = await github.request("POST", url, json_body=payload(*lines))
                statuses.append(answer.status)
            return statuses

    assert asyncio.run(go()) == [422, 422, 200, 200]
    stored = posted(fake_github)
    assert [comment_lines(r) for r in stored] == [[("a.py", 2), ("a.py", 8)], []]


def test_a_rate_limit_on_reading_our_reviews_is_waited_out(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = pull_request(fake_github)
    fake_github.list_faults.append(CannedResponse(403, b"{}", {"Retry-After": "1"}))
    result = review(pull.url, settings_for(fake_github, tmp_path), [finding(path="a.py", line=5)])
    assert result.publication is not None
    assert result.publication.status == "published"
    assert fake_github.list_faults == []


def test_many_pages_of_others_reviews_are_read_past(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = pull_request(fake_github)
    for n in range(5):
        fake_github.add_review("acme", "widget", 7, f"user{n}", "x" * 1000)
    fake_github.page_size = 2
    result = review(pull.url, settings_for(fake_github, tmp_path), [finding(path="a.py", line=5)])
    assert result.publication is not None
    assert result.publication.status == "published"
    pages = [r for r in fake_github.api_requests() if r.path.endswith("/reviews")]
    assert len([r for r in pages if r.method == "GET"]) >= 3
