"""Pull-request URLs (CONTRACT section 3) and metadata from the REST API, one test per rule."""

from __future__ import annotations

import gzip
import json
import logging
import subprocess
import traceback
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from pydantic import SecretStr

from pr_review_api.errors import GitHubUnavailable, InvalidPullRequestUrl, PullRequestNotFound
from pr_review_api.github import client as github
from pr_review_api.github.checkout import open_pull_request
from pr_review_api.github.client import (
    MAX_BODY_BYTES,
    MAX_TITLE_CHARS,
    GitHubClient,
    PullRequestRef,
    fetch_metadata,
    is_valid_branch_name,
    parse_pull_request_url,
)
from pr_review_api.github.credentials import Credentials, TokenCredentials
from pr_review_api.model import PullRequestInfo
from pr_review_api.settings import MAX_PROVIDER_RESPONSE_BYTES, Settings
from tests.conftest import GITHUB_TOKEN
from tests.fakes.github_server import FakeGitHub, fake_github, pull_json
from tests.fakes.provider_server import gzip_bomb_bytes

__all__ = ["fake_github"]  # the fixture, imported for this module's tests

BASE = "a" * 40
HEAD = "b" * 40
CANONICAL = "https://github.com/acme/widget/pull/7"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def dotcom() -> Settings:
    return Settings()


def parse(url: str, settings: Settings | None = None) -> PullRequestRef:
    return parse_pull_request_url(url, settings or dotcom())


def rejected(url: str, settings: Settings | None = None) -> InvalidPullRequestUrl:
    with pytest.raises(InvalidPullRequestUrl) as caught:
        parse(url, settings)
    return caught.value


# --- URL: accepted forms and their normalisation ---


def test_canonical_url_is_accepted_unchanged() -> None:
    ref = parse(CANONICAL)
    assert (ref.owner, ref.repo, ref.number, ref.url) == ("acme", "widget", 7, CANONICAL)


def test_ref_info_is_the_result_document() -> None:
    assert parse(CANONICAL).info == PullRequestInfo(
        url=CANONICAL, owner="acme", repo="widget", number=7
    )


def test_trailing_slash_is_normalised_away() -> None:
    assert parse(CANONICAL + "/").url == CANONICAL


@pytest.mark.parametrize("suffix", ["/files", "/commits", "/checks", "/files/", "/checks/"])
def test_files_commits_checks_suffixes_are_normalised_away(suffix: str) -> None:
    assert parse(CANONICAL + suffix).url == CANONICAL


@pytest.mark.parametrize(
    "tail",
    [
        "?w=1",
        "#discussion_r123",
        "?diff=split&w=1#diff-abc",
        "/files?file-filters%5B%5D=.py",
        "?",
        "#",
    ],
)
def test_query_and_fragment_are_normalised_away(tail: str) -> None:
    assert parse(CANONICAL + tail).url == CANONICAL


def test_scheme_and_host_compare_case_insensitively() -> None:
    assert parse("HTTPS://GitHub.COM/acme/widget/pull/7").url == CANONICAL


def test_owner_and_repository_keep_their_case() -> None:
    ref = parse("https://github.com/Acme/Widget.JS/pull/7")
    assert (ref.owner, ref.repo) == ("Acme", "Widget.JS")


def test_explicit_default_port_is_the_server_port() -> None:
    assert parse("https://github.com:443/acme/widget/pull/7").url == CANONICAL


def test_enterprise_server_urls_are_accepted() -> None:
    ghes = Settings(
        github_server_url="https://ghe.example.com", github_api_url="https://ghe.example.com/api/v3"
    )
    assert parse("https://GHE.example.com/acme/widget/pull/7/files", ghes).url == (
        "https://ghe.example.com/acme/widget/pull/7"
    )
    rejected(CANONICAL, ghes)


def test_enterprise_server_path_prefix_is_required() -> None:
    ghes = Settings(github_server_url="https://ghe.example.com/code/")
    assert parse("https://ghe.example.com/code/acme/widget/pull/7", ghes).url == (
        "https://ghe.example.com/code/acme/widget/pull/7"
    )
    for url in (
        "https://ghe.example.com/acme/widget/pull/7",
        "https://ghe.example.com/codeX/acme/widget/pull/7",
        "https://ghe.example.com/CODE/acme/widget/pull/7",
    ):
        rejected(url, ghes)


def test_loopback_server_port_must_match_exactly() -> None:
    local = Settings(github_server_url="http://127.0.0.1:8123")
    assert parse("http://127.0.0.1:8123/acme/widget/pull/7", local).url == (
        "http://127.0.0.1:8123/acme/widget/pull/7"
    )
    for url in (
        "http://127.0.0.1/acme/widget/pull/7",
        "http://127.0.0.1:80/acme/widget/pull/7",
        "http://127.0.0.1:8124/acme/widget/pull/7",
        "http://127.0.0.1:08123/acme/widget/pull/7",
        "http://localhost:8123/acme/widget/pull/7",
        "https://127.0.0.1:8123/acme/widget/pull/7",
    ):
        rejected(url, local)


