"""Pull-request URLs (github/urls.py, specification §3): the accepted forms, their one
canonical spelling, and every rejection.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from pr_review_api.errors import InvalidPullRequestUrl
from pr_review_api.github.checkout import open_pull_request
from pr_review_api.github.urls import PullRequestRef, parse_pull_request_url
from pr_review_api.model import PullRequestInfo
from pr_review_api.settings import Settings
from tests.conftest import GITHUB_TOKEN, examples
from tests.fakes.github_server import FakeGitHub

CANONICAL = "https://github.com/acme/widget/pull/7"


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


@hypothesis_settings(
    max_examples=examples(100), suppress_health_check=[HealthCheck.function_scoped_fixture]
)
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


@hypothesis_settings(
    max_examples=examples(150), suppress_health_check=[HealthCheck.function_scoped_fixture]
)
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
