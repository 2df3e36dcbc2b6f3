"""Pull-request URLs and metadata (CONTRACT section 3).

`parse_pull_request_url` accepts only `{GITHUB_SERVER_URL}/{owner}/{repo}/pull/{number}`, with
an optional trailing slash, `/files`, `/commits` or `/checks` suffix, query and fragment, and
rejects everything else before any network access. It parses by hand instead of trusting
`urllib.parse`, which silently drops tabs and newlines and accepts back-slashes, user-info and
odd ports that a browser would read differently.

`fetch_metadata` asks `GET {GITHUB_API_URL}/repos/{owner}/{repo}/pulls/{number}` for the two
commits a review is pinned to. The answer is untrusted: its size is capped, its JSON is
validated strictly, the SHAs must be full lower-case hex and the base branch a valid branch
name before anything reaches git, and its title and body are cut to a bound. Response bodies
never reach an error message or a log.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
import ssl
import time
from dataclasses import dataclass
from typing import Annotated
from urllib.parse import urlsplit

import certifi
import httpx
from pydantic import BaseModel, ConfigDict, StringConstraints, ValidationError

from pr_review_api import __version__
from pr_review_api.errors import GitHubUnavailable, InvalidPullRequestUrl, PullRequestNotFound
from pr_review_api.model import PullRequestInfo
from pr_review_api.settings import Settings

logger = logging.getLogger(__name__)

MAX_URL_CHARS = 2048
MAX_PULL_NUMBER = 2**31 - 1
MAX_OWNER_CHARS = 39  # GitHub's limit for user and organisation names
MAX_REPO_CHARS = 100  # GitHub's limit for repository names
MAX_BRANCH_BYTES = 1024
MAX_TITLE_CHARS = 1024
MAX_BODY_BYTES = 64 * 1024
MAX_METADATA_RESPONSE_BYTES = 1024 * 1024  # decoded; GitHub's body limit is 65,536 characters
METADATA_TIMEOUT_SECONDS = 30.0
MAX_REDIRECTS = 3
GITHUB_API_VERSION = "2022-11-28"

_URL = re.compile(
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<authority>[^/?#]*)(?P<path>[^?#]*)(?:\?[^#]*)?(?:#.*)?",
    re.ASCII | re.DOTALL,
)
_AUTHORITY = re.compile(
    r"(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(?::(?P<port>[0-9]*))?", re.ASCII
)
_PORT = re.compile(r"[1-9][0-9]{0,4}", re.ASCII)
_PULL_PATH = re.compile(
    r"/(?P<owner>[^/]*)/(?P<repo>[^/]*)/pull/(?P<number>[^/]*)(?:/(?:files|commits|checks))?/?",
    re.ASCII,
)
_OWNER = re.compile(r"[A-Za-z0-9](?:-?[A-Za-z0-9])*", re.ASCII)
_REPO = re.compile(r"[A-Za-z0-9._-]+", re.ASCII)
_NUMBER = re.compile(r"[1-9][0-9]{0,9}", re.ASCII)
_BRANCH_FORBIDDEN = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")
_DEFAULT_PORTS = {"http": 80, "https": 443}
_REDIRECTS = frozenset({301, 302, 303, 307, 308})

Sha = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{40}$")]


@dataclass(frozen=True)
class PullRequestRef:
    """A pull request named by a URL that passed `parse_pull_request_url`."""

    owner: str
    repo: str
    number: int
    url: str  # canonical: {GITHUB_SERVER_URL}/{owner}/{repo}/pull/{number}

    @property
    def info(self) -> PullRequestInfo:
        """The identity the review result reports."""
        return PullRequestInfo(url=self.url, owner=self.owner, repo=self.repo, number=self.number)

    def api_url(self, settings: Settings) -> str:
        """The REST endpoint of this pull request."""
        return f"{settings.github_api_url}/repos/{self.owner}/{self.repo}/pulls/{self.number}"

    def git_url(self, settings: Settings) -> str:
        """The smart-HTTP URL of the repository the pull request belongs to."""
        return f"{settings.github_server_url}/{self.owner}/{self.repo}.git"


@dataclass(frozen=True)
class PullRequestMetadata:
    """What the host says about a pull request. `title` and `body` are untrusted text."""

    base_sha: str
    head_sha: str
    base_ref: str  # a branch name, without refs/heads/
    title: str
    body: str


# --- URLs ---


def _effective_port(scheme: str, port: int | None) -> int | None:
    return port if port is not None else _DEFAULT_PORTS.get(scheme)


def _check_origin(scheme: str, authority: str, settings: Settings) -> None:
    server = urlsplit(settings.github_server_url)
    where = f"The pull request URL must be on {settings.github_server_url}."
    if scheme.lower() != server.scheme.lower() or "@" in authority:
        raise InvalidPullRequestUrl(where)
    match = _AUTHORITY.fullmatch(authority)
    if match is None:
        raise InvalidPullRequestUrl(where)
    host = match["host"].lower().removeprefix("[").removesuffix("]")
    port_text = match["port"]
    if port_text is not None and _PORT.fullmatch(port_text) is None:
        raise InvalidPullRequestUrl(where)
    port = int(port_text) if port_text is not None else None
    server_port = _effective_port(server.scheme.lower(), server.port)
    if (
        host != (server.hostname or "").lower()
        or _effective_port(scheme.lower(), port) != server_port
    ):
        raise InvalidPullRequestUrl(where)


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
    if "%" in path:
        raise InvalidPullRequestUrl(
            "The pull request URL must not use percent-encoding in its path."
        )
    prefix = urlsplit(settings.github_server_url).path.rstrip("/")
    pull = _PULL_PATH.fullmatch(path[len(prefix) :]) if path.startswith(prefix + "/") else None
    if pull is None:
        shape = f"{settings.github_server_url}/OWNER/REPO/pull/NUMBER"
        raise InvalidPullRequestUrl(f"The pull request URL must look like {shape}.")
    return pull["owner"], pull["repo"], pull["number"]


def parse_pull_request_url(url: str, settings: Settings) -> PullRequestRef:
    """Check a pull-request URL and return its canonical form, or raise InvalidPullRequestUrl."""
    if not isinstance(url, str) or not url or len(url) > MAX_URL_CHARS:
        raise InvalidPullRequestUrl("The pull request URL is empty or too long.")
    # Printable ASCII only: no whitespace, control or look-alike characters, no back-slashes.
    if not url.isascii() or not url.isprintable() or " " in url or "\\" in url:
        raise InvalidPullRequestUrl(
            "The pull request URL contains a character that is not allowed."
        )
    match = _URL.fullmatch(url)
    if match is None:
        raise InvalidPullRequestUrl("The pull request URL is not an absolute http(s) URL.")
    _check_origin(match["scheme"], match["authority"], settings)
    owner, repo, number_text = _pull_path(match["path"], settings)
    if not is_valid_owner(owner):
        raise InvalidPullRequestUrl("The repository owner in the URL is not a valid GitHub name.")
    if not is_valid_repo(repo):
        raise InvalidPullRequestUrl("The repository name in the URL is not a valid GitHub name.")
    if _NUMBER.fullmatch(number_text) is None or int(number_text) > MAX_PULL_NUMBER:
        raise InvalidPullRequestUrl("The pull request number must be a positive decimal number.")
    number = int(number_text)
    canonical = f"{settings.github_server_url}/{owner}/{repo}/pull/{number}"
    return PullRequestRef(owner=owner, repo=repo, number=number, url=canonical)


# --- metadata ---


def is_valid_branch_name(name: str) -> bool:
    """Whether `git check-ref-format --branch` would accept `name`, and it cannot be an option.

    The rules of git-check-ref-format(1): no component starts with `.` or ends with `.lock`;
    no `..`, `@{`, `//`, control characters, space, `~ ^ : ? * [ \\`; no leading or trailing
    `/`, no trailing `.`; not `@`. For a branch also: not `HEAD` and no leading `-`.
    """
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return False
    if not name or size > MAX_BRANCH_BYTES or name in ("@", "HEAD") or name.startswith("-"):
        return False
    if _BRANCH_FORBIDDEN.search(name) or any(bad in name for bad in ("..", "@{", "//")):
        return False
    if name.startswith("/") or name.endswith(("/", ".")):
        return False
    return not any(part.startswith(".") or part.endswith(".lock") for part in name.split("/"))


def _bounded_utf8(text: str, limit: int) -> str:
    data = text.encode("utf-8", "replace")
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", "ignore")


class _BaseWire(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    ref: str
    sha: Sha


class _HeadWire(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    sha: Sha


class _PullWire(BaseModel):
    """The fields of GitHub's pull-request document that a review uses."""

    model_config = ConfigDict(extra="ignore", strict=True)

    number: int
    title: str
    body: str | None = None
    base: _BaseWire
    head: _HeadWire