# --- URL: rejections ---


@pytest.mark.parametrize(
    "url",
    [
        "http://github.com/acme/widget/pull/7",
        "ftp://github.com/acme/widget/pull/7",
        "git://github.com/acme/widget/pull/7",
        "ssh://git@github.com/acme/widget/pull/7",
        "file:///acme/widget/pull/7",
        "javascript://github.com/acme/widget/pull/7",
        "//github.com/acme/widget/pull/7",
        "github.com/acme/widget/pull/7",
        "https:/github.com/acme/widget/pull/7",
        "https:github.com/acme/widget/pull/7",
    ],
)
def test_other_scheme_is_rejected(url: str) -> None:
    rejected(url)


@pytest.mark.parametrize(
    "url",
    [
        "https://gitlab.com/acme/widget/pull/7",
        "https://api.github.com/acme/widget/pull/7",
        "https://gist.github.com/acme/widget/pull/7",
        "https://github.com.evil.example/acme/widget/pull/7",
        "https://evil.example/github.com/acme/widget/pull/7",
        "https://github.com./acme/widget/pull/7",
        "https://xn--github-xyz.com/acme/widget/pull/7",
        "https:///acme/widget/pull/7",
        "https://[::1]/acme/widget/pull/7",
    ],
)
def test_other_host_is_rejected(url: str) -> None:
    rejected(url)


@pytest.mark.parametrize("port", [":80", ":8443", ":", ":0", ":0443", ":443443", ":-1", ":abc"])
def test_other_port_is_rejected(port: str) -> None:
    rejected(f"https://github.com{port}/acme/widget/pull/7")


@pytest.mark.parametrize(
    "url",
    [
        "https://user@github.com/acme/widget/pull/7",
        "https://user:pass@github.com/acme/widget/pull/7",
        "https://:@github.com/acme/widget/pull/7",
        "https://evil.example@github.com/acme/widget/pull/7",
        "https://github.com@evil.example/acme/widget/pull/7",
        f"https://{GITHUB_TOKEN}@github.com/acme/widget/pull/7",
    ],
)
def test_user_info_is_rejected(url: str) -> None:
    error = rejected(url)
    assert GITHUB_TOKEN not in error.message


@pytest.mark.parametrize(
    "path",
    [
        "",
        "/",
        "/acme",
        "/acme/widget",
        "/acme/widget/pull",
        "/acme/widget/pull/",
        "/acme/widget/pulls/7",
        "/acme/widget/issues/7",
        "/acme/widget/PULL/7",
        "/acme/widget/pull/7/files/extra",
        "/acme/widget/pull/7/commits/" + "a" * 40,
        "/acme/widget/pull/7/FILES",
        "/acme/widget/pull/7/merge",
        "/acme/widget/pull/7//",
        "/acme/widget/pull/7/files//",
        "/acme/widget/pull/7.diff",
        "/acme/widget/pull/7.patch",
        "//acme/widget/pull/7",
        "/acme//widget/pull/7",
        "/acme/widget//pull/7",
        "/acme/widget/pull//7",
        "/acme/widget/extra/pull/7",
        "/orgs/acme/widget/pull/7",
        "/acme/widget/pull/7/../8",
        "/acme/widget/pull/../pull/7",
        "/./acme/widget/pull/7",
        "/acme/./widget/pull/7",
    ],
)
def test_other_path_shapes_are_rejected(path: str) -> None:
    rejected(f"https://github.com{path}")


@pytest.mark.parametrize("number", ["0", "00", "-1", "-0", "+7"])
def test_non_positive_number_is_rejected(number: str) -> None:
    rejected(f"https://github.com/acme/widget/pull/{number}")


@pytest.mark.parametrize(
    "number",
    [
        "007",
        "7.0",
        "1e3",
        "0x7",
        "7a",
        "seven",
        "٧",  # ARABIC-INDIC DIGIT SEVEN
        "７",  # FULLWIDTH DIGIT SEVEN
        "𝟕",  # MATHEMATICAL BOLD DIGIT SEVEN
        "²",
        "7_000",
        "2147483648",
        "99999999999",
        "9" * 400,
    ],
)
def test_non_decimal_or_absurd_number_is_rejected(number: str) -> None:
    rejected(f"https://github.com/acme/widget/pull/{number}")


def test_largest_number_is_accepted() -> None:
    assert parse("https://github.com/acme/widget/pull/2147483647").number == 2**31 - 1


