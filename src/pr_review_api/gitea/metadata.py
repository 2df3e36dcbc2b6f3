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

from pydantic import BaseModel, ConfigDict

from pr_review_api.errors import GiteaUnavailable
from pr_review_api.fetch.metadata import (
    MAX_METADATA_RESPONSE_BYTES,
    BranchWire,
    PullRequestMetadata,
    PullWire,
    read_change,
)
from pr_review_api.gitea.client import GiteaClient
from pr_review_api.gitea.urls import PullRequestRef
from pr_review_api.http.api_client import lent_or_own
from pr_review_api.settings import Settings

INVALID_METADATA = "Gitea returned pull request data that is not valid."
NO_MERGE_BASE = "Gitea has not computed the pull request's merge base yet; retry shortly."

_SHA = re.compile(r"[0-9a-f]{40}", re.ASCII)


class _LabelWire(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    name: str


class _PullWire(PullWire):
    """The fields of Gitea's pull-request document that a review uses (`draft` is Gitea 1.22's
    and later's; older servers mark drafts in the title)."""

    head: BranchWire
    labels: list[_LabelWire] | None = None
    merge_base: str | None = None


def parse_pull_request(data: bytes, ref: PullRequestRef) -> PullRequestMetadata:
    """The metadata of a 200 answer for `ref`, or GiteaUnavailable with a fixed sentence."""
    wire = read_change(data, _PullWire, GiteaUnavailable(INVALID_METADATA))
    if not wire.is_of(ref.number):
        raise GiteaUnavailable(INVALID_METADATA)
    if not wire.merge_base:
        raise GiteaUnavailable(NO_MERGE_BASE)
    if _SHA.fullmatch(wire.merge_base) is None:
        raise GiteaUnavailable(INVALID_METADATA)
    return wire.metadata((label.name for label in wire.labels or []), wire.merge_base)


async def fetch_pull_request(
    ref: PullRequestRef, settings: Settings, gitea: GiteaClient | None = None
) -> PullRequestMetadata:
    """The pull request's metadata through `gitea` (a short-lived client when None)."""
    async with lent_or_own(gitea, lambda: GiteaClient(settings)) as client:
        body = await client.get_body(ref.api_url(), limit=MAX_METADATA_RESPONSE_BYTES)
    return parse_pull_request(body, ref)
