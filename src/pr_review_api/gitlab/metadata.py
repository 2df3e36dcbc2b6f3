"""The merge request's metadata document (specification §17), validated before anything reaches git.

`GET /projects/:id/merge_requests/:iid` names the two commits a review is pinned to in its
`diff_refs`: `start_sha` (the target branch's tip the diff was made against) is our base,
`head_sha` our head; `base_sha` (GitLab's merge base) is kept for the positions of inline
discussions. As on GitHub (github/metadata.py): full lower-case hex SHAs, a target branch
`git check-ref-format --branch` accepts (and no option), the iid the one asked for, the title
and description cut to a bound. A merge request whose `diff_refs` is null is still being
prepared by GitLab. Validation errors quote the body, so they are never chained.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from pr_review_api.errors import GitLabUnavailable
from pr_review_api.fetch.metadata import (
    MAX_METADATA_RESPONSE_BYTES,
    PullRequestMetadata,
    Sha,
    bounded_metadata,
    is_valid_branch_name,
    read_change,
)
from pr_review_api.gitlab.client import GitLabClient
from pr_review_api.gitlab.urls import MergeRequestRef
from pr_review_api.http.api_client import lent_or_own
from pr_review_api.settings import Settings

INVALID_METADATA = "GitLab returned merge request data that is not valid."
DIFF_NOT_READY = "GitLab is still preparing the merge request's diff; retry the review shortly."


class _DiffRefsWire(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    # GitLab fills these once the merge request's diff is made; until then they may be null.
    base_sha: Sha | None = None
    head_sha: Sha | None = None
    start_sha: Sha | None = None


class _AuthorWire(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    username: str = ""


class _MergeRequestWire(BaseModel):
    """The fields of GitLab's merge-request document that a review uses."""

    model_config = ConfigDict(extra="ignore", strict=True)

    iid: int
    title: str
    description: str | None = None
    target_branch: str
    author: _AuthorWire | None = None
    labels: list[str] = []
    draft: bool | None = None
    work_in_progress: bool | None = None  # the name before GitLab 13.2; still sent
    diff_refs: _DiffRefsWire | None = None


def parse_merge_request(data: bytes, ref: MergeRequestRef) -> PullRequestMetadata:
    """The metadata of a 200 answer for `ref`, or GitLabUnavailable with a fixed sentence."""
    wire = read_change(data, _MergeRequestWire, GitLabUnavailable(INVALID_METADATA))
    if wire.iid != ref.number or not is_valid_branch_name(wire.target_branch):
        raise GitLabUnavailable(INVALID_METADATA)
    refs = wire.diff_refs
    if refs is None or refs.start_sha is None or refs.head_sha is None or refs.base_sha is None:
        raise GitLabUnavailable(DIFF_NOT_READY)
    return bounded_metadata(
        base_sha=refs.start_sha,
        head_sha=refs.head_sha,
        base_ref=wire.target_branch,
        title=wire.title,
        body=wire.description,
        author=wire.author.username if wire.author else "",
        labels=wire.labels,
        draft=bool(wire.draft or wire.work_in_progress),
        diff_base_sha=refs.base_sha,
    )


async def fetch_merge_request(
    ref: MergeRequestRef, settings: Settings, gitlab: GitLabClient | None = None
) -> PullRequestMetadata:
    """The merge request's metadata through `gitlab` (a short-lived client when None)."""
    async with lent_or_own(gitlab, lambda: GitLabClient(settings)) as client:
        body = await client.get_body(ref.api_url(settings), limit=MAX_METADATA_RESPONSE_BYTES)
    return parse_merge_request(body, ref)
