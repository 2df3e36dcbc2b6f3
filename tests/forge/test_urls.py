"""forge/urls.py: a change URL goes to the forge its shape names, checked by that forge's rules."""

from __future__ import annotations

import pytest

from pr_review_api.errors import InvalidPullRequestUrl
from pr_review_api.forge.urls import change_key, forge_of, parse_change_url
from pr_review_api.gitea.urls import PullRequestRef as GiteaPullRequestRef
from pr_review_api.github.urls import PullRequestRef
from pr_review_api.gitlab.urls import MergeRequestRef
from pr_review_api.settings import Settings


def test_each_url_goes_to_its_forge_even_on_one_host() -> None:
    settings = Settings(
        github_server_url="http://127.0.0.1:9000", gitlab_server_url="http://127.0.0.1:9000"
    )
    pull = parse_change_url("http://127.0.0.1:9000/acme/widget/pull/4/files", settings)
    merge = parse_change_url("http://127.0.0.1:9000/acme/ui/widget/-/merge_requests/4", settings)
    assert isinstance(pull, PullRequestRef)
    assert pull.info.forge == "github"
    assert pull.url == "http://127.0.0.1:9000/acme/widget/pull/4"
    assert isinstance(merge, MergeRequestRef)
    assert merge.info.forge == "gitlab"


def test_a_url_on_neither_server_is_rejected_as_github_rejects_it() -> None:
    with pytest.raises(InvalidPullRequestUrl) as caught:
        parse_change_url("https://example.test/acme/widget/pull/1", Settings())
    assert caught.value.message == "The pull request URL must be on https://github.com."
    with pytest.raises(InvalidPullRequestUrl):
        parse_change_url("https://example.test/acme/widget/-/merge_requests/1", Settings())


def test_a_changes_key_names_its_forge_and_ignores_case() -> None:
    pull = "https://github.com/Acme/Widget/pull/7"
    merge = "https://gitlab.com/Acme/Widget/-/merge_requests/7"
    assert change_key(pull, "Acme", "Widget", 7) == "acme/widget#7"
    assert change_key(merge, "Acme", "Widget", 7) == "gitlab:acme/widget!7"


GITEA = "http://127.0.0.1:9001/git"


def test_a_gitea_url_goes_to_gitea_with_its_prefix_and_port() -> None:
    settings = Settings(gitea_server_url=GITEA)
    ref = parse_change_url(f"{GITEA}/acme/widget/pulls/4/files?style=split#top", settings)
    assert isinstance(ref, GiteaPullRequestRef)
    assert ref.url == f"{GITEA}/acme/widget/pulls/4"
    assert ref.info.forge == "gitea"
    assert forge_of(ref.url) == "gitea"
    assert change_key(ref.url, "Acme", "Widget", 4) == "gitea:acme/widget#4"
    # A GitHub pull request of a repository named `pulls` is still GitHub's.
    assert forge_of("https://github.com/pulls/pulls/pull/4") == "github"


def test_a_gitea_shaped_url_on_another_host_is_rejected() -> None:
    settings = Settings(gitea_server_url=GITEA)
    for url in (
        "http://127.0.0.1:9002/git/acme/widget/pulls/4",  # another port
        "http://example.test/git/acme/widget/pulls/4",  # another host
        "http://127.0.0.1:9001/acme/widget/pulls/4",  # outside the path prefix
    ):
        with pytest.raises(InvalidPullRequestUrl):
            parse_change_url(url, settings)


def test_without_gitea_server_url_no_url_is_routed_to_gitea() -> None:
    with pytest.raises(InvalidPullRequestUrl) as caught:
        parse_change_url(f"{GITEA}/acme/widget/pulls/4", Settings())
    # GitHub's parser answered: the URL never reached Gitea's rules.
    assert caught.value.message == "The pull request URL must be on https://github.com."
