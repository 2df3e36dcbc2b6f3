"""Publishing suggestions (specification §14) on the fake GitHub, which refuses what GitHub refuses:
a committable suggestion is a (multi-line) comment over its range ending with a `suggestion`
block; any other is a diff that is clearly not committable; model text stays inert outside
the block and exact inside it; the first attempt is never refused."""

from __future__ import annotations

import asyncio
import json
import re
from functools import partial
from pathlib import Path
from typing import Any

import httpx
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markdown_it.token import Token

from pr_review_api.llm.testing import ScriptedModel, stop_turn
from pr_review_api.loop.run import ReviewOptions, run_review
from pr_review_api.loop.suggestions import HeadText
from pr_review_api.loop.syntax import syntax_errors
from pr_review_api.loop.workspace import ChangeTarget
from pr_review_api.model import Finding, ReviewResult, Suggestion
from pr_review_api.output.inert_markdown import WORD_JOINER
from pr_review_api.publishing.placement import fingerprint_of
from pr_review_api.settings import Settings
from tests import builders
from tests.builders import suggestion
from tests.conftest import GITHUB_TOKEN, PROVIDER_KEY, examples
from tests.fakes.github_server import FakeGitHub, PullRequestFixture, fake_github

__all__ = ["fake_github"]

BOT = "pr-review-bot"
BASE = "".join(f"x{n} = {n}\n" for n in range(1, 31))
# Two hunks on the RIGHT side: lines 2-8 (around line 5) and 22-28 (around line 25).
HEAD = BASE.replace("x5 = 5\n", "x5 = five()\n").replace("x25 = 25\n", "x25 = twenty_five()\n")
HOSTILE = "x27 = 27  # ```` ``` `\n# @octocat fixes #12 <!-- x --> [a](http://e.com) **b**"
FORGED = "<!-- pr-review:finding=0123456789abcdef0123456789abcdef -->"


def settings_for(fake: FakeGitHub, tmp_path: Path, **overrides: Any) -> Settings:
    fake.users.setdefault(GITHUB_TOKEN, BOT)
    return fake.settings(
        tmp_path / "cache",
        token=GITHUB_TOKEN,
        opencode_api_key=PROVIDER_KEY,
        review_timeout_seconds=60,
        review_suggestions=True,
        **overrides,
    )


finding = partial(builders.finding, severity="medium", path="svc.py", **builders.TERSE)


def review(url: str, settings: Settings, findings: list[dict[str, Any]]) -> ReviewResult:
    document = {"summary": "S.", "findings": findings, "notes": []}
    model = ScriptedModel(stop_turn(document))
    return asyncio.run(
        run_review(ChangeTarget(url), settings, ReviewOptions(model=model, post=True))
    )


def pull_request(fake: FakeGitHub, number: int = 7) -> PullRequestFixture:
    return fake.pull_request("acme", "widget", number, base={"svc.py": BASE}, head={"svc.py": HEAD})


def comments_by_title(fake: FakeGitHub, number: int = 7) -> dict[str, dict[str, Any]]:
    (done,) = fake.posted("acme", "widget", number)
    return {_title(c["body"]): c for c in done["comments"]}


def _title(body: str) -> str:
    return body.split("\n", 1)[0].rsplit(" ", 1)[-1]


def fences(markdown: str) -> list[Token]:
    return [t for t in MarkdownIt("commonmark").parse(markdown) if t.type == "fence"]


