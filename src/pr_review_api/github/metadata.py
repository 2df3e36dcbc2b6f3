"""GitHub's pull-request document (specification §3), validated before anything reaches git.

The SHAs must be full lower-case hex, the base branch a name `git check-ref-format --branch`
accepts (and no option), the number the one asked for; the title and body are cut to
fetch/metadata.py's bounds.
Validation errors quote the body, so they are never chained.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, StringConstraints, ValidationError

from pr_review_api.errors import GitHubUnavailable
from pr_review_api.fetch.metadata import (
    PullRequestMetadata,
    bounded_metadata,
    is_valid_branch_name,
)
from pr_review_api.github.urls import PullRequestRef

Sha = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{40}$")]


class _BaseWire(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    ref: str
    sha: Sha


class _HeadWire(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    sha: Sha


class _UserWire(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    login: str = ""


class _LabelWire(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    name: str = ""


class _PullWire(BaseModel):
    """The fields of GitHub's pull-request document that a review uses."""

    model_config = ConfigDict(extra="ignore", strict=True)

    number: int
    title: str
    body: str | None = None
    base: _BaseWire
    head: _HeadWire
    user: _UserWire | None = None
    labels: list[_LabelWire] = []
    draft: bool | None = None


def parse_metadata(data: bytes, ref: PullRequestRef) -> PullRequestMetadata:
    invalid = GitHubUnavailable("GitHub returned pull request data that is not valid.")
    try:
        wire = _PullWire.model_validate_json(data)
    except ValidationError:
        raise invalid from None  # the error quotes the body: never chain it
    if wire.number != ref.number or not is_valid_branch_name(wire.base.ref):
        raise invalid
    return bounded_metadata(
        base_sha=wire.base.sha,
        head_sha=wire.head.sha,
        base_ref=wire.base.ref,
        title=wire.title,
        body=wire.body,
        author=wire.user.login if wire.user else "",
        labels=(label.name for label in wire.labels),
        draft=bool(wire.draft),
    )
