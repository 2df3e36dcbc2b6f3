"""An issue a merge request's description closes (specification §21), read from GitLab's REST API:
`GET /projects/:id/issues/:iid` (the project's path URL-encoded as its id). A refusal (404,
403) or any failure of the host is an issue that could not be read, never the review's error.
"""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pr_review_api.fetch.issues import answered_body
from pr_review_api.gitlab.client import GitLabClient

IssueRead = tuple[str, str] | Literal["unreadable"]


class _IssueWire(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    iid: Annotated[int, Field(ge=1)]
    title: str
    description: str | None = None


async def read_issue(gitlab: GitLabClient, project_path: str, iid: int) -> IssueRead:
    """(title, description) of the project's issue, else "unreadable"."""
    url = gitlab.api_url(f"/projects/{quote(project_path, safe='')}/issues/{iid}")
    body = await answered_body(gitlab.request("GET", url))
    try:
        issue = None if body is None else _IssueWire.model_validate_json(body)
    except ValidationError:
        issue = None
    return "unreadable" if issue is None else (issue.title, issue.description or "")
