"""Publishing a validated review on its merge request (specification §§10, 14, 17): GitLab's steps
of the one publication driver (`publishing/driver.py`).

GitLab has no review object that carries a body and inline comments in one request, so a
publication is one discussion per inline finding, then one note:

1. In the service, its ledger (`ledger.py`, keyed `group/project!iid`) of this head
   answers first. Then our earlier notes are read (`gitlab/history.py`): a note of ours that
   carries this head's marker means nothing is posted (`already_published`); the fingerprints
   already in our notes and discussions are not posted again (`duplicates_skipped`). When the
   listing outruns its budget without this head's marker, the CLI publishes nothing.
2. Placement is every forge's (`publishing/placement.py`): inline when the line is an added or
   context line of a hunk from the merge base to the head, at most `PR_REVIEW_MAX_INLINE_COMMENTS`,
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
fixed sentence (`gitlab_publish_failed`: GitLab's own code, as GitHub's is
`github_publish_failed`); the review itself is returned whatever happens here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pr_review_api.errors import ReviewError
from pr_review_api.git.hunks import FileHunks
from pr_review_api.gitlab.client import GitLabClient, GitLabResponse
from pr_review_api.gitlab.history import GITLAB_PUBLISH, MAX_LIST_PAGES, note_url, prior_state
from pr_review_api.gitlab.note_text import committable, render_discussion, render_note
from pr_review_api.gitlab.urls import MergeRequestRef
from pr_review_api.http.api_client import rate_limit_pause
from pr_review_api.http.body import bounded_decimal
from pr_review_api.ledger import HeadKey
from pr_review_api.model import Publication, PullRequestInfo, Revisions
from pr_review_api.publishing.driver import (
    DEADLINE_MARGIN_SECONDS,
    ChangePublisher,
    ForgeSteps,
    PostRequest,
    published,
)
from pr_review_api.publishing.failures import PublishFailure, status_failure
from pr_review_api.publishing.markers import PriorState
from pr_review_api.publishing.placement import (
    Placed,
    Placement,
    carried,
    moved_to_body,
    placed_order,
)
from pr_review_api.settings import Settings

if TYPE_CHECKING:
    pass

logger = logging.getLogger(__name__)

MAX_POST_ATTEMPTS = 5
MAX_RATE_LIMIT_WAIT_SECONDS = 3600
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


class _GitLabSteps(ForgeSteps[MergeRequestRef, GitLabClient]):
    """A merge request's publication: our notes listed, then a discussion per inline finding
    and the note last."""

    errors = (ReviewError,)  # GitLabUnavailable, PullRequestNotFound: fixed sentences
    failed_code = "gitlab_publish_failed"
    listing = ("merge request", "notes", MAX_LIST_PAGES)

    async def key(self, head_sha: str) -> HeadKey:
        return merge_request_key(self.ref, await self.client.username(), head_sha)

    async def prior_state(self, head_sha: str, wait_until: float) -> PriorState:
        # A listing's rate limit fails it (gitlab/client.py); only posts wait one out.
        return await prior_state(self.client, self.ref, head_sha=head_sha)

    async def post(self, request: PostRequest) -> tuple[Publication, list[str]]:
        ref, gitlab, result, deadline = self.ref, self.client, request.result, request.deadline
        refs = await _diff_refs(gitlab, ref, result.revisions)
        hunks = request.findings.hunks
        placement = _without_raw_commands(request.placed(self.max_inline), hunks)
        inline, refused = await _discussions(gitlab, ref, placement.inline, hunks, refs, deadline)
        placement = moved_to_body(placement, inline, refused)
        body, shown = await asyncio.to_thread(render_note, result, placement)
        url = ref.api_url(gitlab.settings, "/notes")
        response = await _post(gitlab, url, {"body": body}, deadline)
        note_id = _created_id(response, "post the review note")
        publication = published(note_id, note_url(ref, note_id), placement, shown)
        return publication, carried(placement, shown)


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


def _ref_of(info: PullRequestInfo, settings: Settings) -> MergeRequestRef:
    del settings  # a merge request's reference is the review's own
    return MergeRequestRef(owner=info.owner, repo=info.repo, number=info.number, url=info.url)


# Publishing on GitLab: `publish` on one change, `publish_merge_request` a finished review on its
# change (publishing/driver.py's `ChangePublisher`).
PUBLISHER: ChangePublisher[GitLabClient, MergeRequestRef] = ChangePublisher(
    "gitlab", _GitLabSteps, _ref_of
)
publish = PUBLISHER.one
publish_merge_request = PUBLISHER.finished