@pytest.mark.parametrize("owner", ["a", "A1", "acme-corp", "a-b-c", "9", "x" * 39])
def test_valid_owner_names_are_accepted(owner: str) -> None:
    assert parse(f"https://github.com/{owner}/widget/pull/7").owner == owner


@pytest.mark.parametrize(
    "owner",
    [
        "-acme",
        "acme-",
        "ac--me",
        "ac_me",
        "ac.me",
        "x" * 40,
        "ac~me",
        "ac+me",
        "ac'me",
        "ac!me",
        "ac$me",
    ],
)
def test_invalid_owner_names_are_rejected(owner: str) -> None:
    rejected(f"https://github.com/{owner}/widget/pull/7")


@pytest.mark.parametrize(
    "repo", ["w", "widget", "widget.js", ".github", "_private", "a-b_c.d", "...", "x" * 100]
)
def test_valid_repository_names_are_accepted(repo: str) -> None:
    assert parse(f"https://github.com/acme/{repo}/pull/7").repo == repo


@pytest.mark.parametrize(
    "repo",
    [
        ".",
        "..",
        "widget.git",
        "widget.GIT",
        "x" * 101,
        "wid get",
        "wid~get",
        "wid+get",
        "wid:get",
        "wid@get",
        "wid;get",
        "wid'get",
    ],
)
def test_invalid_repository_names_are_rejected_not_stripped(repo: str) -> None:
    rejected(f"https://github.com/acme/{repo}/pull/7")


@pytest.mark.parametrize(
    "url",
    [
        "https://github.com/acme/widget/pull/%37",
        "https://github.com/acme/wid%67et/pull/7",
        "https://github.com/acme%2Fwidget/pull/7",
        "https://github.com/acme/widget%2Fpull/7",
        "https://github.com/acme/widget/pul%6C/7",
        "https://github.com/%2e%2e/acme/widget/pull/7",
        "https://github.com/acme/widget/pull/7/%2e%2e/8",
        "https://github.com/acme/widget/pull/7%00",
        "https://github.com/acme/widget/pull/7%2F",
        "https://git%68ub.com/acme/widget/pull/7",
        "https://github.com%2F@evil.example/acme/widget/pull/7",
    ],
)
def test_percent_encoding_tricks_are_rejected(url: str) -> None:
    rejected(url)


@pytest.mark.parametrize(
    "url",
    [
        " " + CANONICAL,
        CANONICAL + " ",
        CANONICAL + "\n",
        "https://github.com/acme/widget/pull/7\t",
        "https://github.com/acme/wid\tget/pull/7",
        "https://github.com/acme/widget/pull/\n7",
        "https://github.com/acme/widget/pull/7\r\nX-Injected: 1",
        "https://github.com/acme/widget/pull/7\x00",
        "https://github.com/acme/widget/pull/7\x7f",
        "https://github.com/acme/widget/pull/7\x1b[31m",
        "https://github.com/acme/widget/pull/7\u00a0",
        "https://github.com/acme/widget/pull/7\u200b",
        "https://github.com/acme/widget/pull/7\u2028",
        "https://github.com/acme/widget/pull/7\ufeff",
        "https://github.com/acme/wіdget/pull/7",  # Cyrillic і
        "https://gіthub.com/acme/widget/pull/7",  # Cyrillic і
        "https://github.com/acme/widget/pull/7?q=a b",
        "https://github.com/acme/widget/pull/7#a\x00",
        "",
    ],
)
def test_whitespace_control_and_non_ascii_characters_are_rejected(url: str) -> None:
    rejected(url)


@pytest.mark.parametrize(
    "url",
    [
        "https://github.com\\acme/widget/pull/7",
        "https://github.com/acme\\widget/pull/7",
        "https:\\\\github.com/acme/widget/pull/7",
        "https://evil.example\\@github.com/acme/widget/pull/7",
    ],
)
def test_backslashes_are_rejected(url: str) -> None:
    rejected(url)


def test_overlong_url_is_rejected() -> None:
    rejected(CANONICAL + "?" + "q" * 4096)


def test_rejection_messages_never_echo_the_input() -> None:
    marker = "INJECTED-MARKER"
    for url in (
        f"https://{marker}.example/acme/widget/pull/7",
        f"https://github.com/{marker}-/widget/pull/7",
        f"https://github.com/acme/widget/pull/{marker}",
        f"https://github.com/acme/widget/pull/7\n{marker}",
    ):
        assert marker not in rejected(url).message