def _parse_metadata(data: bytes, ref: PullRequestRef) -> PullRequestMetadata:
    invalid = GitHubUnavailable("GitHub returned pull request data that is not valid.")
    try:
        wire = _PullWire.model_validate_json(data)
    except ValidationError:
        raise invalid from None  # the error quotes the body: never chain it
    if wire.number != ref.number or not is_valid_branch_name(wire.base.ref):
        raise invalid
    return PullRequestMetadata(
        base_sha=wire.base.sha,
        head_sha=wire.head.sha,
        base_ref=wire.base.ref,
        title=wire.title[:MAX_TITLE_CHARS],
        body=_bounded_utf8(wire.body or "", MAX_BODY_BYTES),
    )


def _request_headers(settings: Settings) -> dict[str, str]:
    headers = {
        "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": GITHUB_API_VERSION,
        "User-Agent": f"pr-review/{__version__}",
    }
    if settings.github_token is not None:
        headers["Authorization"] = f"Bearer {settings.github_token.get_secret_value()}"
    return headers


def _seconds_header(headers: httpx.Headers, name: str) -> int | None:
    value = headers.get(name, "")
    return int(value) if value.isascii() and value.isdigit() and len(value) <= 12 else None


def _rate_limit_wait(headers: httpx.Headers) -> int | None:
    retry_after = _seconds_header(headers, "retry-after")
    if retry_after is not None:
        return retry_after
    reset = _seconds_header(headers, "x-ratelimit-reset")
    return None if reset is None else max(0, reset - int(time.time()))


