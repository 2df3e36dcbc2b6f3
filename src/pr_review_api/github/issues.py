"""An issue a pull request's description closes (CONTRACT 21), read from GitHub's REST API.

`GET /repos/{owner}/{repo}/issues/{number}` answers pull requests too (every pull request is an
issue there): such an answer carries a `pull_request` key, and is not an issue. The body is
untrusted and validated here; a refusal (404, 410, 403) or any failure of the host is an issue
that could not be read, never the review's error.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pr_review_api.fetch.issues import answered_body
from pr_review_api.github.client import GitHubClient

MAX_ISSUE_RESPONSE_BYTES = 1024 * 1024  # GitHub's body limit is 65,536 characters
IssueRead = tuple[str, str] | Literal["pull_request", "unreadable"]


class _IssueWire(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    number: Annotated[int, Field(ge=1)]
    title: str
    body: str | None = None
    pull_request: object = None


async def read_issue(github: GitHubClient, owner: str, repo: str, number: int) -> IssueRead:
    """(title, body) of the issue, "pull_request" when the number names one, else
    "unreadable" (missing, not visible to this identity, or the host failed)."""
    url = github.api_url(f"/repos/{owner}/{repo}/issues/{number}")
    body = await answered_body(github.request("GET", url, limit=MAX_ISSUE_RESPONSE_BYTES))
    try:
        issue = None if body is None else _IssueWire.model_validate_json(body)
    except ValidationError:
        issue = None
    if issue is None:
        return "unreadable"
    if issue.pull_request is not None:
        return "pull_request"
    return issue.title, issue.body or ""