@pytest.mark.anyio
async def test_rejected_url_causes_no_network_access(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    settings = fake_github.settings(tmp_path / "cache", token=GITHUB_TOKEN)
    fake_github.pull_request("acme", "widget", 7)
    for url in (
        f"{fake_github.server_url}/acme/widget/pull/0",
        f"{fake_github.server_url}/acme/widget.git/pull/7",
        f"http://localhost:{fake_github.port}/acme/widget/pull/7",
        f"{fake_github.server_url}/acme/widget/pull/7/../7",
    ):
        with pytest.raises(InvalidPullRequestUrl):
            async with open_pull_request(url, settings):
                pass
    assert fake_github.requests == []
    assert not (tmp_path / "cache").exists()


_OWNERS = st.from_regex(r"[A-Za-z0-9](?:-?[A-Za-z0-9]){0,12}", fullmatch=True)
_REPOS = st.from_regex(r"[A-Za-z0-9._-]{1,20}", fullmatch=True).filter(
    lambda name: name not in (".", "..") and not name.lower().endswith(".git")
)
_TAIL_TEXT = st.text(
    alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters="\\"),
    max_size=30,
)


@hypothesis_settings(max_examples=100, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    parts=st.tuples(
        _OWNERS,
        _REPOS,
        st.integers(min_value=1, max_value=2**31 - 1),
        st.sampled_from(["", "/", "/files", "/commits", "/checks", "/files/"]),
        st.one_of(st.just(""), _TAIL_TEXT.map(lambda text: "?" + text.replace("#", ""))),
        st.one_of(st.just(""), _TAIL_TEXT.map(lambda text: "#" + text)),
    )
)
def test_every_accepted_form_normalises_to_a_fixed_point(
    parts: tuple[str, str, int, str, str, str],
) -> None:
    owner, repo, number, suffix, query, fragment = parts
    canonical = f"https://github.com/{owner}/{repo}/pull/{number}"
    ref = parse(canonical + suffix + query + fragment)
    assert ref.url == canonical
    assert parse(ref.url) == ref


@hypothesis_settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.one_of(
        st.text(max_size=80), st.text(max_size=40).map(lambda text: "https://github.com/" + text)
    )
)
def test_arbitrary_text_is_either_rejected_or_canonical(url: str) -> None:
    try:
        ref = parse(url)
    except InvalidPullRequestUrl:
        return
    assert ref.url.startswith("https://github.com/")
    assert parse(ref.url) == ref


# --- metadata ---


def _ref(
    fake: FakeGitHub, owner: str = "acme", repo: str = "widget", number: int = 7
) -> PullRequestRef:
    return parse_pull_request_url(
        f"{fake.server_url}/{owner}/{repo}/pull/{number}", fake.settings(Path("unused"))
    )


async def _metadata_error(fake: FakeGitHub, token: str | None = None) -> Exception:
    settings = fake.settings(Path("unused"), token=token)
    with pytest.raises((GitHubUnavailable, PullRequestNotFound)) as caught:
        await fetch_metadata(_ref(fake), settings)
    return caught.value


@pytest.mark.anyio
async def test_metadata_comes_from_the_pulls_endpoint(fake_github: FakeGitHub) -> None:
    fake_github.set_pull(
        "acme",
        "widget",
        7,
        base_sha=BASE,
        head_sha=HEAD,
        base_ref="release/1.x",
        title="T",
        body="B",
    )
    metadata = await fetch_metadata(_ref(fake_github), fake_github.settings(Path("unused")))
    assert (metadata.base_sha, metadata.head_sha, metadata.base_ref) == (BASE, HEAD, "release/1.x")
    assert (metadata.title, metadata.body) == ("T", "B")
    (request,) = fake_github.requests
    assert (request.method, request.path) == ("GET", "/api/v3/repos/acme/widget/pulls/7")


@pytest.mark.anyio
async def test_api_request_names_the_media_type_and_api_version(fake_github: FakeGitHub) -> None:
    fake_github.set_pull("acme", "widget", 7, base_sha=BASE, head_sha=HEAD)
    await fetch_metadata(_ref(fake_github), fake_github.settings(Path("unused")))
    headers = fake_github.requests[0].headers
    assert headers["accept"] == "application/vnd.github+json"
    assert headers["x-github-api-version"] == github.GITHUB_API_VERSION
    assert headers["user-agent"].startswith("pr-review/")


@pytest.mark.anyio
async def test_token_is_sent_as_a_bearer_header_when_set(fake_github: FakeGitHub) -> None:
    fake_github.require_token = GITHUB_TOKEN
    fake_github.set_pull("acme", "widget", 7, base_sha=BASE, head_sha=HEAD)
    await fetch_metadata(
        _ref(fake_github), fake_github.settings(Path("unused"), token=GITHUB_TOKEN)
    )
    assert fake_github.requests[0].authorization == f"Bearer {GITHUB_TOKEN}"


@pytest.mark.anyio
async def test_no_authorization_header_without_a_token(fake_github: FakeGitHub) -> None:
    fake_github.set_pull("acme", "widget", 7, base_sha=BASE, head_sha=HEAD)
    await fetch_metadata(_ref(fake_github), fake_github.settings(Path("unused")))
    assert "authorization" not in fake_github.requests[0].headers


