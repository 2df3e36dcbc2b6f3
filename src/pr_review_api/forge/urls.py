"""Which forge a change URL names: a GitHub or Gitea pull request, or a GitLab merge request.

The URL's shape decides (a merge request's path has `/-/merge_requests/`, which no pull
request's can; a Gitea pull request's is `/pulls/<index>` under `GITEA_SERVER_URL`, and only
when that is set), then that forge's own parser checks the URL against its configured server.
A canonical URL alone tells its forge: GitHub's ends in `/pull/<n>`, Gitea's in `/pulls/<n>`.
"""

from __future__ import annotations

import re

from pr_review_api.gitea.urls import PullRequestRef as GiteaPullRequestRef
from pr_review_api.gitea.urls import is_pull_request_url as is_gitea_url
from pr_review_api.gitea.urls import parse_pull_request_url as parse_gitea_url
from pr_review_api.github.urls import (
    PullRequestRef,
    is_valid_owner,
    is_valid_repo,
    parse_pull_request_url,
)
from pr_review_api.gitlab.urls import MergeRequestRef, is_merge_request_url, parse_merge_request_url
from pr_review_api.model import Forge
from pr_review_api.settings import Settings

ChangeRef = PullRequestRef | MergeRequestRef | GiteaPullRequestRef

_GITEA_CANONICAL_TAIL = re.compile(r"/pulls/[0-9]+\Z", re.ASCII)


def route(url: str, settings: Settings) -> Forge:
    """The forge whose parser checks `url` (any URL, before it is checked): with
    `GITEA_SERVER_URL` unset, a `/pulls/` URL is GitHub's to refuse."""
    if is_merge_request_url(url):
        return "gitlab"
    return "gitea" if is_gitea_url(url, settings) else "github"


def parse_change_url(url: str, settings: Settings) -> ChangeRef:
    """The canonical reference of a pull- or merge-request URL, or InvalidPullRequestUrl."""
    forge = route(url, settings)
    if forge == "gitlab":
        return parse_merge_request_url(url, settings)
    if forge == "gitea":
        return parse_gitea_url(url, settings)
    return parse_pull_request_url(url, settings)


def forge_of(canonical_url: str) -> Forge:
    """The forge of a URL that passed `parse_change_url` (a job's stored URL)."""
    if is_merge_request_url(canonical_url):
        return "gitlab"
    return "gitea" if _GITEA_CANONICAL_TAIL.search(canonical_url) else "github"


def change_key(canonical_url: str, owner: str, repo: str, number: int) -> str:
    """A change's key (a job's `pr_key`: its lock and its one waiting job), lower-cased, as
    GitHub's and GitLab's names are case-insensitive. A merge request's key names its forge:
    `gitlab:group/sub/project!7` can never equal a pull request's `owner/repo#7`, even for the
    same path on one host; a Gitea pull request's, `gitea:owner/repo#7`, likewise."""
    forge = forge_of(canonical_url)
    if forge == "gitlab":
        return f"gitlab:{owner}/{repo}!{number}".lower()
    if forge == "gitea":
        return f"gitea:{owner}/{repo}#{number}".lower()
    return f"{owner}/{repo}#{number}".lower()


def is_repository_name(owner: str, repo: str) -> bool:
    """Whether `owner/repo` is a repository's name as the service's pages and job listings take
    it: GitHub's rules for both names (a GitLab project's nested namespace is not one yet)."""
    return is_valid_owner(owner) and is_valid_repo(repo)