def test_a_committable_suggestion_is_a_multi_line_comment_ending_with_its_block(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = pull_request(fake_github)
    replacement = "x4 = 4\nx5 = 5\nx6 = 6"
    result = review(
        pull.url,
        settings_for(fake_github, tmp_path),
        [
            finding(line=5, suggestion=suggestion(4, 6, replacement), title="multi"),
            finding(line=25, suggestion=suggestion(25, 25, "x25 = 25"), title="one"),
        ],
    )
    assert result.publication is not None
    assert result.publication.status == "published"
    assert len(fake_github.review_posts) == 1  # the first attempt was accepted
    posted = fake_github.review_posts[0]["comments"]
    print(json.dumps(posted[0], indent=1))  # the report quotes what the fake received
    comments = comments_by_title(fake_github)
    multi = comments["multi"]
    assert (multi["start_line"], multi["start_side"], multi["line"], multi["side"]) == (
        4,
        "RIGHT",
        6,
        "RIGHT",
    )
    assert multi["body"].endswith("```suggestion\n" + replacement + "\n```")
    (block,) = fences(multi["body"])
    assert (block.info, block.content) == ("suggestion", replacement + "\n")
    one = comments["one"]
    assert "start_line" not in one
    assert "start_side" not in one
    assert (one["line"], one["side"]) == (25, "RIGHT")
    assert one["body"].endswith("```suggestion\nx25 = 25\n```")


def test_other_suggestions_are_diffs_that_are_not_committable(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = pull_request(fake_github)
    findings = [
        finding(
            line=7, suggestion=suggestion(7, 23, "x7 = 7"), title="across"
        ),  # two hunks: line 7 inline, a diff
        finding(
            line=12, suggestion=suggestion(12, 13, "x12 = 12.0"), title="outside"
        ),  # no hunk: in the body
        finding(
            line=26, suggestion=suggestion(26, 26, "x26 = 26  # " + FORGED), title="forged"
        ),  # a marker: never raw
    ]
    review(pull.url, settings_for(fake_github, tmp_path), findings)
    assert len(fake_github.review_posts) == 1
    comments = comments_by_title(fake_github)
    assert set(comments) == {"across", "forged"}
    across = comments["across"]
    assert "start_line" not in across
    assert across["line"] == 7
    (diff,) = fences(across["body"])
    assert diff.info == "diff"
    assert diff.content.startswith("@@ -7,17 +7,1 @@\n-x7 = 7\n-x8 = 8\n")
    assert diff.content.endswith("-x23 = 23\n+x7 = 7\n")
    assert "not committable" in across["body"]
    assert "```suggestion" not in json.dumps(fake_github.review_posts)
    forged = comments["forged"]
    assert FORGED not in forged["body"]
    assert "<" + WORD_JOINER + "!-- pr-review:finding=0123" in forged["body"]
    (done,) = fake_github.posted("acme", "widget", 7)
    (body_diff,) = fences(done["body"])
    assert body_diff.content == "@@ -12,2 +12,1 @@\n-x12 = 12\n-x13 = 13\n+x12 = 12.0\n"
    assert "svc\\.py line 12" in done["body"]


def test_a_replacement_is_inert_outside_its_block_and_exact_inside(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = pull_request(fake_github)
    hostile = finding(
        line=27, suggestion=suggestion(27, 28, HOSTILE), title="hostile", explanation=HOSTILE
    )
    result = review(pull.url, settings_for(fake_github, tmp_path), [hostile])
    kept = result.review.findings[0].offered()
    assert kept is not None
    assert kept.replacement == HOSTILE
    body = comments_by_title(fake_github)["hostile"]["body"]
    tokens = MarkdownIt("commonmark").parse(body)
    (block,) = [t for t in tokens if t.type == "fence"]
    assert block.info == "suggestion"
    assert block.content == HOSTILE + "\n"  # exact: GitHub commits this text
    assert block.markup == "`" * 5  # longer than the run of four inside
    outside = [t for t in tokens if t.type != "fence"]
    # The only HTML outside the block is our own marker; no link, no mention, no reference.
    html = [t.content.strip() for t in outside if t.type.startswith("html")]
    assert all(re.fullmatch(r"<!-- pr-review:finding=[0-9a-f]{32} -->", h) for h in html)
    rendered = MarkdownIt("commonmark").render(body.rsplit("`````suggestion", 1)[0])
    assert "<a " not in rendered
    assert "<strong>b" not in rendered
    assert "@octocat" not in rendered
    assert "#12" not in rendered
    assert f"@{WORD_JOINER}octocat" in rendered


def test_fingerprints_do_not_depend_on_the_suggestion() -> None:
    plain = Finding(
        severity="low",
        title="t",
        explanation="e",
        path="svc.py",
        line=5,
        evidence="v",
        recommendation="r",
    )
    suggested = plain.model_copy(
        update={"suggestion": Suggestion(start_line=5, end_line=5, replacement="y")}
    )
    texts = {"svc.py": HEAD.splitlines()}
    assert fingerprint_of(plain, texts) == fingerprint_of(suggested, texts)
    assert plain.fingerprint() == suggested.fingerprint()


# --- the fake refuses what GitHub refuses ---


def _post_comment(fake: FakeGitHub, pull: PullRequestFixture, comment: dict[str, Any]) -> int:
    fake.users.setdefault(GITHUB_TOKEN, BOT)
    payload = {
        "commit_id": pull.head_sha,
        "event": "COMMENT",
        "body": "b",
        "comments": [{"path": "svc.py", "side": "RIGHT", "body": "c", **comment}],
    }
    response = httpx.post(
        f"{fake.api_url}/repos/acme/widget/pulls/{pull.number}/reviews",
        json=payload,
        headers={"Authorization": f"Bearer {GITHUB_TOKEN}"},
    )
    return response.status_code


def test_the_fake_refuses_what_github_refuses(fake_github: FakeGitHub) -> None:
    pull = pull_request(fake_github)
    refused: list[dict[str, Any]] = [
        {"start_line": 6, "start_side": "RIGHT", "line": 6},  # start_line not before line
        {"start_line": 7, "start_side": "RIGHT", "line": 5},
        {"start_line": 7, "start_side": "RIGHT", "line": 23},  # across two hunks
        {"start_line": 1, "start_side": "RIGHT", "line": 4},  # line 1 is in no hunk
        {"start_side": "RIGHT", "line": 5},  # start_side without start_line
        {"line": 15},  # outside every hunk
        {"start_line": 4, "start_side": "LEFT", "line": 6},
    ]
    for comment in refused:
        assert _post_comment(fake_github, pull, comment) == 422, comment
    accepted = {"start_line": 2, "start_side": "RIGHT", "line": 8}  # a whole hunk
    assert _post_comment(fake_github, pull, accepted) == 200
    assert fake_github.posted("acme", "widget", pull.number)  # the one accepted


# --- the property: no first attempt is ever refused, no posted suggestion breaks a parse ---

_CODE = ["x = 1", "y = (", ")", "def f():", "    return 1", "pass", "", "z = [1,", "2]"]
_LINES = st.lists(st.sampled_from(_CODE), min_size=1, max_size=20)


@hypothesis_settings(
    max_examples=examples(10),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    old=_LINES,
    new=_LINES,
    picks=st.lists(
        st.tuples(
            st.integers(min_value=1, max_value=22),  # start
            st.integers(min_value=0, max_value=4),  # extra lines
            st.integers(min_value=-1, max_value=5),  # the finding's line, from start (-1: null)
            st.lists(st.sampled_from(_CODE), max_size=3),
        ),
        max_size=8,
    ),
)
def test_no_first_attempt_is_refused_and_no_suggestion_breaks_a_parse(
    fake_github: FakeGitHub,
    tmp_path_factory: Any,
    old: list[str],
    new: list[str],
    picks: list[tuple[int, int, int, list[str]]],
) -> None:
    number = len(fake_github._pulls) + 1
    head_text = "\n".join([*new, "# head"]) + "\n"  # never the base's tree
    base_text = "\n".join([*old, "# base"]) + "\n"
    pull = fake_github.pull_request(
        "acme", "widget", number, base={"g.py": base_text}, head={"g.py": head_text}
    )
    findings = [
        finding(
            line=None if offset < 0 else start + offset,
            suggestion=suggestion(start, start + extra, "\n".join(lines)),
            title=f"t{i}",
            path="g.py",
        )
        for i, (start, extra, offset, lines) in enumerate(picks)
        if start + max(extra, offset) <= len(new)  # section 8's line check holds
    ]
    before = len(fake_github.review_posts)
    settings = settings_for(fake_github, tmp_path_factory.mktemp("cache"))
    result = review(pull.url, settings, findings)
    assert result.publication is not None
    assert result.publication.status == "published"
    assert len(fake_github.review_posts) == before + 1  # the first attempt was accepted
    head = HeadText.of(head_text)
    errors = syntax_errors("python", head_text.encode())
    for comment in fake_github.review_posts[-1]["comments"]:
        blocks = [t for t in fences(comment["body"]) if t.info == "suggestion"]
        for block in blocks:
            start = comment.get("start_line", comment["line"])
            replacement = block.content.removesuffix("\n")
            patched = head.applied(
                Suggestion(start_line=start, end_line=comment["line"], replacement=replacement)
            )
            assert syntax_errors("python", patched.encode()) <= errors
