"""Publishing a validated review on its pull request (CONTRACT section 10).

One `POST /repos/{o}/{r}/pulls/{n}/reviews` with `event: COMMENT` and `commit_id` the head:

1. Read our own earlier reviews and review comments (paginated with `Link`) and keep the
   markers of those whose author is the publishing identity (`GitHubClient.login`). A review
   of ours that carries this head's marker means nothing is posted (`already_published`); the
   fingerprints already posted are not posted again (`duplicates_skipped`).
2. Place each finding: inline when its line is an added or context line of a hunk of its file's
   diff from the merge base to the head (`git/hunks.py`), at most
   `PR_REVIEW_MAX_INLINE_COMMENTS`, most severe first, then path, then line; every other one in
   the body with its path and line.
3. Post. A 422 (GitHub refusing a comment's line) makes one more attempt with every finding in
   the body; a secondary rate limit (403/429 with `Retry-After` or `x-ratelimit-reset`) is
   waited out when the wait ends before the deadline; anything else ends `failed` with a fixed
   sentence. The review itself is never lost: the caller returns it whatever happens here.

Every piece of model text goes through `markdown.escape`, so it cannot mention, reference, link,
embed or inject HTML, and cannot forge a marker.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import subprocess
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from pr_review_api.errors import GitHubUnavailable
from pr_review_api.git.hunks import FileHunks, diff_hunks
from pr_review_api.git.runner import GitError, run_git
from pr_review_api.github.client import GitHubClient, is_rate_limited, rate_limit_wait
from pr_review_api.github.markdown import escape, escape_inline
from pr_review_api.github.markers import (
    Post,
    PriorState,
    finding_marker,
    head_marker,
    read_markers,
)
from pr_review_api.github.urls import PullRequestRef
from pr_review_api.loop.coverage import coverage_line
from pr_review_api.model import (
    SEVERITIES,
    Finding,
    Publication,
    PublicationError,
    PullRequestInfo,
    ReviewResult,
)

logger = logging.getLogger(__name__)

MAX_BODY_CHARS = 60_000  # GitHub refuses bodies over 65,536 characters
MAX_LIST_PAGES = 30  # 100 per page
MAX_POST_ATTEMPTS = 5
DEFAULT_RATE_LIMIT_WAIT_SECONDS = 60
DEADLINE_MARGIN_SECONDS = 0.5
_NEXT_LINK = re.compile(r'<([^<>\s]+)>\s*;\s*rel="?next"?')
_RANK = {severity: rank for rank, severity in enumerate(SEVERITIES)}


@dataclass(frozen=True)
class Placed:
    """A finding, its fingerprint and, when inline, nothing more: the line is its own."""

    finding: Finding
    fingerprint: str


@dataclass
class Placement:
    inline: list[Placed] = field(default_factory=list)
    body: list[Placed] = field(default_factory=list)
    skipped: int = 0


class _Failure(Exception):
    """Publishing failed; `message` is a fixed sentence."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# --- what is already there ---


class _UserWire(BaseModel):
    model_config = ConfigDict(extra="ignore")
    login: str | None = None


