"""Closing references (specification §21): the issues a change's description says it closes, in
its forge's own syntax. GitHub's `Fixes #12`, `Closes owner/repo#3`, `Resolves <issue URL>`;
GitLab's `Closes #4`, `group/project#4` and issue URLs, with its lists (`Closes #4, #5 and
#6`); Gitea's (and Forgejo's) as GitHub's, one keyword for each reference, its URLs
`<server>/owner/repo/issues/N` and `.../pulls/N` (Gitea's modules/references). loop/ reads them
through `ChangeForge.closing_references`, so it names no forge.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from pr_review_api.model import Forge
from pr_review_api.settings import Settings

_GITHUB_KEYWORDS = r"close[sd]?|fix(?:e[sd])?|resolve[sd]?"
_GITLAB_KEYWORDS = (
    r"clos(?:e[sd]?|ing)|fix(?:e[sd]|ing)?|resolv(?:e[sd]?|ing)|implement(?:s|ed|ing)?"
)
_TARGET = r"(?:https?://[^\s<>()\[\]'\"`,]+|[A-Za-z0-9_.\-/]*#[0-9]+)"
_SEPARATOR = r"(?:\s*,\s*(?:and\s+)?|\s+and\s+)"
_NUMBER = re.compile(r"[1-9][0-9]{0,9}")
_PROJECT_SEGMENT = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.\-]*")


def _pattern(keywords: str, lists: bool) -> re.Pattern[str]:
    targets = f"{_TARGET}(?:{_SEPARATOR}{_TARGET})*" if lists else _TARGET
    return re.compile(rf"(?<![\w/])(?:{keywords}):?\s+(?P<targets>{targets})", re.IGNORECASE)


_GITHUB_REFERENCE = _pattern(_GITHUB_KEYWORDS, lists=False)
_GITLAB_REFERENCE = _pattern(_GITLAB_KEYWORDS, lists=True)
_ONE_TARGET = re.compile(_TARGET)


@dataclass(frozen=True)
class IssueReference:
    """A closing reference: an issue of `project` (None: the change's own) on this forge, or
    one on another host (`foreign`), or a URL on this host that names no issue (`number` 0)."""

    project: str | None
    number: int
    foreign: bool = False
    pull_request: bool = False


# Each forge's URL path of an issue and of a pull request, after its server's own path.
_URL_KINDS = {"github": {"issues", "pull"}, "gitea": {"issues", "pulls"}}


def closing_references(description: str, forge: str, server_url: str) -> list[IssueReference]:
    """The description's closing references in order, in `forge`'s syntax."""
    if forge not in ("github", "gitlab", "gitea"):
        return []
    pattern = _GITLAB_REFERENCE if forge == "gitlab" else _GITHUB_REFERENCE
    found: list[IssueReference] = []
    for match in pattern.finditer(description):
        for target in _ONE_TARGET.findall(match["targets"]):
            reference = _reference(target, forge, server_url)
            if reference is not None:
                found.append(reference)
    return found


def _reference(target: str, forge: str, server_url: str) -> IssueReference | None:
    if "://" in target:
        return _url_reference(target, forge, server_url)
    project, _, number = target.rpartition("#")
    if _NUMBER.fullmatch(number) is None:
        return None
    if project and not _valid_project(project, forge):
        return None
    return IssueReference(project or None, int(number))


def _valid_project(project: str, forge: str) -> bool:
    segments = project.split("/")
    if len(segments) < 2 or (forge != "gitlab" and len(segments) != 2):
        return False
    return all(_PROJECT_SEGMENT.fullmatch(s) and s not in (".", "..") for s in segments)


def _url_reference(target: str, forge: str, server_url: str) -> IssueReference | None:
    url, server = urlsplit(target.rstrip(".;:!?")), urlsplit(server_url)
    same = (url.scheme, url.netloc.lower()) == (server.scheme, server.netloc.lower())
    prefix = server.path.rstrip("/") + "/"
    if not same or not url.path.startswith(prefix):
        return IssueReference(None, 0, foreign=True)
    parts = url.path[len(prefix) :].strip("/").split("/")
    if len(parts) == 4 and parts[2] in _URL_KINDS.get(forge, ()):
        project, kind, number = "/".join(parts[:2]), parts[2], parts[3]
    elif forge == "gitlab" and len(parts) >= 5 and parts[-3] == "-" and parts[-2] == "issues":
        project, kind, number = "/".join(parts[:-3]), "issues", parts[-1]
    else:
        return IssueReference(None, 0)  # a URL on this host that names no issue
    if _NUMBER.fullmatch(number) is None or not _valid_project(project, forge):
        return IssueReference(None, 0)
    return IssueReference(project, int(number), pull_request=kind != "issues")


def issue_server(forge: Forge, settings: Settings) -> str:
    """The server whose URLs name this forge's issues (any other host is foreign)."""
    if forge == "gitlab":
        return settings.gitlab_server_url
    if forge == "gitea":
        return settings.gitea_server_url or ""
    return settings.github_server_url
