"""Publishing a validated review on its merge request (CONTRACT 10, 14, 17).

GitLab has no review object that carries a body and inline comments in one request, so a
publication is one discussion per inline finding, then one note:

1. In the service, its ledger (`github/ledger.py`, keyed `group/project!iid`) of this head
   answers first. Then our earlier notes are read (`gitlab/history.py`): a note of ours that
   carries this head's marker means nothing is posted (`already_published`); the fingerprints
   already in our notes and discussions are not posted again (`duplicates_skipped`). When the
   listing outruns its budget without this head's marker, the CLI publishes nothing.
2. Placement is GitHub's (`github/placement.py`): inline when the line is an added or context
   line of a hunk from the merge base to the head, at most `PR_REVIEW_MAX_INLINE_COMMENTS`,
   most severe first. A suggestion whose replacement GitLab could read as a quick action is
   not committable (gitlab/note_text.py); its finding stays inline when its own line anchors.
3. Each inline finding is `POST .../discussions` with a text `position`: the merge request's
   `diff_refs` (when they are still of our head), `new_path`/`old_path`, `new_line`, and
   `old_line` too for a context line, as GitLab requires. A position GitLab refuses (400), or
   any answer but a refusal of the token, moves that finding into the note.
4. Then the note (`POST .../notes`) with the body and the head's marker: posted last, so that a
   publication cut short leaves no head marker, and a second run posts the note (the findings
   already in discussions are skipped by their markers).

A GitLab rate limit (429) is waited out within the deadline. Failures end `failed` with a
fixed sentence (`github_publish_failed`, the code CONTRACT 10 gives every forge); the review
itself is returned whatever happens here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pr_review_api.errors import ReviewError, ServerBusy
from pr_review_api.git.hunks import FileHunks, diff_hunks
from pr_review_api.github.history import PublishFailure, status_failure
from pr_review_api.github.ledger import HeadKey, PublishLedger
from pr_review_api.github.placement import (
    Placed,
    Placement,
    fingerprint_of,
    line_texts,
    place,
    placed_order,
    suggestion_texts,
)
from pr_review_api.gitlab.client import GitLabClient, GitLabResponse
from pr_review_api.gitlab.history import GITLAB_PUBLISH, MAX_LIST_PAGES, note_url, prior_state
from pr_review_api.gitlab.note_text import committable, render_discussion, render_note
from pr_review_api.gitlab.urls import MergeRequestRef
from pr_review_api.http.api_client import rate_limit_pause
from pr_review_api.http.body import bounded_decimal
from pr_review_api.model import Publication, PublicationError, ReviewResult, Revisions

if TYPE_CHECKING:
    from pr_review_api.metrics import Metrics

logger = logging.getLogger(__name__)

MAX_POST_ATTEMPTS = 5
MAX_RATE_LIMIT_WAIT_SECONDS = 3600
DEADLINE_MARGIN_SECONDS = 0.5
REFUSED_POSITION = frozenset({400, 422})
TOKEN_REFUSED = frozenset({401, 403, 404})
_SHA = r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$"


class DiffRefs(BaseModel):
    """The three commits a GitLab position names."""

    model_config = ConfigDict(extra="ignore")
    base_sha: str = Field(pattern=_SHA)
    start_sha: str = Field(pattern=_SHA)
    head_sha: str = Field(pattern=_SHA)


class _MergeRequestWire(BaseModel):
    model_config = ConfigDict(extra="ignore")
    diff_refs: DiffRefs | None = None


class _CreatedWire(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: int


def merge_request_key(ref: MergeRequestRef, identity: str, head_sha: str) -> HeadKey:
    """The ledger's key of a merge request's head: `group/project!iid`, GitLab's own reference,
    which no GitHub pull request's `owner/repo#number` can equal."""
    return HeadKey(f"{ref.owner}/{ref.repo}!{ref.number}".lower(), identity.lower(), head_sha)


async def publish(  # noqa: PLR0913  (what one publication needs, as github/publish.py)
    result: ReviewResult,
    ref: MergeRequestRef,
    gitlab: GitLabClient,
    git_dir: Path,
    *,
    deadline: float,
    max_inline: int,
    ledger: PublishLedger | None = None,
    force: bool = False,
    dismissed: Collection[str] = frozenset(),
) -> Publication:
    """Publish `result` on the merge request; never raises for a GitLab failure.

    `dismissed`, `ledger` and `force` mean what they mean for GitHub (github/publish.py)."""
    try:
        async with asyncio.timeout_at(deadline - DEADLINE_MARGIN_SECONDS):
            return await _publish(
                result,
                ref,
                gitlab,
                git_dir,
                deadline=deadline,
                max_inline=max_inline,
                ledger=ledger,
                force=force,
                dismissed=dismissed,
            )
    except PublishFailure as failure:
        return _failed(failure.message)
    except ReviewError as exc:  # GitLabUnavailable, PullRequestNotFound: fixed sentences
        return _failed(exc.message)
    except TimeoutError:
        return _failed("Publishing did not finish before the review's deadline.")