def _is_rate_limited(response: httpx.Response) -> bool:
    headers = response.headers
    return response.status_code == 429 or (
        response.status_code == 403
        and (headers.get("x-ratelimit-remaining") == "0" or "retry-after" in headers)
    )


def _status_error(response: httpx.Response, settings: Settings) -> Exception:
    status = response.status_code
    if status in (404, 410):
        return PullRequestNotFound()
    if _is_rate_limited(response):
        wait = _rate_limit_wait(response.headers)
        when = "later" if wait is None or wait > 86_400 else f"in {wait} seconds"
        hint = (
            "" if settings.github_token is not None else " (setting GITHUB_TOKEN raises the limit)"
        )
        return GitHubUnavailable(f"GitHub's API rate limit was reached; try again {when}{hint}.")
    if status == 401:
        return GitHubUnavailable("GitHub rejected the credentials; check GITHUB_TOKEN.")
    if status == 403:
        return GitHubUnavailable("GitHub refused access to the pull request.")
    if status >= 500:
        return GitHubUnavailable(f"GitHub answered with a server error (status {status}).")
    return GitHubUnavailable(f"GitHub answered with an unexpected status ({status}).")


def _same_origin(a: httpx.URL, b: httpx.URL) -> bool:
    return (a.scheme, a.host, a.port) == (b.scheme, b.host, b.port)


async def _read_capped(response: httpx.Response) -> bytes:
    declared = _seconds_header(response.headers, "content-length")
    if declared is not None and declared > MAX_METADATA_RESPONSE_BYTES:
        raise GitHubUnavailable("GitHub's answer was larger than allowed.")
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > MAX_METADATA_RESPONSE_BYTES:
            raise GitHubUnavailable("GitHub's answer was larger than allowed.")
        chunks.append(chunk)
    return b"".join(chunks)


async def _get_metadata(
    client: httpx.AsyncClient, ref: PullRequestRef, settings: Settings
) -> PullRequestMetadata:
    origin = httpx.URL(settings.github_api_url)
    url = httpx.URL(ref.api_url(settings))
    headers = _request_headers(settings)
    for _ in range(MAX_REDIRECTS + 1):
        async with client.stream("GET", url, headers=headers, follow_redirects=False) as response:
            logger.debug(
                "GitHub API answered %d for %s/%s#%d",
                response.status_code,
                ref.owner,
                ref.repo,
                ref.number,
            )
            if response.status_code in _REDIRECTS and "location" in response.headers:
                target = url.join(response.headers["location"])
                if not _same_origin(target, origin):
                    raise GitHubUnavailable(
                        "GitHub redirected the request to another host; it was not followed."
                    )
                url = target  # a renamed repository answers with a same-host redirect
                continue
            if response.status_code != 200:
                raise _status_error(response, settings)
            return _parse_metadata(await _read_capped(response), ref)
    raise GitHubUnavailable("GitHub redirected the request too many times.")


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """httpx's default verification (certifi's CA bundle), built once: loading it costs ~50 ms."""
    return ssl.create_default_context(cafile=certifi.where())


async def fetch_metadata(
    ref: PullRequestRef, settings: Settings, client: httpx.AsyncClient | None = None
) -> PullRequestMetadata:
    """The pull request's base and head commits, base branch, title and body."""
    try:
        async with asyncio.timeout(METADATA_TIMEOUT_SECONDS):
            if client is not None:
                return await _get_metadata(client, ref, settings)
            # trust_env=False: no proxy, netrc or CA settings picked up from the environment,
            # as for git, whose environment is built from scratch too.
            tls = await asyncio.to_thread(_tls_context)
            async with httpx.AsyncClient(
                verify=tls, trust_env=False, timeout=METADATA_TIMEOUT_SECONDS
            ) as own:
                return await _get_metadata(own, ref, settings)
    except (TimeoutError, httpx.TimeoutException):
        raise GitHubUnavailable("GitHub did not answer in time.") from None
    except (httpx.HTTPError, httpx.InvalidURL):
        raise GitHubUnavailable("GitHub could not be reached.") from None
