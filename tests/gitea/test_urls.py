"""Gitea pull-request URLs (gitea/urls.py, specification §19): the one canonical spelling on a
self-hosted server (path prefix, any port), Gitea's name rules, and every rejection before any
network access."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pr_review_api.errors import InvalidPullRequestUrl
from pr_review_api.gitea.urls import (
    PullRequestRef,
    is_pull_request_url,
    is_valid_owner,
    is_valid_repo_name,
    parse_pull_request_url,
)
from pr_review_api.settings import Settings

SERVER = "http://127.0.0.1:3000/git"
SETTINGS = Settings(gitea_server_url=SERVER)
CANONICAL = f"{SERVER}/acme/widget/pulls/7"


def parse(url: str, settings: Settings = SETTINGS) -> PullRequestRef:
    return parse_pull_request_url(url, settings)


def rejected(url: str, settings: Settings = SETTINGS) -> str:
    with pytest.raises(InvalidPullRequestUrl) as caught:
        parse(url, settings)
    return caught.value.message


@pytest.mark.parametrize(
    "url",
    [
        CANONICAL,
        CANONICAL + "/",
        CANONICAL + "/files",
        CANONICAL + "/files/",
        CANONICAL + "/commits?style=split#issuecomment-12",
        CANONICAL + "/checks",
        CANONICAL + "?tab=files",
        CANONICAL + "#diff-abc",
        "HTTP://127.0.0.1:3000/git/acme/widget/pulls/7",
    ],
)
def test_accepted_forms_are_normalised_to_one_url(url: str) -> None:
    ref = parse(url)
    assert ref.url == CANONICAL
    assert (ref.owner, ref.repo, ref.number) == ("acme", "widget", 7)


def test_the_reference_builds_every_url_on_the_two_origins() -> None:
    ref = parse(CANONICAL)
    assert ref.api_url("/reviews") == f"{SERVER}/api/v1/repos/acme/widget/pulls/7/reviews"
    assert ref.issue_api_url("/comments") == f"{SERVER}/api/v1/repos/acme/widget/issues/7/comments"
    assert ref.repo_api_url("/statuses/abc") == f"{SERVER}/api/v1/repos/acme/widget/statuses/abc"
    assert ref.git_url == f"{SERVER}/acme/widget.git"
    assert ref.head_ref == "refs/pull/7/head"
    info = ref.info
    assert (info.forge, info.url, info.owner, info.repo, info.number) == (
        "gitea",
        CANONICAL,
        "acme",
        "widget",
        7,
    )
    assert ref.dismissals_key == "gitea:acme/widget"
    own_api = Settings(gitea_server_url=SERVER, gitea_api_url="https://api.example.test/v1")
    assert parse(CANONICAL, own_api).api_url() == (
        "https://api.example.test/v1/repos/acme/widget/pulls/7"
    )


def test_a_default_port_and_no_prefix_work_too() -> None:
    settings = Settings(gitea_server_url="https://codeberg.org")
    ref = parse("https://codeberg.org:443/forgejo/forgejo/pulls/4321/files", settings)
    assert ref.url == "https://codeberg.org/forgejo/forgejo/pulls/4321"
    assert ref.api_url() == "https://codeberg.org/api/v1/repos/forgejo/forgejo/pulls/4321"


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://127.0.0.1:3001/git/acme/widget/pulls/7", "must be on"),
        ("https://127.0.0.1:3000/git/acme/widget/pulls/7", "must be on"),
        ("http://localhost:3000/git/acme/widget/pulls/7", "must be on"),
        ("http://user@127.0.0.1:3000/git/acme/widget/pulls/7", "must be on"),
        ("http://127.0.0.1:3000/acme/widget/pulls/7", "must look like"),  # no prefix
        ("http://127.0.0.1:3000/gitx/acme/widget/pulls/7", "must look like"),
        (f"{SERVER}/acme/widget/pull/7", "must look like"),  # GitHub's shape
        (f"{SERVER}/acme/widget/issues/7", "must look like"),
        (f"{SERVER}/acme/widget/pulls/7.diff", "positive"),
        (f"{SERVER}/acme/widget/pulls/7/files/abc", "must look like"),
        (f"{SERVER}/acme/widget/pulls/0", "positive"),
        (f"{SERVER}/acme/widget/pulls/-1", "positive"),
        (f"{SERVER}/acme/widget/pulls/007", "positive"),
        (f"{SERVER}/acme/widget/pulls/99999999999999999999", "positive"),
        (f"{SERVER}/acme/widget/pulls/", "positive"),
        (f"{SERVER}/acme/widget.git/pulls/7", "valid Gitea name"),
        (f"{SERVER}/acme/widget.wiki/pulls/7", "valid Gitea name"),
        (f"{SERVER}/acme/Feed.RSS/pulls/7", "valid Gitea name"),
        (f"{SERVER}/acme/-/pulls/7", "valid Gitea name"),
        (f"{SERVER}/acme/../pulls/7", "valid Gitea name"),
        (f"{SERVER}/a..b/widget/pulls/7", "valid Gitea name"),
        (f"{SERVER}/acme/wid..get/pulls/7", "valid Gitea name"),
        (f"{SERVER}//widget/pulls/7", "valid Gitea name"),
        (f"{SERVER}/{'a' * 41}/widget/pulls/7", "valid Gitea name"),
        (f"{SERVER}/acme/{'r' * 101}/pulls/7", "valid Gitea name"),
        (f"{SERVER}/ac%2fme/widget/pulls/7", "percent-encoding"),
        (f"{SERVER}/acme/wid get/pulls/7", "not allowed"),
        (f"{SERVER}/acme/widget/pulls/7\n", "not allowed"),
        (f"{SERVER}/acme/wïdget/pulls/7", "not allowed"),
        ("127.0.0.1:3000/git/acme/widget/pulls/7", "absolute"),
        ("", "empty"),
    ],
)
def test_everything_else_is_rejected_with_a_reason(url: str, says: str) -> None:
    assert says in rejected(url)


def test_without_a_gitea_server_nothing_is_a_gitea_url() -> None:
    settings = Settings()
    assert "GITEA_SERVER_URL" in rejected(CANONICAL, settings)
    assert not is_pull_request_url(CANONICAL, settings)


def test_the_shape_is_read_under_the_configured_server_only() -> None:
    assert is_pull_request_url(CANONICAL, SETTINGS)
    assert is_pull_request_url(CANONICAL + "/files?x=1", SETTINGS)
    assert not is_pull_request_url("https://github.com/acme/widget/pull/7", SETTINGS)
    assert not is_pull_request_url(f"{SERVER}/acme/widget/issues/7?q=/pulls/", SETTINGS)
    assert not is_pull_request_url(None, SETTINGS)


def test_name_rules_follow_gitea() -> None:
    assert is_valid_repo_name(".dotfiles")
    assert is_valid_repo_name("my_repo-2.0")
    assert not is_valid_repo_name("x.atom")
    assert is_valid_owner("old_name-")  # made under Gitea's older, laxer rule
    assert not is_valid_owner(".")
    assert not is_valid_owner("a/b")


_NAME_CHARS = "abcXYZ019_-."
owners = st.text(_NAME_CHARS, min_size=1, max_size=40).filter(is_valid_owner)
repos = st.text(_NAME_CHARS, min_size=1, max_size=100).filter(is_valid_repo_name)
indexes = st.integers(min_value=1, max_value=2**63 - 1)
tails = st.sampled_from(["", "/", "/files", "/commits/", "/checks"])
queries = st.sampled_from(["", "?a=1", "?tab=files&x=/pulls/2", "#c-3", "?q=1#f"])


@given(owner=owners, repo=repos, index=indexes, tail=tails, query=queries)
def test_any_valid_url_parses_to_its_canonical_form(
    owner: str, repo: str, index: int, tail: str, query: str
) -> None:
    ref = parse(f"{SERVER}/{owner}/{repo}/pulls/{index}{tail}{query}")
    assert (ref.owner, ref.repo, ref.number) == (owner, repo, index)
    assert ref.url == f"{SERVER}/{owner}/{repo}/pulls/{index}"
    assert parse(ref.url) == ref


@given(
    st.one_of(
        st.text(max_size=200),
        st.builds(lambda s: f"{SERVER}/{s}", st.text(max_size=120)),
        st.builds(lambda s: f"{SERVER}/a/b/pulls/{s}", st.text(max_size=40)),
    )
)
def test_arbitrary_input_is_either_rejected_or_canonical(url: str) -> None:
    try:
        ref = parse(url)
    except InvalidPullRequestUrl:
        return  # the one error a bad URL may raise
    assert is_valid_owner(ref.owner)
    assert is_valid_repo_name(ref.repo)
    assert ref.number >= 1
    assert parse(ref.url) == ref
