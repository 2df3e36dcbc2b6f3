"""The Gitea REST client (gitea/client.py) against the fake Gitea on loopback: the token goes as
`Authorization: token` to Gitea's two origins only, redirects are never followed, `page`/`limit`
paging keeps to its budget and never follows a `Link` URL, statuses map to the contract's
errors with fixed sentences."""

from __future__ import annotations

import logging
import socket
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from pr_review_api.errors import ConfigurationError, GiteaUnavailable, PullRequestNotFound
from pr_review_api.gitea import client as gitea_client
from pr_review_api.gitea.client import (
    NOT_FOUND_MESSAGE,
    PAGE_LIMIT,
    TOKEN_NEEDED_MESSAGE,
    TOKEN_REFUSED_MESSAGE,
    GiteaClient,
    GiteaResponse,
    has_next_page,
    status_error,
)
from pr_review_api.settings import Settings
from tests.conftest import GITEA_TOKEN
from tests.fakes.gitea_reviews import GiteaWrites
from tests.fakes.gitea_server import FakeGitea
from tests.fakes.provider_server import gzip_bomb_bytes
from tests.gitea.support import PATH, REVIEWER, client_for, pull_ref

pytestmark = pytest.mark.anyio


async def error_of(fake: FakeGitea, url: str, token: str | None = GITEA_TOKEN) -> Exception:
    async with client_for(fake, token) as gitea:
        with pytest.raises((GiteaUnavailable, PullRequestNotFound)) as caught:
            await gitea.get_json(url)
    return caught.value


async def test_the_token_goes_as_authorization_token(fake_gitea: FakeGitea) -> None:
    fake_gitea.set_document(PATH, 3)
    async with client_for(fake_gitea) as gitea:
        document = await gitea.get_json(pull_ref(fake_gitea).api_url())
    assert document["number"] == 3
    (request,) = fake_gitea.requests
    assert request.path == "/git/api/v1/repos/acme/widget/pulls/3"
    assert request.authorization == f"token {GITEA_TOKEN}"
    assert request.headers["user-agent"].startswith("pr-review/")


async def test_no_authorization_without_a_token(fake_gitea: FakeGitea) -> None:
    fake_gitea.set_document(PATH, 3)
    async with client_for(fake_gitea, token=None) as gitea:
        await gitea.get_json(pull_ref(fake_gitea).api_url())
    (request,) = fake_gitea.requests
    assert request.authorization is None


async def test_the_token_reaches_both_origins_and_no_other(
    fake_gitea: FakeGitea, tmp_path: Path
) -> None:
    """GITEA_API_URL on its own origin: the token goes there and to GITEA_SERVER_URL's origin;
    a URL on a third origin is refused before anything is sent."""
    api = FakeGitea(tmp_path / "api")
    other = FakeGitea(tmp_path / "other")
    try:
        for fake in (fake_gitea, api):
            fake.set_document(PATH, 3)
        async with client_for(fake_gitea, gitea_api_url=api.api_url) as gitea:
            api.add_token(GITEA_TOKEN, REVIEWER)
            await gitea.get_json(gitea.api_url("/repos/acme/widget/pulls/3"))
            await gitea.get_json(f"{fake_gitea.api_url}/repos/acme/widget/pulls/3")
            with pytest.raises(GiteaUnavailable) as caught:
                await gitea.get_json(other.api_url + "/user")
        assert [r.authorization for r in api.requests] == [f"token {GITEA_TOKEN}"]
        assert [r.authorization for r in fake_gitea.requests] == [f"token {GITEA_TOKEN}"]
        assert other.requests == []
        assert GITEA_TOKEN not in caught.value.message
    finally:
        api.close()
        other.close()


async def test_a_redirect_is_not_followed(fake_gitea: FakeGitea, tmp_path: Path) -> None:
    elsewhere = FakeGitea(tmp_path / "elsewhere")
    try:
        fake_gitea.api_redirect = f"{elsewhere.api_url}/user"
        error = await error_of(fake_gitea, pull_ref(fake_gitea).api_url())
        assert isinstance(error, GiteaUnavailable)
        assert error.message == "Gitea redirected the request; it was not followed."
        assert elsewhere.requests == []
    finally:
        elsewhere.close()


async def test_a_url_with_user_info_is_refused(fake_gitea: FakeGitea) -> None:
    url = pull_ref(fake_gitea).api_url().replace("http://", "http://someone@")
    error = await error_of(fake_gitea, url)
    assert isinstance(error, GiteaUnavailable)
    assert fake_gitea.requests == []


