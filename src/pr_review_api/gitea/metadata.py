"""The pull request's metadata document (specification §19), validated before anything reaches git.

`GET /repos/{owner}/{repo}/pulls/{index}` (Gitea's `PullRequest` structure) names the commits a
review is pinned to: `base.sha` (the base branch's tip), `head.sha`, and `merge_base`, which
Gitea computes and keeps for the pull request; the diff the model sees runs from the merge base
to the head, as Gitea's "Files changed" view does. As on the other forges: full lower-case hex
SHAs (40 digits: the cache holds SHA-1 repositories; a SHA-256 repository's 64 are refused), a
base branch `git check-ref-format --branch` accepts, the index the one asked for, the title
and body cut to a bound. Validation errors quote the body, so they are never chained.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BaseModel, ConfigDict, StringConstraints, ValidationError

from pr_review_api.errors import GiteaUnavailable
from pr_review_api.fetch.metadata import (
    PullRequestMetadata,
    bounded_metadata,
    is_valid_branch_name,
)
from pr_review_api.gitea.client import GiteaClient
from pr_review_api.gitea.urls import PullRequestRef
from pr_review_api.http.api_client import lent_or_own
from pr_review_api.settings import Settings

MAX_METADATA_RESPONSE_BYTES = 1024 * 1024  # decoded; the body is the large part

INVALID_METADATA = "Gitea returned pull request data that is not valid."
NO_MERGE_BASE = "Gitea has not computed the pull request's merge base yet; retry shortly."

_SHA = re.compile(r"[0-9a-f]{40}", re.ASCII)
Sha = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{40}$")]


class _BranchWire(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    ref: str
    sha: Sha


class _UserWire(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    login: str = ""


class _LabelWire(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    name: str


class _PullWire(BaseModel):
    """The fields of Gitea's pull-request document that a review uses."""

    model_config = ConfigDict(extra="ignore", strict=True)

    number: int
    title: str
    body: str | None = None
    user: _UserWire | None = None
    labels: list[_LabelWire] | None = None
    draft: bool | None = None  # Gitea 1.22 and later; older servers mark drafts in the title
    base: _BranchWire
    head: _BranchWire
    merge_base: str | None = None


def parse_pull_request(data: bytes, ref: PullRequestRef) -> PullRequestMetadata:
    """The metadata of a 200 answer for `ref`, or GiteaUnavailable with a fixed sentence."""
    try:
        wire = _PullWire.model_validate_json(data)
    except ValidationError:
        raise GiteaUnavailable(INVALID_METADATA) from None  # the error quotes the body
    if wire.number != ref.number or not is_valid_branch_name(wire.base.ref):
        raise GiteaUnavailable(INVALID_METADATA)
    if not wire.merge_base:
        raise GiteaUnavailable(NO_MERGE_BASE)
    if _SHA.fullmatch(wire.merge_base) is None:
        raise GiteaUnavailable(INVALID_METADATA)
    return bounded_metadata(
        base_sha=wire.base.sha,
        head_sha=wire.head.sha,
        base_ref=wire.base.ref,
        title=wire.title,
        body=wire.body,
        author=wire.user.login if wire.user else "",
        labels=(label.name for label in wire.labels or []),
        draft=bool(wire.draft),
        diff_base_sha=wire.merge_base,
    )


async def fetch_pull_request(
    ref: PullRequestRef, settings: Settings, gitea: GiteaClient | None = None
) -> PullRequestMetadata:
    """The pull request's metadata through `gitea` (a short-lived client when None)."""
    async with lent_or_own(gitea, lambda: GiteaClient(settings)) as client:
        body = await client.get_body(ref.api_url(), limit=MAX_METADATA_RESPONSE_BYTES)
    return parse_pull_request(body, ref)
