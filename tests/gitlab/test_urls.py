"""Merge-request URLs (gitlab/urls.py, specification §17): nested groups, the one canonical
spelling, GitLab's path rules, and every rejection before any network access."""

from __future__ import annotations

import pytest

from pr_review_api.errors import InvalidPullRequestUrl
from pr_review_api.gitlab.urls import (
    MergeRequestRef,
    is_merge_request_url,
    parse_merge_request_url,
)
from pr_review_api.settings import Settings

CANONICAL = "https://gitlab.com/acme/platform/widget/-/merge_requests/7"


def parse(url: str, settings: Settings | None = None) -> MergeRequestRef:
    return parse_merge_request_url(url, settings or Settings())


def rejected(url: str, settings: Settings | None = None) -> str:
    with pytest.raises(InvalidPullRequestUrl) as caught:
        parse(url, settings)
    return caught.value.message


@pytest.mark.parametrize(
    "url",
    [
        CANONICAL,
        CANONICAL + "/",
        CANONICAL + "/diffs",
        CANONICAL + "/diffs/",
        CANONICAL + "/commits?view=parallel#note_12",
        CANONICAL + "?tab=pipelines",
        "HTTPS://GitLab.com:443/acme/platform/widget/-/merge_requests/7",
    ],
)
def test_accepted_forms_are_normalised_to_one_url(url: str) -> None:
    ref = parse(url)
    assert ref.url.lower() == CANONICAL.lower()
    assert (ref.owner, ref.repo, ref.number) == ("acme/platform", "widget", 7)


def test_nested_groups_keep_the_full_namespace_and_report_the_forge() -> None:
    ref = parse("https://gitlab.com/a/b/c/d.e_f/my-project/-/merge_requests/12")
    assert ref.owner == "a/b/c/d.e_f"
    assert ref.project_path == "a/b/c/d.e_f/my-project"
    info = ref.info
    assert (info.forge, info.owner, info.repo, info.number) == (
        "gitlab",
        "a/b/c/d.e_f",
        "my-project",
        12,
    )


def test_api_and_git_urls_encode_the_project_path() -> None:
    settings = Settings(gitlab_server_url="http://127.0.0.1:8929/gitlab")
    ref = parse("http://127.0.0.1:8929/gitlab/grp/sub/proj/-/merge_requests/3", settings)
    assert ref.api_url(settings, "/notes") == (
        "http://127.0.0.1:8929/gitlab/api/v4/projects/grp%2Fsub%2Fproj/merge_requests/3/notes"
    )
    assert ref.git_url(settings) == "http://127.0.0.1:8929/gitlab/grp/sub/proj.git"
    own_api = Settings(gitlab_api_url="https://api.example.test/v4")
    ref = parse("https://gitlab.com/g/p/-/merge_requests/1", own_api)
    assert ref.project_api_url(own_api) == "https://api.example.test/v4/projects/g%2Fp"


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("https://github.com/acme/widget/-/merge_requests/7", "must be on https://gitlab.com"),
        ("http://gitlab.com/acme/widget/-/merge_requests/7", "must be on"),
        ("https://gitlab.com:8443/acme/widget/-/merge_requests/7", "must be on"),
        ("https://user@gitlab.com/acme/widget/-/merge_requests/7", "must be on"),
        ("https://gitlab.com/widget/-/merge_requests/7", "group"),
        ("https://gitlab.com/acme/widget/-/merge_requests/0", "positive"),
        ("https://gitlab.com/acme/widget/-/merge_requests/-1", "positive"),
        ("https://gitlab.com/acme/widget/-/merge_requests/99999999999", "positive"),
        ("https://gitlab.com/acme/widget/-/merge_requests/", "positive"),
        ("https://gitlab.com/acme/widget/-/issues/7", "must look like"),
        ("https://gitlab.com/acme/widget.git/-/merge_requests/7", "valid GitLab path"),
        ("https://gitlab.com/acme/feed.atom/-/merge_requests/7", "valid GitLab path"),
        ("https://gitlab.com/-x/widget/-/merge_requests/7", "valid GitLab path"),
        ("https://gitlab.com/acme/../widget/-/merge_requests/7", "valid GitLab path"),
        ("https://gitlab.com/acme//widget/-/merge_requests/7", "valid GitLab path"),
        ("https://gitlab.com/acme/-/widget/-/merge_requests/7", "valid GitLab path"),
        ("https://gitlab.com/ac%2fme/widget/-/merge_requests/7", "percent-encoding"),
        ("https://gitlab.com/acme/wid get/-/merge_requests/7", "not allowed"),
        ("https://gitlab.com/acme/widget/-/merge_requests/7\n", "not allowed"),
        ("https://gitlab.com/acme\\widget/-/merge_requests/7", "not allowed"),
        ("ftp://gitlab.com/acme/widget/-/merge_requests/7", "must be on"),
        ("gitlab.com/acme/widget/-/merge_requests/7", "absolute"),
        ("", "empty"),
        ("https://gitlab.com/" + "a/" * 3000 + "p/-/merge_requests/1", "too long"),
    ],
)
def test_everything_else_is_rejected_with_a_reason(url: str, says: str) -> None:
    assert says in rejected(url)


def test_namespaces_deeper_than_gitlab_allows_are_rejected() -> None:
    deep = "/".join(f"g{i}" for i in range(22))
    assert "group" in rejected(f"https://gitlab.com/{deep}/p/-/merge_requests/1")
    ok = "/".join(f"g{i}" for i in range(21))
    assert parse(f"https://gitlab.com/{ok}/p/-/merge_requests/1").owner == ok


def test_a_server_under_a_path_prefix_needs_that_prefix() -> None:
    settings = Settings(gitlab_server_url="https://code.example.test/gitlab")
    assert parse("https://code.example.test/gitlab/g/p/-/merge_requests/2", settings).number == 2
    outside = "https://code.example.test/g/p/-/merge_requests/2"
    assert "must look like" in rejected(outside, settings)


def test_the_shape_tells_the_forges_apart() -> None:
    assert is_merge_request_url(CANONICAL)
    assert is_merge_request_url(CANONICAL + "?x=1")
    assert not is_merge_request_url("https://github.com/acme/widget/pull/7")
    assert not is_merge_request_url("https://github.com/acme/widget/pull/7?q=/-/merge_requests/")
    assert not is_merge_request_url(None)
