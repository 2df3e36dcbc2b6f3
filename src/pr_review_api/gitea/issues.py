"""An issue a Gitea pull request's description closes (specification §21), read from Gitea's REST
API: `GET /repos/{owner}/{repo}/issues/{index}` (`issueGetIssue`). Every pull request is an issue
there too: such an answer carries a non-null `pull_request`, and is not an issue. A refusal or
any failure of the host is an issue that could not be read, never the review's error.
"""

from __future__ import annotations

from pr_review_api.fetch.issues import (
    MAX_ISSUE_RESPONSE_BYTES,
    IssueRead,
    answered_body,
    issue_of,
)
from pr_review_api.gitea.client import GiteaClient
from pr_review_api.gitea.urls import is_valid_owner, is_valid_repo_name


async def read_issue(gitea: GiteaClient, project: str, number: int) -> IssueRead:
    """(title, body) of issue `number` of `project` (`owner/repo`), "pull_request" when the
    number names one, else "unreadable"."""
    owner, _, repo = project.partition("/")
    if not is_valid_owner(owner) or not is_valid_repo_name(repo):
        return "unreadable"  # never a path Gitea's names cannot spell
    url = gitea.api_url(f"/repos/{owner}/{repo}/issues/{number}")
    return issue_of(await answered_body(gitea.request("GET", url, limit=MAX_ISSUE_RESPONSE_BYTES)))
