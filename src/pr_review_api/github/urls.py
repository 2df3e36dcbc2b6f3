"""Pull-request URLs (specification §3) and the API URLs built from them.

`parse_pull_request_url` accepts only `{GITHUB_SERVER_URL}/{owner}/{repo}/pull/{number}`, with
an optional trailing slash, `/files`, `/commits` or `/checks` suffix, query and fragment, and
rejects everything else before any network access (the URL's first checks: `web_urls.py`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pr_review_api.errors import InvalidPullRequestUrl
from pr_review_api.model import PullRequestInfo
from pr_review_api.settings import Settings
from pr_review_api.web_urls import path_under, url_path_on

MAX_PULL_NUMBER = 2**31 - 1
MAX_OWNER_CHARS = 39  # GitHub's limit for user and organisation names
MAX_REPO_CHARS = 100  # GitHub's limit for repository names

_PULL_PATH = re.compile(
    r"/(?P<owner>[^/]*)/(?P<repo>[^/]*)/pull/(?P<number>[^/]*)(?:/(?:files|commits|checks))?/?",
    re.ASCII,
)
_OWNER = re.compile(r"[A-Za-z0-9](?:-?[A-Za-z0-9])*", re.ASCII)
_REPO = re.compile(r"[A-Za-z0-9._-]+", re.ASCII)
_NUMBER = re.compile(r"[1-9][0-9]{0,9}", re.ASCII)


@dataclass(frozen=True)
class PullRequestRef:
    """A pull request named by a URL that passed `parse_pull_request_url`."""

    owner: str
    repo: str
    number: int
    url: str  # canonical: {GITHUB_SERVER_URL}/{owner}/{repo}/pull/{number}

    @classmethod
    def of(cls, info: PullRequestInfo) -> PullRequestRef:
        """The reference of a change the review result reports."""
        return cls(owner=info.owner, repo=info.repo, number=info.number, url=info.url)

    @property
    def info(self) -> PullRequestInfo:
        """The identity the review result reports."""
        return PullRequestInfo(url=self.url, owner=self.owner, repo=self.repo, number=self.number)

    def api_url(self, settings: Settings, tail: str = "") -> str:
        """The REST endpoint of this pull request, or of `tail` under it (`/reviews`)."""
        base = f"{settings.github_api_url}/repos/{self.owner}/{self.repo}/pulls/{self.number}"
        return base + tail

    def issue_api_url(self, settings: Settings, tail: str = "") -> str:
        """The pull request's issue endpoint (its conversation comments live there)."""
        base = f"{settings.github_api_url}/repos/{self.owner}/{self.repo}/issues/{self.number}"
        return base + tail

    def git_url(self, settings: Settings) -> str:
        """The smart-HTTP URL of the repository the pull request belongs to."""
        return f"{settings.github_server_url}/{self.owner}/{self.repo}.git"


def is_valid_owner(name: str) -> bool:
    """GitHub's rule for user and organisation names: alphanumerics and single inner hyphens."""
    return len(name) <= MAX_OWNER_CHARS and _OWNER.fullmatch(name) is not None


def is_valid_repo(name: str) -> bool:
    """GitHub's rule for repository names; `.`, `..` and `.git` endings are refused, not cut."""
    return (
        len(name) <= MAX_REPO_CHARS
        and _REPO.fullmatch(name) is not None
        and name not in (".", "..")
        and not name.lower().endswith(".git")
    )


def _pull_path(path: str, settings: Settings) -> tuple[str, str, str]:
    """Owner, repository and number text of `{prefix}/OWNER/REPO/pull/NUMBER[/suffix][/]`."""
    tail = path_under(path, settings.github_server_url, "pull request")
    pull = _PULL_PATH.fullmatch(tail) if tail is not None else None
    if pull is None:
        shape = f"{settings.github_server_url}/OWNER/REPO/pull/NUMBER"
        raise InvalidPullRequestUrl(f"The pull request URL must look like {shape}.")
    return pull["owner"], pull["repo"], pull["number"]


def parse_pull_request_url(url: str, settings: Settings) -> PullRequestRef:
    """Check a pull-request URL and return its canonical form, or raise InvalidPullRequestUrl."""
    path = url_path_on(url, settings.github_server_url, "pull request")
    owner, repo, number_text = _pull_path(path, settings)
    if not is_valid_owner(owner):
        raise InvalidPullRequestUrl("The repository owner in the URL is not a valid GitHub name.")
    if not is_valid_repo(repo):
        raise InvalidPullRequestUrl("The repository name in the URL is not a valid GitHub name.")
    if _NUMBER.fullmatch(number_text) is None or int(number_text) > MAX_PULL_NUMBER:
        raise InvalidPullRequestUrl("The pull request number must be a positive decimal number.")
    number = int(number_text)
    canonical = f"{settings.github_server_url}/{owner}/{repo}/pull/{number}"
    return PullRequestRef(owner=owner, repo=repo, number=number, url=canonical)
