"""Merge-request URLs (specification §17) and the API URLs built from them.

`parse_merge_request_url` accepts only
`{GITLAB_SERVER_URL}/<group>[/<subgroup>...]/<project>/-/merge_requests/<iid>`, with any trailing
tab path (`/diffs`, `/commits`, `/pipelines`), a trailing slash, a query and a fragment dropped,
and rejects everything else before any network access (the first checks: `web_urls.py`).
Namespaces follow GitLab's path rules: letters, digits, `_`, `-` and `.`, not starting with
`-`, not ending in `.git` or `.atom`, at most 20 subgroups deep.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote

from pr_review_api.errors import InvalidPullRequestUrl
from pr_review_api.model import PullRequestInfo
from pr_review_api.settings import Settings
from pr_review_api.web_urls import path_under, url_path_on

MAX_IID = 2**31 - 1
MAX_SEGMENT_CHARS = 255  # GitLab's limit for a group's or project's path
MAX_NAMESPACE_DEPTH = 21  # a top-level group and GitLab's 20 levels of subgroups

# "/-/" separates the project's path from its pages; a namespace segment can never be "-".
_MERGE_REQUEST_PATH = re.compile(
    r"/(?P<project_path>.+?)/-/merge_requests/(?P<iid>[^/]*)(?:/[A-Za-z0-9_.-]+)*/?", re.ASCII
)
_SEGMENT = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.-]*", re.ASCII)
_IID = re.compile(r"[1-9][0-9]{0,9}", re.ASCII)
_WHAT = "merge request"


@dataclass(frozen=True)
class MergeRequestRef:
    """A merge request named by a URL that passed `parse_merge_request_url`.

    The field names are the pull request's (`github.urls.PullRequestRef`): `owner` is the full
    namespace path (`group/subgroup`), `repo` the project's path, `number` the iid.
    """

    owner: str
    repo: str
    number: int
    url: str  # canonical: {GITLAB_SERVER_URL}/{owner}/{repo}/-/merge_requests/{number}

    @property
    def project_path(self) -> str:
        return f"{self.owner}/{self.repo}"

    @property
    def dismissals_key(self) -> str:
        """The project's key in the dismissals table (specification §15): `gitlab:group/project`,
        lower case (GitLab's paths are case-insensitive), never equal to a GitHub repository's
        `owner/repo`, which has no colon."""
        return f"gitlab:{self.project_path}".lower()

    @classmethod
    def of(cls, info: PullRequestInfo) -> MergeRequestRef:
        """The reference of a change the review result reports."""
        return cls(owner=info.owner, repo=info.repo, number=info.number, url=info.url)

    @property
    def info(self) -> PullRequestInfo:
        """The identity the review result reports."""
        return PullRequestInfo(
            url=self.url, owner=self.owner, repo=self.repo, number=self.number, forge="gitlab"
        )

    def project_api_url(self, settings: Settings, tail: str = "") -> str:
        """The REST endpoint of the project (its path URL-encoded, as GitLab requires)."""
        return f"{settings.gitlab_api_base}/projects/{quote(self.project_path, safe='')}{tail}"

    def api_url(self, settings: Settings, tail: str = "") -> str:
        """The REST endpoint of this merge request, or of `tail` under it (`/notes`)."""
        return self.project_api_url(settings, f"/merge_requests/{self.number}{tail}")

    def git_url(self, settings: Settings) -> str:
        """The smart-HTTP URL of the merge request's (target) project."""
        return f"{settings.gitlab_server_url}/{self.project_path}.git"


def is_merge_request_url(url: object) -> bool:
    """Whether `url` has a merge request's shape (`/-/merge_requests/`): the forge is GitLab.

    No GitHub pull-request URL has a `-` path segment, so the shape alone tells the forges
    apart, even when both are served from one host."""
    return isinstance(url, str) and "/-/merge_requests/" in url.split("?", 1)[0].split("#", 1)[0]


def is_valid_segment(name: str) -> bool:
    """GitLab's rule for one segment of a group's or project's path."""
    lowered = name.lower()
    return (
        len(name) <= MAX_SEGMENT_CHARS
        and _SEGMENT.fullmatch(name) is not None
        and name not in (".", "..")
        and not lowered.endswith((".git", ".atom"))
    )


def parse_merge_request_url(url: str, settings: Settings) -> MergeRequestRef:
    """Check a merge-request URL and return its canonical form, or raise InvalidPullRequestUrl."""
    path = url_path_on(url, settings.gitlab_server_url, _WHAT)
    tail = path_under(path, settings.gitlab_server_url, _WHAT)
    match = _MERGE_REQUEST_PATH.fullmatch(tail) if tail is not None else None
    if match is None:
        shape = f"{settings.gitlab_server_url}/GROUP/PROJECT/-/merge_requests/IID"
        raise InvalidPullRequestUrl(f"The merge request URL must look like {shape}.")
    segments = match["project_path"].split("/")
    if len(segments) < 2 or len(segments) > MAX_NAMESPACE_DEPTH + 1:
        raise InvalidPullRequestUrl(
            "The merge request URL must name a group (and subgroups) and a project."
        )
    if not all(is_valid_segment(segment) for segment in segments):
        raise InvalidPullRequestUrl(
            "A group or project path in the URL is not a valid GitLab path."
        )
    if _IID.fullmatch(match["iid"]) is None or int(match["iid"]) > MAX_IID:
        raise InvalidPullRequestUrl("The merge request number must be a positive decimal number.")
    owner, repo, iid = "/".join(segments[:-1]), segments[-1], int(match["iid"])
    canonical = f"{settings.gitlab_server_url}/{owner}/{repo}/-/merge_requests/{iid}"
    return MergeRequestRef(owner=owner, repo=repo, number=iid, url=canonical)
