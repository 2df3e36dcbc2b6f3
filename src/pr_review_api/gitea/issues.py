"""An issue a Gitea pull request's description closes (CONTRACT 21), read from Gitea's REST API:
`GET /repos/{owner}/{repo}/issues/{index}` (`issueGetIssue`). Every pull request is an issue
there too: such an answer carries a non-null `pull_request`, and is not an issue. A refusal or
any failure of the host is an issue that could not be read, never the review's error.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pr_review_api.fetch.issues import answered_body
from pr_review_api.gitea.client import GiteaClient
from pr_review_api.gitea.urls import is_valid_owner, is_valid_repo_name

MAX_ISSUE_RESPONSE_BYTES = 1024 * 1024
IssueRead = tuple[str, str] | Literal["pull_request", "unreadable"]


class _IssueWire(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    number: Annotated[int, Field(ge=1)]
    title: str
    body: str | None = None
    pull_request: object = None


async def read_issue(gitea: GiteaClient, project: str, number: int) -> IssueRead:
    """(title, body) of issue `number` of `project` (`owner/repo`), "pull_request" when the
    number names one, else "unreadable"."""
    owner, _, repo = project.partition("/")
    if not is_valid_owner(owner) or not is_valid_repo_name(repo):
        return "unreadable"  # never a path Gitea's names cannot spell
    url = gitea.api_url(f"/repos/{owner}/{repo}/issues/{number}")
    body = await answered_body(gitea.request("GET", url, limit=MAX_ISSUE_RESPONSE_BYTES))
    try:
        issue = None if body is None else _IssueWire.model_validate_json(body)
    except ValidationError:
        issue = None
    if issue is None:
        return "unreadable"
    if issue.pull_request is not None:
        return "pull_request"
    return issue.title, issue.body or ""
