"""An issue a pull request's description closes (specification §21), read from GitHub's REST API.

`GET /repos/{owner}/{repo}/issues/{number}` answers pull requests too (every pull request is an
issue there): such an answer carries a `pull_request` key, and is not an issue. The body is
untrusted and validated here; a refusal (404, 410, 403) or any failure of the host is an issue
that could not be read, never the review's error.
"""

from __future__ import annotations

from pr_review_api.fetch.issues import (
    MAX_ISSUE_RESPONSE_BYTES,
    IssueRead,
    answered_body,
    issue_of,
)
from pr_review_api.github.client import GitHubClient


async def read_issue(github: GitHubClient, owner: str, repo: str, number: int) -> IssueRead:
    """(title, body) of the issue, "pull_request" when the number names one, else
    "unreadable" (missing, not visible to this identity, or the host failed)."""
    url = github.api_url(f"/repos/{owner}/{repo}/issues/{number}")
    return issue_of(await answered_body(github.request("GET", url, limit=MAX_ISSUE_RESPONSE_BYTES)))