@pytest.mark.anyio
@pytest.mark.parametrize("status", [404, 410])
async def test_404_is_pull_request_not_found(fake_github: FakeGitHub, status: int) -> None:
    fake_github.respond("acme", "widget", 7, status, '{"message":"Not Found"}')
    error = await _metadata_error(fake_github)
    assert isinstance(error, PullRequestNotFound)


@pytest.mark.anyio
async def test_unknown_pull_request_is_not_found(fake_github: FakeGitHub) -> None:
    assert isinstance(await _metadata_error(fake_github), PullRequestNotFound)


@pytest.mark.anyio
@pytest.mark.parametrize("status", [500, 502, 503, 504])
async def test_server_error_is_github_unavailable(fake_github: FakeGitHub, status: int) -> None:
    fake_github.respond("acme", "widget", 7, status, "<html>upstream error</html>")
    error = await _metadata_error(fake_github)
    assert isinstance(error, GitHubUnavailable)
    assert str(status) in error.message
    assert "upstream" not in error.message


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("status", "headers", "wait"),
    [
        (403, {"x-ratelimit-remaining": "0", "x-ratelimit-limit": "60"}, None),
        (403, {"retry-after": "30"}, "in 30 seconds"),
        (429, {}, None),
        (429, {"retry-after": "7", "x-ratelimit-remaining": "0"}, "in 7 seconds"),
        (429, {"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, None),
    ],
)
async def test_rate_limit_answer_says_so(
    fake_github: FakeGitHub, status: int, headers: dict[str, str], wait: str | None
) -> None:
    fake_github.respond(
        "acme", "widget", 7, status, '{"message":"API rate limit exceeded"}', headers=headers
    )
    error = await _metadata_error(fake_github)
    assert isinstance(error, GitHubUnavailable)
    assert "rate limit" in error.message
    assert "GITHUB_TOKEN" in error.message  # no token was set: say how to raise the limit
    if wait is not None:
        assert wait in error.message


@pytest.mark.anyio
async def test_rate_limit_reset_time_gives_the_wait(fake_github: FakeGitHub) -> None:
    import time

    reset = str(int(time.time()) + 120)
    fake_github.respond(
        "acme",
        "widget",
        7,
        403,
        "{}",
        headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": reset},
    )
    error = await _metadata_error(fake_github, token=GITHUB_TOKEN)
    assert "rate limit" in error.args[0]
    assert "seconds" in error.args[0]
    assert "GITHUB_TOKEN" not in error.args[0]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("status", "phrase"),
    [(401, "credentials"), (403, "refused"), (418, "unexpected"), (204, "unexpected")],
)
async def test_other_failures_are_github_unavailable(
    fake_github: FakeGitHub, status: int, phrase: str
) -> None:
    fake_github.respond("acme", "widget", 7, status, "" if status == 204 else "nope")
    error = await _metadata_error(fake_github)
    assert isinstance(error, GitHubUnavailable)
    assert phrase in error.message


