"""GitHub's pull-request document (specification §3), validated before anything reaches git.

The SHAs must be full lower-case hex, the base branch a name `git check-ref-format --branch`
accepts (and no option), the number the one asked for; the title and body are cut to
fetch/metadata.py's bounds.
Validation errors quote the body, so they are never chained.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from pr_review_api.errors import GitHubUnavailable
from pr_review_api.fetch.metadata import PullRequestMetadata, PullWire, read_change
from pr_review_api.github.urls import PullRequestRef


class _LabelWire(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    name: str = ""


class _PullWire(PullWire):
    """The fields of GitHub's pull-request document that a review uses."""

    labels: list[_LabelWire] = Field(default_factory=list)


def parse_metadata(data: bytes, ref: PullRequestRef) -> PullRequestMetadata:
    invalid = GitHubUnavailable("GitHub returned pull request data that is not valid.")
    wire = read_change(data, _PullWire, invalid)
    if not wire.is_of(ref.number):
        raise invalid
    return wire.metadata(label.name for label in wire.labels)
