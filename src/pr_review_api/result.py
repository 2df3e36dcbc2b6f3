"""The review document the HTTP API returns and `--format json` prints (CONTRACT section 5)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from pr_review_api.final_review import FinalReview
from pr_review_api.trace import TraceTurn, Usage


class PullRequestInfo(BaseModel):
    """The canonical identity of a GitHub pull request."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str
    owner: str
    repo: str
    number: int


class Revisions(BaseModel):
    """The commits a review is pinned to; the diff runs from merge base to head."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_sha: str
    head_sha: str
    merge_base_sha: str


class ReviewResult(BaseModel):
    """A successful review."""

    model_config = ConfigDict(extra="forbid")

    termination_reason: Literal["final_review"] = "final_review"
    pull_request: PullRequestInfo | None
    revisions: Revisions
    model: str
    review: FinalReview
    usage: Usage
    rounds: int
    tool_calls: int
    trace: list[TraceTurn] | None