def _failed(message: str) -> Publication:
    logger.info("publishing the review failed: %s", message)
    return Publication(status="failed", error=PublicationError(message=message))


async def _publish(  # noqa: PLR0913  (as publish)
    result: ReviewResult,
    ref: MergeRequestRef,
    gitlab: GitLabClient,
    git_dir: Path,
    *,
    deadline: float,
    max_inline: int,
    ledger: PublishLedger | None,
    force: bool,
    dismissed: Collection[str],
) -> Publication:
    head = result.revisions.head_sha
    key = merge_request_key(ref, await gitlab.username(), head)
    try:
        recorded = None if ledger is None else await ledger.find(key)
    except ServerBusy:
        # The review is paid for: publish on the markers alone, as the CLI does.
        logger.warning("the ledger of published reviews could not be read")
        recorded, ledger = None, None
    if recorded is not None and not force:
        return _already(recorded.review_id, recorded.url)
    state = await prior_state(gitlab, ref, head_sha=head)
    done = state.review_of(head)
    if done is not None and not force:
        return _already(*done)
    if not state.complete and ledger is None:
        raise PublishFailure(
            f"The merge request has more notes than the {MAX_LIST_PAGES} pages read; nothing "
            "was published, so that no head is reviewed twice."
        )
    posted = state.fingerprints | await _ledger_fingerprints(ledger, key)
    refs = await _diff_refs(gitlab, ref, result.revisions)
    hunks, placement, suppressed = await _placement(result, git_dir, posted, max_inline, dismissed)
    inline, refused = await _discussions(gitlab, ref, placement.inline, hunks, refs, deadline)
    placement = Placement(
        inline=inline,
        body=sorted([*refused, *placement.body], key=placed_order),
        skipped=placement.skipped,
    )
    body, shown = await asyncio.to_thread(render_note, result, placement)
    response = await _post(gitlab, ref.api_url(gitlab.settings, "/notes"), {"body": body}, deadline)
    note_id = _created_id(response, "post the review note")
    publication = Publication(
        status="published",
        review_id=note_id,
        url=note_url(ref, note_id),
        inline_comments=len(inline),
        body_findings=shown,
        duplicates_skipped=placement.skipped,
        suppressed=suppressed,
    )
    if ledger is not None:
        carried = [p.fingerprint for p in [*placement.inline, *placement.body[:shown]]]
        await ledger.record(key, publication, carried, result)
    return publication


def _already(review_id: int | None, url: str | None) -> Publication:
    return Publication(status="already_published", review_id=review_id, url=url)


async def _ledger_fingerprints(ledger: PublishLedger | None, key: HeadKey) -> set[str]:
    try:
        return set() if ledger is None else await ledger.fingerprints(key)
    except ServerBusy:
        logger.warning("the ledger of published reviews could not be read")
        return set()


async def _diff_refs(gitlab: GitLabClient, ref: MergeRequestRef, revisions: Revisions) -> DiffRefs:
    """The merge request's `diff_refs` when they still end at our head; else the commits we
    reviewed (GitLab places a position on any diff it can compute between them)."""
    document = await gitlab.get_json(ref.api_url(gitlab.settings))
    try:
        current = _MergeRequestWire.model_validate(document).diff_refs
    except ValidationError:
        current = None
    if current is not None and current.head_sha == revisions.head_sha:
        return current
    return DiffRefs(
        base_sha=revisions.merge_base_sha,
        start_sha=revisions.base_sha,
        head_sha=revisions.head_sha,
    )


async def _placement(
    result: ReviewResult,
    git_dir: Path,
    posted: set[str],
    max_inline: int,
    dismissed: Collection[str],
) -> tuple[dict[str, FileHunks], Placement, int]:
    """(hunks, placement, findings the repository dismissed) as GitHub places them."""
    head, findings = result.revisions.head_sha, result.review.findings
    wanted = {f.path for f in findings}
    merge_base = result.revisions.merge_base_sha
    hunks = await asyncio.to_thread(diff_hunks, git_dir, merge_base, head, wanted)
    texts = await asyncio.to_thread(line_texts, git_dir, head, findings)
    fingerprints = [fingerprint_of(f, texts) for f in findings]
    kept = [i for i, fingerprint in enumerate(fingerprints) if fingerprint not in dismissed]
    findings = [findings[i] for i in kept]
    fingerprints = [fingerprints[i] for i in kept]
    replaced = await asyncio.to_thread(suggestion_texts, git_dir, head, findings)
    placement = place(findings, hunks, fingerprints, posted, max_inline, texts=replaced)
    return hunks, _without_raw_commands(placement, hunks), len(result.review.findings) - len(kept)