@pytest.mark.anyio
async def test_slow_api_is_cut_off_by_the_total_timeout(
    fake_github: FakeGitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(github, "METADATA_TIMEOUT_SECONDS", 0.3)
    fake_github.respond(
        "acme", "widget", 7, 200, json.dumps(pull_json(7, base_sha=BASE, head_sha=HEAD)), delay=5
    )
    error = await _metadata_error(fake_github)
    assert isinstance(error, GitHubUnavailable)
    assert "in time" in error.message


@pytest.mark.anyio
async def test_unreachable_api_is_github_unavailable(tmp_path: Path) -> None:
    with __import__("socket").socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = Settings(
        github_server_url=f"http://127.0.0.1:{port}", github_api_url=f"http://127.0.0.1:{port}/api"
    )
    ref = parse_pull_request_url(f"http://127.0.0.1:{port}/acme/widget/pull/7", settings)
    with pytest.raises(GitHubUnavailable, match="could not be reached"):
        await fetch_metadata(ref, settings)


@pytest.mark.anyio
@pytest.mark.parametrize(
    "sha",
    [
        "a" * 39,
        "a" * 41,
        "A" * 40,
        "g" * 40,
        "a" * 39 + "\n",
        "a" * 40 + "\n",
        " " + "a" * 40,
        "-" + "a" * 39,
        "a" * 64,
        "",
        "HEAD",
        "refs/heads/main",
        "--upload-pack=touch x",
    ],
)
async def test_shas_must_be_full_lowercase_hex(fake_github: FakeGitHub, sha: str) -> None:
    for base, head in ((sha, HEAD), (BASE, sha)):
        fake_github.set_pull("acme", "widget", 7, base_sha=base, head_sha=head)
        error = await _metadata_error(fake_github)
        assert isinstance(error, GitHubUnavailable)
        assert error.message == "GitHub returned pull request data that is not valid."


BAD_BRANCHES = [
    "",
    "-main",
    "--upload-pack=touch x",
    "a..b",
    "a b",
    "a\tb",
    "a\nb",
    "a\x00b",
    "a\x7fb",
    "x.lock",
    "a/x.lock/b",
    "HEAD",
    "@",
    ".hidden",
    "a/.hidden",
    "a//b",
    "/a",
    "a/",
    "a.",
    "a~1",
    "a^",
    "a:b",
    "a?",
    "a*",
    "a[1]",
    "a\\b",
    "@{-1}",
    "a@{b",
    "x" * 1025,
    "\ud800",
]
GOOD_BRANCHES = [
    "main",
    "release/1.x",
    "feature-x",
    "a@b",
    "ünïcode",
    "v1.0",
    "a.b/c_d",
    "x" * 200,
    "@a",
]


@pytest.mark.parametrize("branch", BAD_BRANCHES)
def test_invalid_base_branches_are_refused(branch: str) -> None:
    assert not is_valid_branch_name(branch)


@pytest.mark.parametrize("branch", GOOD_BRANCHES)
def test_valid_base_branches_are_accepted(branch: str) -> None:
    assert is_valid_branch_name(branch)


def test_branch_rule_is_no_looser_than_git_check_ref_format(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(tmp_path)}
    for branch in BAD_BRANCHES + GOOD_BRANCHES:
        if "\x00" in branch or "\ud800" in branch:
            continue  # not representable in an argument vector
        done = subprocess.run(
            ["git", "check-ref-format", "--branch", branch],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            check=False,
        )
        if is_valid_branch_name(branch):
            assert done.returncode == 0, branch


@pytest.mark.anyio
async def test_invalid_base_branch_in_metadata_is_github_unavailable(
    fake_github: FakeGitHub,
) -> None:
    fake_github.set_pull(
        "acme", "widget", 7, base_sha=BASE, head_sha=HEAD, base_ref="--upload-pack=touch x"
    )
    error = await _metadata_error(fake_github)
    assert isinstance(error, GitHubUnavailable)


@pytest.mark.anyio
@pytest.mark.parametrize(
    "body",
    [
        "not json",
        "[]",
        "null",
        '{"number": 7}',
        json.dumps({**pull_json(7, base_sha=BASE, head_sha=HEAD), "number": 8}),
        json.dumps({**pull_json(7, base_sha=BASE, head_sha=HEAD), "number": "7"}),
        json.dumps({**pull_json(7, base_sha=BASE, head_sha=HEAD), "title": None}),
        json.dumps({**pull_json(7, base_sha=BASE, head_sha=HEAD), "body": 5}),
        json.dumps({**pull_json(7, base_sha=BASE, head_sha=HEAD), "head": {"sha": None}}),
        json.dumps({**pull_json(7, base_sha=BASE, head_sha=HEAD), "base": {"sha": BASE}}),
        json.dumps(pull_json(7, base_sha=BASE, head_sha=HEAD))[:-1],
    ],
)
async def test_malformed_metadata_is_github_unavailable(fake_github: FakeGitHub, body: str) -> None:
    fake_github.respond("acme", "widget", 7, 200, body)
    error = await _metadata_error(fake_github)
    assert isinstance(error, GitHubUnavailable)
    assert error.__cause__ is None
    assert error.__context__ is None or error.__suppress_context__


@pytest.mark.anyio
async def test_oversized_response_is_refused_by_its_declared_length(
    fake_github: FakeGitHub,
) -> None:
    document = pull_json(7, base_sha=BASE, head_sha=HEAD, body="x" * (2 * 1024 * 1024))
    fake_github.respond("acme", "widget", 7, 200, json.dumps(document))
    error = await _metadata_error(fake_github)
    assert isinstance(error, GitHubUnavailable)
    assert "larger than allowed" in error.message


@pytest.mark.anyio
async def test_oversized_streamed_response_is_cut_off(fake_github: FakeGitHub) -> None:
    sent: list[int] = []

    async def endless() -> AsyncIterator[bytes]:
        for _ in range(10_000):  # 640 MB if nobody stops reading
            sent.append(1)
            yield b" " * 65536

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=endless())

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        with pytest.raises(GitHubUnavailable, match="larger than allowed"):
            await fetch_metadata(_ref(fake_github), fake_github.settings(Path("unused")), client)
    assert len(sent) <= github.MAX_METADATA_RESPONSE_BYTES // 65536 + 2