@pytest.mark.parametrize(
    ("status", "kind", "message"),
    [
        (404, PullRequestNotFound, NOT_FOUND_MESSAGE),
        (410, PullRequestNotFound, NOT_FOUND_MESSAGE),
        (401, GiteaUnavailable, TOKEN_REFUSED_MESSAGE),
        (403, GiteaUnavailable, "Gitea refused the request (status 403): the token lacks a scope."),
        (500, GiteaUnavailable, "Gitea answered with a server error (status 500)."),
        (503, GiteaUnavailable, "Gitea answered with a server error (status 503)."),
        (418, GiteaUnavailable, "Gitea answered with an unexpected status (418)."),
    ],
)
async def test_statuses_map_to_fixed_sentences(
    fake_gitea: FakeGitea, status: int, kind: type[Exception], message: str
) -> None:
    fake_gitea.respond(PATH, 3, status, '{"message": "secret-body-text-5ac1"}')
    error = await error_of(fake_gitea, pull_ref(fake_gitea).api_url())
    assert isinstance(error, kind)
    assert error.message == message  # type: ignore[attr-defined]
    assert error.status == (404 if kind is PullRequestNotFound else 502)  # type: ignore[attr-defined]


def test_a_rate_limit_says_when_to_try_again() -> None:
    response = GiteaResponse(429, httpx.Headers({"Retry-After": "30"}), b"")
    error = status_error(response, anonymous=False)
    assert error.code == "gitea_unavailable"
    assert error.message == "Gitea's API rate limit was reached; try again in 30 seconds."
    anonymous = status_error(GiteaResponse(401, httpx.Headers(), b""), anonymous=True)
    assert anonymous.message == TOKEN_NEEDED_MESSAGE


async def test_an_unknown_token_is_refused_on_every_endpoint(fake_gitea: FakeGitea) -> None:
    fake_gitea.set_document(PATH, 3)
    error = await error_of(fake_gitea, pull_ref(fake_gitea).api_url(), token="not-a-token")
    assert isinstance(error, GiteaUnavailable)
    assert error.message == TOKEN_REFUSED_MESSAGE


async def test_a_private_repository_is_not_found_without_access(fake_gitea: FakeGitea) -> None:
    fake_gitea.pull_request("acme/secret", 3, private=True)
    error = await error_of(fake_gitea, pull_ref(fake_gitea, path="acme/secret").api_url())
    assert isinstance(error, PullRequestNotFound)


async def five_reviews(
    fake: FakeGitea, writes: GiteaWrites, page_size: int, max_pages: int
) -> tuple[list[Any], bool]:
    """A listing of five reviews, `page_size` a page, read within `max_pages` pages."""
    fake.pull_request(PATH, 3)
    fake.max_items = page_size
    writes.reviews[(fake.repository(PATH).id, 3)] = [{"id": n} for n in range(5)]
    async with client_for(fake) as gitea:
        return await gitea.paginated(pull_ref(fake).api_url("/reviews"), max_pages=max_pages)


async def test_pages_follow_the_link_header_with_page_and_limit(
    fake_gitea: FakeGitea, fake_gitea_writes: GiteaWrites
) -> None:
    items, complete = await five_reviews(fake_gitea, fake_gitea_writes, 2, 9)
    assert [item["id"] for item in items] == [0, 1, 2, 3, 4]
    assert complete
    queries = [r.query for r in fake_gitea.api_requests()]
    assert queries == [f"limit={PAGE_LIMIT}&page={n}" for n in (1, 2, 3)]


async def test_the_page_budget_stops_a_long_listing(
    fake_gitea: FakeGitea, fake_gitea_writes: GiteaWrites
) -> None:
    items, complete = await five_reviews(fake_gitea, fake_gitea_writes, 1, 2)
    assert (len(items), complete) == (2, False)
    assert len(fake_gitea.api_requests()) == 2


def test_only_a_next_relation_names_a_next_page() -> None:
    def link(value: str) -> httpx.Headers:
        return httpx.Headers({"Link": value})

    assert has_next_page(link('<https://x/a?page=2>; rel="next",<https://x/a?page=9>; rel="last"'))
    assert has_next_page(link("<https://x/a?page=2>; rel=next"))
    assert not has_next_page(
        link('<https://x/a?page=9>; rel="last",<https://x/a?page=1>; rel="first"')
    )
    assert not has_next_page(link('<https://x/next>; rel="prev"'))
    assert not has_next_page(httpx.Headers())


async def test_a_hostile_link_is_never_followed(fake_gitea: FakeGitea, tmp_path: Path) -> None:
    """A `Link` whose URL points elsewhere: we ask the next page of OUR URL, never its URL."""
    elsewhere = FakeGitea(tmp_path / "elsewhere")
    try:
        repo = fake_gitea.repository(PATH)
        fake_gitea.pull_request(PATH, 3)

        def route(fake, handler, record, repository, tail, body):  # type: ignore[no-untyped-def]
            if tail == ["pulls", "3", "reviews"]:
                headers = {"Link": f'<{elsewhere.api_url}/user>; rel="next"'}
                handler.send_json(record, 200, [{"id": 1}], headers)
                return True
            return False

        fake_gitea.routes.append(route)
        async with client_for(fake_gitea) as gitea:
            items, complete = await gitea.paginated(
                pull_ref(fake_gitea).api_url("/reviews"), max_pages=3
            )
        assert (len(items), complete) == (3, False)
        assert elsewhere.requests == []
        assert repo.id == 1
    finally:
        elsewhere.close()


