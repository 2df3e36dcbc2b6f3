"""Gitea and Forgejo pull-request URLs (specification §19) and the API URLs built from them.

`parse_pull_request_url` accepts only `{GITEA_SERVER_URL}/<owner>/<repo>/pulls/<index>` (the
server may have a path prefix and any port), with an optional trailing slash, `/files`,
`/commits` or `/checks` tab, query and fragment dropped (section 3), and rejects everything
else before any network access (the first checks: `web_urls.py`). With `GITEA_SERVER_URL`
unset, no URL is a Gitea one.

Names follow Gitea's rules (docs/gitea.md cites the files):
- a repository's name is ASCII letters, digits, `-`, `_` and `.` (`validRepoNamePattern`),
  never two dots in a row, never `.`, `..` or `-`, never ending in `.git`, `.wiki`, `.rss` or
  `.atom` (`reservedRepoPatterns`, compared in lower case), at most 100 characters;
- an owner's (a user's or an organisation's) name is the same characters, at most 40: Gitea's
  current rule (`IsValidUsername`) is stricter, but names made under its older rule
  (`[^\\w-.]` refused, nothing else) still exist and are still served, so we accept those too
  while refusing `.` and `..` and any `..`, which no rule allows and a path could misread.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pr_review_api.errors import InvalidPullRequestUrl
from pr_review_api.model import PullRequestInfo
from pr_review_api.settings import Settings
from pr_review_api.web_urls import path_under, url_path_on

MAX_INDEX = 2**63 - 1  # Gitea's issue index is an int64
MAX_OWNER_CHARS = 40  # the forms' MaxSize(40) for user and organisation names
MAX_REPO_CHARS = 100  # the forms' MaxSize(100) for repository names
RESERVED_REPO_NAMES = frozenset({".", "..", "-"})
RESERVED_REPO_SUFFIXES = (".git", ".wiki", ".rss", ".atom")

_PULL_PATH = re.compile(
    r"/(?P<owner>[^/]*)/(?P<repo>[^/]*)/pulls/(?P<index>[^/]*)(?:/(?:files|commits|checks))?/?",
    re.ASCII,
)
_NAME = re.compile(r"[A-Za-z0-9_.-]+", re.ASCII)
_INDEX = re.compile(r"[1-9][0-9]{0,18}", re.ASCII)
_WHAT = "pull request"


@dataclass(frozen=True)
class PullRequestRef:
    """A Gitea pull request named by a URL that passed `parse_pull_request_url`.

    `server_url` and `api_base` are the settings' at parse time, so every URL built from the
    reference is on the two origins the token may reach."""

    owner: str
    repo: str
    number: int  # Gitea's `index`
    url: str  # canonical: {GITEA_SERVER_URL}/{owner}/{repo}/pulls/{number}
    server_url: str
    api_base: str

    @property
    def repo_path(self) -> str:
        return f"{self.owner}/{self.repo}"

    @property
    def dismissals_key(self) -> str:
        """The repository's key in the dismissals table: `gitea:owner/repo`, lower case (Gitea
        looks names up by their lower-case form), never equal to another forge's key."""
        return f"gitea:{self.repo_path}".lower()

    @property
    def info(self) -> PullRequestInfo:
        """The identity the review result reports."""
        return PullRequestInfo(
            url=self.url, owner=self.owner, repo=self.repo, number=self.number, forge="gitea"
        )

    def repo_api_url(self, tail: str = "") -> str:
        """The REST endpoint of the repository, or of `tail` under it (`/statuses/<sha>`)."""
        return f"{self.api_base}/repos/{self.owner}/{self.repo}{tail}"

    def api_url(self, tail: str = "") -> str:
        """The REST endpoint of this pull request, or of `tail` under it (`/reviews`)."""
        return self.repo_api_url(f"/pulls/{self.number}{tail}")

    def issue_api_url(self, tail: str = "") -> str:
        """The pull request's issue endpoint (its comments and reactions live there)."""
        return self.repo_api_url(f"/issues/{self.number}{tail}")

    @property
    def git_url(self) -> str:
        """The smart-HTTP URL of the pull request's (base) repository."""
        return f"{self.server_url}/{self.repo_path}.git"

    @property
    def head_ref(self) -> str:
        """The ref Gitea keeps for the pull request's head, in the base repository."""
        return f"refs/pull/{self.number}/head"


def is_valid_repo_name(name: str) -> bool:
    """Gitea's rule for a repository's name (see the module docstring)."""
    lowered = name.lower()
    return (
        len(name) <= MAX_REPO_CHARS
        and _NAME.fullmatch(name) is not None
        and ".." not in name
        and name not in RESERVED_REPO_NAMES
        and not lowered.endswith(RESERVED_REPO_SUFFIXES)
    )


def is_valid_owner(name: str) -> bool:
    """Gitea's rule for a user's or an organisation's name, old names included."""
    return (
        len(name) <= MAX_OWNER_CHARS
        and _NAME.fullmatch(name) is not None
        and ".." not in name
        and name != "."
    )


def is_pull_request_url(url: object, settings: Settings) -> bool:
    """Whether `url` has a Gitea pull request's shape under the configured server: with
    `GITEA_SERVER_URL` unset, nothing does. The shape alone is not a valid URL (parse it)."""
    server = settings.gitea_server_url
    if server is None or not isinstance(url, str):
        return False
    path = url.split("?", 1)[0].split("#", 1)[0]
    return path.lower().startswith(server.lower() + "/") and "/pulls/" in path[len(server) :]


def parse_pull_request_url(url: str, settings: Settings) -> PullRequestRef:
    """Check a Gitea pull-request URL and return its canonical form, or raise
    InvalidPullRequestUrl (also when no Gitea server is configured)."""
    server, api_base = settings.gitea_server_url, settings.gitea_api_base
    if server is None or api_base is None:
        raise InvalidPullRequestUrl("No Gitea server is configured; set GITEA_SERVER_URL.")
    path = url_path_on(url, server, _WHAT)
    tail = path_under(path, server, _WHAT)
    match = _PULL_PATH.fullmatch(tail) if tail is not None else None
    if match is None:
        shape = f"{server}/OWNER/REPO/pulls/INDEX"
        raise InvalidPullRequestUrl(f"The pull request URL must look like {shape}.")
    owner, repo = match["owner"], match["repo"]
    if not is_valid_owner(owner) or not is_valid_repo_name(repo):
        raise InvalidPullRequestUrl("The owner or repository in the URL is not a valid Gitea name.")
    if _INDEX.fullmatch(match["index"]) is None or int(match["index"]) > MAX_INDEX:
        raise InvalidPullRequestUrl("The pull request number must be a positive decimal number.")
    index = int(match["index"])
    canonical = f"{server}/{owner}/{repo}/pulls/{index}"
    return PullRequestRef(
        owner=owner, repo=repo, number=index, url=canonical, server_url=server, api_base=api_base
    )


def ref_of(info: PullRequestInfo, settings: Settings) -> PullRequestRef:
    """The reference of a reviewed pull request (its canonical URL parsed again, so every API
    URL built from it is on the configured origins)."""
    return parse_pull_request_url(info.url, settings)