@pytest.mark.anyio
async def test_a_given_client_is_used_with_the_same_headers(fake_github: FakeGitHub) -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=pull_json(7, base_sha=BASE, head_sha=HEAD))

    settings = fake_github.settings(Path("unused"), token=GITHUB_TOKEN)
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        metadata = await fetch_metadata(_ref(fake_github), settings, client)
    assert metadata.head_sha == HEAD
    assert seen[0].headers["authorization"] == f"Bearer {GITHUB_TOKEN}"
    assert seen[0].headers["accept"] == "application/vnd.github+json"


@pytest.mark.anyio
async def test_title_and_body_are_bounded(fake_github: FakeGitHub) -> None:
    fake_github.set_pull(
        "acme", "widget", 7, base_sha=BASE, head_sha=HEAD, title="t" * 100_000, body="é" * 100_000
    )
    metadata = await fetch_metadata(_ref(fake_github), fake_github.settings(Path("unused")))
    assert len(metadata.title) == MAX_TITLE_CHARS
    assert len(metadata.body.encode()) <= MAX_BODY_BYTES
    assert metadata.body == "é" * (MAX_BODY_BYTES // 2)  # cut on a character boundary


@pytest.mark.anyio
async def test_missing_body_is_empty_text(fake_github: FakeGitHub) -> None:
    fake_github.set_pull("acme", "widget", 7, base_sha=BASE, head_sha=HEAD, body=None)
    metadata = await fetch_metadata(_ref(fake_github), fake_github.settings(Path("unused")))
    assert metadata.body == ""


@pytest.mark.anyio
async def test_same_host_redirect_of_a_renamed_repository_is_followed(
    fake_github: FakeGitHub,
) -> None:
    fake_github.respond(
        "acme",
        "widget",
        7,
        301,
        headers={"Location": f"{fake_github.api_url}/repos/acme/renamed/pulls/7"},
    )
    fake_github.set_pull("acme", "renamed", 7, base_sha=BASE, head_sha=HEAD)
    settings = fake_github.settings(Path("unused"), token=GITHUB_TOKEN)
    metadata = await fetch_metadata(_ref(fake_github), settings)
    assert metadata.head_sha == HEAD
    assert [r.path for r in fake_github.requests] == [
        "/api/v3/repos/acme/widget/pulls/7",
        "/api/v3/repos/acme/renamed/pulls/7",
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("host", ["localhost", "127.0.0.2"])
async def test_redirect_to_another_host_is_not_followed(fake_github: FakeGitHub, host: str) -> None:
    target = f"http://{host}:{fake_github.port}/api/v3/repos/acme/renamed/pulls/7"
    fake_github.respond("acme", "widget", 7, 302, headers={"Location": target})
    fake_github.set_pull("acme", "renamed", 7, base_sha=BASE, head_sha=HEAD)
    error = await _metadata_error(fake_github, token=GITHUB_TOKEN)
    assert isinstance(error, GitHubUnavailable)
    assert "another host" in error.message
    assert len(fake_github.requests) == 1  # the token went nowhere else


@pytest.mark.anyio
async def test_redirect_loops_are_bounded(fake_github: FakeGitHub) -> None:
    fake_github.respond(
        "acme",
        "widget",
        7,
        307,
        headers={"Location": f"{fake_github.api_url}/repos/acme/widget/pulls/7"},
    )
    error = await _metadata_error(fake_github)
    assert isinstance(error, GitHubUnavailable)
    assert len(fake_github.requests) == github.MAX_REDIRECTS + 1


@pytest.mark.anyio
async def test_response_bodies_and_token_never_reach_messages_or_logs(
    fake_github: FakeGitHub, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    marker = "BODY-MARKER-5d1e"
    fake_github.require_token = GITHUB_TOKEN
    bodies: list[tuple[int, str, dict[str, str]]] = [
        (500, f"<h1>{marker}</h1>", {}),
        (403, f'{{"message": "{marker}"}}', {"x-ratelimit-remaining": "0"}),
        (200, f'{{"number": 7, "title": "{marker}", "base": "{marker}"}}', {}),
        (200, json.dumps(pull_json(7, base_sha=marker, head_sha=HEAD, title=marker)), {}),
        (404, marker, {}),
    ]
    for status, body, headers in bodies:
        fake_github.respond("acme", "widget", 7, status, body, headers=headers)
        error = await _metadata_error(fake_github, token=GITHUB_TOKEN)
        rendered = "".join(traceback.format_exception(error))
        for secret in (marker, GITHUB_TOKEN):
            assert secret not in rendered
            assert secret not in repr(error)
    for record in caplog.records:
        text = record.getMessage() + repr(record.args)
        assert marker not in text
        assert GITHUB_TOKEN not in text
    assert GITHUB_TOKEN not in caplog.text


# --- one client, one capped reader ---

# The bound the provider's gzip-bomb test holds (tests/llm/test_provider.py, tests/hostile):
# four times the provider's 2 MiB cap. GitHub's metadata cap is half of that, so the same
# absolute bound is a stricter one here.
SHARED_BOMB_PEAK_BOUND = 4 * MAX_PROVIDER_RESPONSE_BYTES


@pytest.mark.anyio
async def test_gzip_bomb_in_metadata_stays_within_the_provider_bound(
    fake_github: FakeGitHub,
) -> None:
    bomb = gzip_bomb_bytes()  # 64 MiB of spaces in about 64 KiB
    fake_github.respond(
        "acme",
        "widget",
        7,
        200,
        bomb,
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
    )
    settings = fake_github.settings(Path("unused"))
    async with GitHubClient(settings) as client:
        fake_github.set_pull("acme", "widget", 8, base_sha=BASE, head_sha=HEAD)
        await fetch_metadata(_ref(fake_github, number=8), settings, client)  # warm up the pool
        tracemalloc.start()
        try:
            with pytest.raises(GitHubUnavailable, match="larger than allowed"):
                await fetch_metadata(_ref(fake_github), settings, client)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    # Before the shared reader, httpx's decoder inflated each chunk whole: about 142 MiB.
    assert peak < SHARED_BOMB_PEAK_BOUND
    assert peak < 4 * github.MAX_METADATA_RESPONSE_BYTES


@pytest.mark.anyio
async def test_gzip_encoded_metadata_is_decoded(fake_github: FakeGitHub) -> None:
    document = json.dumps(pull_json(7, base_sha=BASE, head_sha=HEAD)).encode()
    fake_github.respond(
        "acme",
        "widget",
        7,
        200,
        gzip.compress(document),
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
    )
    metadata = await fetch_metadata(_ref(fake_github), fake_github.settings(Path("unused")))
    assert metadata.head_sha == HEAD


@pytest.mark.anyio
async def test_corrupt_or_unknown_encoding_is_github_unavailable(fake_github: FakeGitHub) -> None:
    for encoding, body in (("gzip", b"\x1f\x8b not gzip at all"), ("br", b"whatever")):
        fake_github.respond("acme", "widget", 7, 200, body, headers={"Content-Encoding": encoding})
        error = await _metadata_error(fake_github)
        assert isinstance(error, GitHubUnavailable)
        assert error.message == "GitHub's answer could not be decoded."


@pytest.mark.anyio
async def test_one_client_keeps_one_connection_for_many_requests(fake_github: FakeGitHub) -> None:
    fake_github.set_pull("acme", "widget", 7, base_sha=BASE, head_sha=HEAD)
    settings = fake_github.settings(Path("unused"))
    async with GitHubClient(settings) as client:
        for _ in range(5):
            await fetch_metadata(_ref(fake_github), settings, client)
    ports = {r.client_port for r in fake_github.api_requests()}
    assert len(fake_github.api_requests()) == 5
    assert len(ports) == 1


@pytest.mark.anyio
async def test_credentials_come_from_the_provider_object(fake_github: FakeGitHub) -> None:
    asked: list[int | None] = []

    class Installation:
        async def token(self, installation_id: int | None = None) -> SecretStr | None:
            asked.append(installation_id)
            return SecretStr(f"inst-{installation_id}")

        async def app_login(self) -> str | None:
            return "pr-review[bot]"

    fake_github.set_pull("acme", "widget", 7, base_sha=BASE, head_sha=HEAD)
    settings = fake_github.settings(Path("unused"), token=GITHUB_TOKEN)
    assert isinstance(Installation(), Credentials)
    async with GitHubClient(settings, credentials=Installation()) as client:
        await fetch_metadata(_ref(fake_github), settings, client, installation_id=42)
        assert await client.login(42) == "pr-review[bot]"
    assert asked == [42]
    assert fake_github.api_requests()[0].authorization == "Bearer inst-42"
    assert not any(r.path.endswith("/user") for r in fake_github.api_requests())


@pytest.mark.anyio
async def test_token_credentials_never_show_the_token() -> None:
    credentials = TokenCredentials(SecretStr(GITHUB_TOKEN))
    assert GITHUB_TOKEN not in repr(credentials)
    assert GITHUB_TOKEN not in str(credentials)
    token = await credentials.token(7)
    assert token is not None
    assert token.get_secret_value() == GITHUB_TOKEN


@pytest.mark.anyio
async def test_a_url_on_another_origin_never_gets_the_token(fake_github: FakeGitHub) -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={})

    settings = fake_github.settings(Path("unused"), token=GITHUB_TOKEN)
    async with (
        httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http,
        GitHubClient(settings, http=http) as client,
    ):
        for url in ("https://evil.example/x", f"http://127.0.0.2:{fake_github.port}/api/v3/x"):
            with pytest.raises(GitHubUnavailable):
                await client.request("GET", url)
    assert seen == []