async def test_a_listing_that_is_not_a_list_is_refused(fake_gitea: FakeGitea) -> None:
    fake_gitea.set_document(PATH, 3)
    async with client_for(fake_gitea) as gitea:
        with pytest.raises(GiteaUnavailable, match="not a list"):
            await gitea.paginated(pull_ref(fake_gitea).api_url(), max_pages=2)


async def test_our_login_is_asked_once(fake_gitea: FakeGitea) -> None:
    async with client_for(fake_gitea) as gitea:
        assert await gitea.login() == REVIEWER
        assert await gitea.login() == REVIEWER
    assert [r.path for r in fake_gitea.requests] == ["/git/api/v1/user"]


async def test_our_login_without_a_token_is_refused(fake_gitea: FakeGitea) -> None:
    async with client_for(fake_gitea, token=None) as gitea:
        with pytest.raises(GiteaUnavailable) as caught:
            await gitea.login()
    assert caught.value.message == TOKEN_NEEDED_MESSAGE


async def test_a_json_body_is_sent_compact(
    fake_gitea: FakeGitea, fake_gitea_writes: GiteaWrites
) -> None:
    pull = fake_gitea.pull_request(PATH, 3)
    async with client_for(fake_gitea) as gitea:
        response = await gitea.request(
            "POST",
            pull_ref(fake_gitea).repo_api_url(f"/statuses/{pull.head_sha}"),
            json={"state": "pending", "context": "pr-review"},
        )
    assert response.status == 201
    (request,) = fake_gitea.api_requests()
    assert request.body == b'{"state":"pending","context":"pr-review"}'
    assert request.headers["content-type"] == "application/json"
    assert fake_gitea_writes.statuses[(pull.repo.id, pull.head_sha)][0]["status"] == "pending"


async def test_a_refused_port_is_gitea_unavailable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = Settings(gitea_server_url=f"http://127.0.0.1:{port}")
    async with GiteaClient(settings) as gitea:
        with pytest.raises(GiteaUnavailable) as caught:
            await gitea.get_json(gitea.api_url("/user"))
    assert caught.value.message == "Gitea could not be reached."


async def test_a_slow_answer_is_gitea_unavailable(
    fake_gitea: FakeGitea, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gitea_client.GiteaClient, "request_timeout_seconds", 0.2)
    release = threading.Event()

    def route(fake, handler, record, repository, tail, body):  # type: ignore[no-untyped-def]
        release.wait(5)  # longer than the client waits; released when the test ends
        handler.send_json(record, 200, [])
        return True

    fake_gitea.repository(PATH)
    fake_gitea.routes.append(route)
    try:
        error = await error_of(fake_gitea, pull_ref(fake_gitea).api_url("/reviews"))
    finally:
        release.set()
    assert error.message == "Gitea did not answer in time."  # type: ignore[attr-defined]


async def test_a_gzip_bomb_is_refused_at_the_cap(fake_gitea: FakeGitea) -> None:
    def route(fake, handler, record, repository, tail, body):  # type: ignore[no-untyped-def]
        handler.send(record, 200, gzip_bomb_bytes(), {"Content-Encoding": "gzip"})
        return True

    fake_gitea.repository(PATH)
    fake_gitea.routes.append(route)
    error = await error_of(fake_gitea, pull_ref(fake_gitea).api_url("/reviews"))
    assert error.message == "Gitea's answer was larger than allowed."  # type: ignore[attr-defined]


async def test_the_token_is_never_logged(
    fake_gitea: FakeGitea, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    fake_gitea.set_document(PATH, 3)
    fake_gitea.respond(PATH, 4, 500)
    async with client_for(fake_gitea) as gitea:
        await gitea.get_json(pull_ref(fake_gitea).api_url())
        with pytest.raises(GiteaUnavailable):
            await gitea.get_json(pull_ref(fake_gitea, 4).api_url())
    assert caplog.records
    assert all(GITEA_TOKEN not in r.getMessage() + repr(r.args) for r in caplog.records)


def test_the_default_token_is_the_settings_and_a_server_is_required() -> None:
    token = SecretStr(GITEA_TOKEN)
    settings = Settings(gitea_server_url="https://gitea.example.test", gitea_token=token)
    assert GiteaClient(settings).token == settings.gitea_token
    assert GiteaClient(settings, token=None).anonymous
    with pytest.raises(ConfigurationError, match="GITEA_SERVER_URL"):
        GiteaClient(Settings())