class _PostWire(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: int | None = None
    user: _UserWire | None = None
    body: str | None = None
    html_url: str | None = None


def _next_link(headers: Any) -> str | None:
    match = _NEXT_LINK.search(headers.get("link", ""))
    return None if match is None else match[1]


async def _list_posts(github: GitHubClient, url: str, installation_id: int | None) -> list[Post]:
    posts: list[Post] = []
    next_url: str | None = url + "?per_page=100"
    for _ in range(MAX_LIST_PAGES):
        if next_url is None:
            break
        response = await github.request("GET", next_url, installation_id=installation_id)
        if response.status != 200:
            raise _status_failure(response.status, "read the pull request's reviews")
        try:
            page = [_PostWire.model_validate(item) for item in _json_list(response.body)]
        except (ValueError, ValidationError):
            raise _Failure("GitHub returned review data that is not valid.") from None
        for item in page:
            author = None if item.user is None else item.user.login
            posts.append(Post(author, item.body or "", item.id, item.html_url, len(posts)))
        next_url = _next_link(response.headers)
    return posts


def _json_list(body: bytes) -> list[Any]:
    document = json.loads(body)
    if not isinstance(document, list):
        raise ValueError("not a list")
    return document


async def prior_state(
    github: GitHubClient, ref: PullRequestRef, installation_id: int | None = None
) -> PriorState:
    """The markers of our own reviews and review comments on the pull request."""
    login = await github.login(installation_id)
    settings = github.settings
    reviews = await _list_posts(github, ref.api_url(settings, "/reviews"), installation_id)
    comments = await _list_posts(github, ref.api_url(settings, "/comments"), installation_id)
    state = read_markers(reviews, login, reviews=True)
    state.fingerprints |= read_markers(comments, login, reviews=False).fingerprints
    return state


# --- placement ---


def _line_texts(git_dir: Path, head: str, findings: Sequence[Finding]) -> dict[str, list[str]]:
    texts: dict[str, list[str]] = {}
    for path in {f.path for f in findings if f.line is not None}:
        try:
            blob = run_git(git_dir, ["cat-file", "blob", f"{head}:{path}"], timeout=60).stdout
        except (GitError, OSError, subprocess.SubprocessError):
            continue
        texts[path] = blob.decode("utf-8", "replace").splitlines()
    return texts


def fingerprint_of(finding: Finding, texts: dict[str, list[str]]) -> str:
    """The finding's fingerprint with the text of its line at the head (CONTRACT 10)."""
    lines = texts.get(finding.path)
    if finding.line is None or lines is None or finding.line > len(lines):
        return finding.fingerprint()
    return finding.fingerprint(lines[finding.line - 1])


def place(
    findings: Sequence[Finding],
    hunks: dict[str, FileHunks],
    fingerprints: Sequence[str],
    already: set[str],
    max_inline: int,
) -> Placement:
    """Which findings go inline, which in the body, how many were posted before."""
    placement = Placement()
    candidates: list[Placed] = []
    seen: set[str] = set()
    for finding, fingerprint in zip(findings, fingerprints, strict=True):
        if fingerprint in already or fingerprint in seen:
            placement.skipped += 1
            continue
        seen.add(fingerprint)
        placed = Placed(finding, fingerprint)
        file = hunks.get(finding.path)
        if finding.line is not None and file is not None and file.anchors(finding.line):
            candidates.append(placed)
        else:
            placement.body.append(placed)
    candidates.sort(key=lambda p: (_RANK[p.finding.severity], p.finding.path, p.finding.line))
    placement.inline = candidates[:max_inline]
    placement.body = sorted(
        [*candidates[max_inline:], *placement.body],
        key=lambda p: (_RANK[p.finding.severity], p.finding.path, p.finding.line or 0),
    )
    return placement


# --- rendering ---


def render_comment(placed: Placed) -> str:
    """The body of an inline comment."""
    finding = placed.finding
    return "\n\n".join(
        [
            f"**{finding.severity}** · {escape_inline(finding.title)}",
            escape(finding.explanation),
            f"**Evidence:** {escape(finding.evidence)}",
            f"**Recommendation:** {escape(finding.recommendation)}",
            finding_marker(placed.fingerprint),
        ]
    )


def _body_entry(placed: Placed) -> str:
    finding = placed.finding
    where = escape_inline(finding.path) + ("" if finding.line is None else f" line {finding.line}")
    return "\n".join(
        [
            f"- **{finding.severity}** · {where} · {escape_inline(finding.title)}",
            "",
            "  " + escape(finding.explanation).replace("\n", "\n  "),
            "",
            "  **Recommendation:** " + escape(finding.recommendation).replace("\n", "\n  "),
            "  " + finding_marker(placed.fingerprint),
        ]
    )


def render_body(result: ReviewResult, placement: Placement) -> tuple[str, int]:
    """The review body and how many body findings it holds (the rest did not fit)."""
    review = result.review
    counts = Counter(f.severity for f in review.findings)
    tally = ", ".join(f"{counts[s]} {s}" for s in SEVERITIES if counts[s]) or "none"
    parts = ["### pr-review", "", escape(review.summary), "", f"**Findings:** {tally}"]
    parts += ["", coverage_line(result.coverage, escape_inline)]
    if placement.inline:
        parts += ["", f"{len(placement.inline)} of them inline on the diff."]
    if placement.skipped:
        parts += ["", f"{placement.skipped} already posted on an earlier head, not repeated."]
    tail = _tail(result)
    size = sum(len(p) + 1 for p in parts) + len(tail) + 200
    shown = 0
    if placement.body:
        parts += ["", "#### Findings not on the diff's lines", ""]
        for placed in placement.body:
            entry = _body_entry(placed)
            if size + len(entry) > MAX_BODY_CHARS:
                break
            parts += [entry, ""]
            size += len(entry) + 2
            shown += 1
        if shown < len(placement.body):
            parts += [f"{len(placement.body) - shown} more findings did not fit in this review."]
    notes = [escape(note).replace("\n", "\n  ") for note in review.notes]
    if notes:
        parts += ["", "#### Notes", ""]
        for note in notes:
            if size + len(note) > MAX_BODY_CHARS:
                parts.append("(more notes did not fit)")
                break
            parts.append("- " + note)
            size += len(note) + 3
    parts += ["", tail]
    return "\n".join(parts), shown


def _tail(result: ReviewResult) -> str:
    usage = result.usage
    return (
        f"<sub>{escape_inline(result.model)} · {result.rounds} "
        f"{'round' if result.rounds == 1 else 'rounds'} · "
        f"{usage.total_tokens} tokens</sub>\n\n{head_marker(result.revisions.head_sha)}"
    )


# --- posting ---


def _status_failure(status: int, what: str) -> _Failure:
    if status in (401, 403):
        return _Failure(
            f"GitHub refused to let us {what} (status {status}); the token needs write "
            "access to pull requests."
        )
    if status == 404:
        return _Failure(f"GitHub did not find the pull request when we tried to {what}.")
    if status >= 500:
        return _Failure(f"GitHub answered with a server error (status {status}).")
    return _Failure(f"GitHub answered with an unexpected status ({status}).")


async def _post(
    github: GitHubClient,
    ref: PullRequestRef,
    payload: dict[str, Any],
    *,
    deadline: float,
    installation_id: int | None,
) -> tuple[int, _PostWire | None]:
    """(status, created review) after waiting out secondary rate limits within the deadline."""
    loop = asyncio.get_running_loop()
    url = ref.api_url(github.settings, "/reviews")
    for _ in range(MAX_POST_ATTEMPTS):
        response = await github.request(
            "POST", url, json_body=payload, installation_id=installation_id
        )
        if response.status in (200, 201):
            try:
                return response.status, _PostWire.model_validate_json(response.body)
            except ValidationError:
                return response.status, None
        if not is_rate_limited(response.status, response.headers):
            return response.status, None
        wait = rate_limit_wait(response.headers)
        wait = DEFAULT_RATE_LIMIT_WAIT_SECONDS if wait is None else max(wait, 1)
        if loop.time() + wait > deadline:
            raise _Failure("GitHub's rate limit lasts past the review's deadline.")
        logger.info("GitHub rate limit on publishing; waiting %d s", wait)
        await asyncio.sleep(wait)
    raise _Failure("GitHub kept answering with its rate limit.")


async def publish(
    result: ReviewResult,
    ref: PullRequestRef,
    github: GitHubClient,
    git_dir: Path,
    *,
    deadline: float,
    max_inline: int,
    installation_id: int | None = None,
) -> Publication:
    """Publish `result` on the pull request; never raises for a GitHub failure."""
    try:
        async with asyncio.timeout_at(deadline - DEADLINE_MARGIN_SECONDS):
            return await _publish(
                result,
                ref,
                github,
                git_dir,
                deadline=deadline,
                max_inline=max_inline,
                installation_id=installation_id,
            )
    except _Failure as failure:
        return _failed(failure.message)
    except GitHubUnavailable as exc:
        return _failed(exc.message)
    except TimeoutError:
        return _failed("Publishing did not finish before the review's deadline.")


def _failed(message: str) -> Publication:
    logger.info("publishing the review failed: %s", message)
    return Publication(status="failed", error=PublicationError(message=message))


async def _publish(
    result: ReviewResult,
    ref: PullRequestRef,
    github: GitHubClient,
    git_dir: Path,
    *,
    deadline: float,
    max_inline: int,
    installation_id: int | None,
) -> Publication:
    head = result.revisions.head_sha
    state = await prior_state(github, ref, installation_id)
    done = state.review_of(head)
    if done is not None:
        return Publication(status="already_published", review_id=done[0], url=done[1])
    findings = result.review.findings
    wanted = {f.path for f in findings}
    merge_base = result.revisions.merge_base_sha
    hunks = await asyncio.to_thread(diff_hunks, git_dir, merge_base, head, wanted)
    texts = await asyncio.to_thread(_line_texts, git_dir, head, findings)
    fingerprints = [fingerprint_of(f, texts) for f in findings]
    placement = place(findings, hunks, fingerprints, state.fingerprints, max_inline)
    status, created, placement = await _attempts(
        result, ref, github, placement, deadline=deadline, installation_id=installation_id
    )
    if created is None or status not in (200, 201):
        raise _status_failure(status, "publish the review")
    _, shown = render_body(result, placement)
    return Publication(
        status="published",
        review_id=created.id,
        url=created.html_url,
        inline_comments=len(placement.inline),
        body_findings=shown,
        duplicates_skipped=placement.skipped,
    )


async def _attempts(
    result: ReviewResult,
    ref: PullRequestRef,
    github: GitHubClient,
    placement: Placement,
    *,
    deadline: float,
    installation_id: int | None,
) -> tuple[int, _PostWire | None, Placement]:
    status, created = await _post(
        github, ref, _payload(result, placement), deadline=deadline, installation_id=installation_id
    )
    if status == 422 and placement.inline:
        # GitHub refused a comment's line (it never says which): everything in the body.
        logger.info("GitHub refused the inline comments; posting every finding in the body")
        placement = Placement(
            body=sorted(
                [*placement.inline, *placement.body],
                key=lambda p: (_RANK[p.finding.severity], p.finding.path, p.finding.line or 0),
            ),
            skipped=placement.skipped,
        )
        status, created = await _post(
            github,
            ref,
            _payload(result, placement),
            deadline=deadline,
            installation_id=installation_id,
        )
    return status, created, placement


def _payload(result: ReviewResult, placement: Placement) -> dict[str, Any]:
    body, _ = render_body(result, placement)
    return {
        "commit_id": result.revisions.head_sha,
        "event": "COMMENT",
        "body": body,
        "comments": [
            {
                "path": p.finding.path,
                "line": p.finding.line,
                "side": "RIGHT",
                "body": render_comment(p),
            }
            for p in placement.inline
        ],
    }


async def publish_result(
    result: ReviewResult,
    github: GitHubClient,
    git_dir: Path,
    *,
    deadline: float,
    installation_id: int | None = None,
) -> Publication | None:
    """Publish a finished review of a pull request; None when there is nothing to publish
    (a local review, or no final review from the model)."""
    info = result.pull_request
    if info is None or result.termination_reason != "final_review":
        return None
    ref = PullRequestRef(owner=info.owner, repo=info.repo, number=info.number, url=info.url)
    return await publish(
        result,
        ref,
        github,
        git_dir,
        deadline=deadline,
        max_inline=github.settings.pr_review_max_inline_comments,
        installation_id=installation_id,
    )


@dataclass(frozen=True)
class ReReview:
    """Our last reviewed head, an ancestor of this one, and the files changed since."""

    last_head: str
    changed: tuple[str, ...]


async def re_review(
    github: GitHubClient,
    info: PullRequestInfo,
    git_dir: Path,
    head_sha: str,
    installation_id: int | None = None,
) -> ReReview | None:
    """What the first user message of a re-review names (CONTRACT 10), or None.

    None when we never reviewed this pull request, when our last reviewed head is this one or
    not an ancestor of it (a force-push), when its commit is not in the cache, or when GitHub
    fails: the review goes on as a first review, and publishing decides again.
    """
    ref = PullRequestRef(owner=info.owner, repo=info.repo, number=info.number, url=info.url)
    try:
        state = await prior_state(github, ref, installation_id)
    except (_Failure, GitHubUnavailable):
        return None
    last = state.last_head
    if last is None or last == head_sha:
        return None
    return await asyncio.to_thread(_changed_since, git_dir, last, head_sha)


def _changed_since(git_dir: Path, last: str, head: str) -> ReReview | None:
    try:
        ancestor = run_git(
            git_dir, ["merge-base", "--is-ancestor", last, head], timeout=60, check=False
        )
        if ancestor.returncode != 0:
            return None
        names = run_git(
            git_dir,
            ["diff", "--name-only", "-z", "--no-renames", "--no-ext-diff", last, head],
            timeout=120,
        ).stdout
    except (GitError, OSError, subprocess.SubprocessError):
        return None
    paths = [p.decode("utf-8", "replace") for p in names.split(b"\0") if p]
    return ReReview(last, tuple(sorted(paths)))