def _without_raw_commands(placement: Placement, hunks: dict[str, FileHunks]) -> Placement:
    """A committable suggestion GitLab could read a quick action in becomes a diff: its
    finding stays inline on its own line when that line anchors, else goes in the note."""
    inline: list[Placed] = []
    body = list(placement.body)
    for placed in placement.inline:
        if not placed.committable or committable(placed):
            inline.append(placed)
            continue
        shown = dataclasses.replace(placed, committable=False)
        file = hunks.get(shown.finding.path)
        if shown.line is not None and file is not None and file.anchors(shown.line):
            inline.append(shown)
        else:
            body.append(shown)
    return Placement(inline=inline, body=sorted(body, key=placed_order), skipped=placement.skipped)


def _position(placed: Placed, file: FileHunks, refs: DiffRefs) -> dict[str, Any]:
    """A text position on the head's side; a context line names its base line too."""
    line = placed.line
    assert line is not None
    path = placed.finding.path
    position: dict[str, Any] = {
        "position_type": "text",
        "base_sha": refs.base_sha,
        "start_sha": refs.start_sha,
        "head_sha": refs.head_sha,
        "new_path": path,
        "old_path": file.old_path or path,
        "new_line": line,
    }
    if line in file.context_old:
        position["old_line"] = file.context_old[line]
    return position


async def _discussions(
    gitlab: GitLabClient,
    ref: MergeRequestRef,
    inline: list[Placed],
    hunks: dict[str, FileHunks],
    refs: DiffRefs,
    deadline: float,
) -> tuple[list[Placed], list[Placed]]:
    """(posted, moved into the note): one discussion per inline finding."""
    url = ref.api_url(gitlab.settings, "/discussions")
    posted: list[Placed] = []
    moved: list[Placed] = []
    for placed in inline:
        body = await asyncio.to_thread(render_discussion, placed)
        position = _position(placed, hunks[placed.finding.path], refs)
        response = await _post(gitlab, url, {"body": body, "position": position}, deadline)
        if 200 <= response.status < 300:
            posted.append(placed)
        elif response.status in TOKEN_REFUSED:
            raise status_failure(
                response.status, "start a discussion on the merge request", GITLAB_PUBLISH
            )
        else:
            if response.status not in REFUSED_POSITION:
                logger.info("GitLab answered %d to a discussion", response.status)
            # Refused (its position, most often): the finding goes in the note.
            moved.append(dataclasses.replace(placed, committable=False))
    return posted, moved


async def _post(
    gitlab: GitLabClient, url: str, payload: dict[str, Any], deadline: float
) -> GitLabResponse:
    """The answer to a POST, after waiting out GitLab's rate limit within the deadline."""
    for _ in range(MAX_POST_ATTEMPTS):
        response = await gitlab.request("POST", url, json=payload)
        if response.status != 429:
            return response
        header = bounded_decimal(
            response.headers.get("retry-after", ""), MAX_RATE_LIMIT_WAIT_SECONDS
        )
        wait = rate_limit_pause(header, deadline - DEADLINE_MARGIN_SECONDS)
        if wait is None:
            raise PublishFailure("GitLab's rate limit lasts past the review's deadline.")
        logger.info("GitLab rate limit on publishing; waiting %d s", wait)
        await asyncio.sleep(wait)
    raise PublishFailure("GitLab kept answering with its rate limit.")


def _created_id(response: GitLabResponse, what: str) -> int:
    if not 200 <= response.status < 300:
        raise status_failure(response.status, what, GITLAB_PUBLISH)
    try:
        return _CreatedWire.model_validate_json(response.body).id
    except ValidationError:
        raise PublishFailure("GitLab's answer to the note is not valid.") from None


async def publish_merge_request(  # noqa: PLR0913  (as publish)
    result: ReviewResult,
    gitlab: GitLabClient,
    git_dir: Path,
    *,
    deadline: float,
    ledger: PublishLedger | None = None,
    metrics: Metrics | None = None,
    force: bool = False,
    dismissed: Collection[str] = frozenset(),
) -> Publication | None:
    """Publish a finished review of a merge request; None when there is nothing to publish
    (no merge request, or no final review from the model). `metrics` counts each outcome."""
    info = result.pull_request
    if info is None or info.forge != "gitlab" or result.termination_reason != "final_review":
        return None
    ref = MergeRequestRef(owner=info.owner, repo=info.repo, number=info.number, url=info.url)
    publication = await publish(
        result,
        ref,
        gitlab,
        git_dir,
        deadline=deadline,
        max_inline=gitlab.settings.pr_review_max_inline_comments,
        ledger=ledger,
        force=force,
        dismissed=dismissed,
    )
    if metrics is not None:
        metrics.publication(publication.status)
    return publication
