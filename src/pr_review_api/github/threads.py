"""Our review threads on a pull request, and the findings they stand for (specification §§10, 15).

GitHub's GraphQL `reviewThreads` says which threads are resolved and which comments each holds
(the REST API says neither). A finding stands for the same thing as one of our threads when its
path and title are those of the thread's first comment (ours, with a finding's marker) and its
line is within `NEAR_LINES` of that comment's (publishing/threads.py's `same_finding`): the
finding reported again after its line's text changed, which changed its fingerprint. Such a
finding is not posted again while the thread is open (github/publish.py), and its thread is not
resolved as fixed (github/resolve.py).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pr_review_api.errors import GitHubUnavailable
from pr_review_api.github.client import GitHubClient
from pr_review_api.github.comments import Repository
from pr_review_api.model import Finding
from pr_review_api.output.inert_markdown import escape_inline
from pr_review_api.publishing.markers import Post
from pr_review_api.publishing.threads import same_finding

logger = logging.getLogger(__name__)

THREADS_QUERY = """
query($owner: String!, $repo: String!, $number: Int!) {
  repository(owner: $owner, name: $repo) {
    pullRequest(number: $number) {
      reviewThreads(first: 100) {
        nodes { id isResolved comments(first: 100) { nodes { databaseId } } }
      }
    }
  }
}
"""


@dataclass(frozen=True)
class Thread:
    node_id: str
    resolved: bool
    comment_ids: tuple[int, ...]


def graphql_url(github: GitHubClient) -> str:
    """`{api}/graphql` on github.com; `/api/graphql` beside GitHub Enterprise's `/api/v3`."""
    base = github.settings.github_api_url.rstrip("/")
    if base.endswith("/api/v3"):
        return base.removesuffix("/v3") + "/graphql"
    return base + "/graphql"


async def open_thread_matches(
    github: GitHubClient,
    repository: Repository,
    number: int,
    comments: Sequence[Post],
    findings: Sequence[Finding],
) -> list[int]:
    """The indices of `findings` that stand for one of our threads still open. `comments` are
    our top-level finding comments (github/history.py). Threads are read (one GraphQL request)
    only when a finding matches one of them; when GitHub does not answer, none matches: the
    finding is posted again rather than lost."""
    candidates = {
        index: {
            c.review_id
            for c in comments
            if same_finding(f, c.path, c.line, c.body, shown_as=escape_inline)
        }
        for index, f in enumerate(findings)
    }
    candidates = {index: ids for index, ids in candidates.items() if ids}
    if not candidates:
        return []
    try:
        threads = await review_threads(github, repository, number)
    except GitHubUnavailable:
        logger.info("the review threads could not be read; matching findings are posted")
        return []
    open_firsts = {t.comment_ids[0] for t in threads if not t.resolved and t.comment_ids}
    return sorted(index for index, ids in candidates.items() if ids & open_firsts)


async def review_threads(github: GitHubClient, repository: Repository, number: int) -> list[Thread]:
    """The pull request's review threads (the first 100), each with its comments' ids."""
    variables = {"owner": repository.owner, "repo": repository.repo, "number": number}
    data = await graphql(github, THREADS_QUERY, variables)
    try:
        nodes = data["repository"]["pullRequest"]["reviewThreads"]["nodes"]
        return [
            Thread(
                node_id=str(node["id"]),
                resolved=bool(node["isResolved"]),
                comment_ids=tuple(int(c["databaseId"]) for c in node["comments"]["nodes"]),
            )
            for node in nodes
        ]
    except (KeyError, TypeError, ValueError):
        raise GitHubUnavailable("GitHub's review threads could not be read.") from None


async def graphql(github: GitHubClient, query: str, variables: dict[str, Any]) -> dict[str, Any]:
    """One GraphQL request; its `data`, or `GitHubUnavailable`."""
    response = await github.request(
        "POST",
        graphql_url(github),
        json_body={"query": query, "variables": variables},
    )
    if response.status != 200:
        raise GitHubUnavailable("GitHub's GraphQL API refused the request.")
    try:
        document = json.loads(response.body)
    except ValueError:
        raise GitHubUnavailable("GitHub's GraphQL answer was not JSON.") from None
    if not isinstance(document, dict) or document.get("errors") or "data" not in document:
        raise GitHubUnavailable("GitHub's GraphQL API answered with errors.")
    data = document["data"]
    if not isinstance(data, dict):
        raise GitHubUnavailable("GitHub's GraphQL answer had no data.")
    return data
