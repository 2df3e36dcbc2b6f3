"""The GitLab REST client (gitlab/client.py) against the fake GitLab on loopback: the token
reaches only GitLab's two origins, redirects are never followed, `X-Next-Page` pagination keeps
to its page budget, statuses map to the contract's errors with fixed sentences.
"""

from __future__ import annotations

import logging
import socket
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from pr_review_api.errors import GitLabUnavailable, PullRequestNotFound
from pr_review_api.gitlab import client as gitlab_client
from pr_review_api.gitlab.client import (
    NOT_FOUND_MESSAGE,
    TOKEN_NEEDED_MESSAGE,
    TOKEN_REFUSED_MESSAGE,
    GitLabClient,
    GitLabResponse,
    status_error,
)
from pr_review_api.gitlab.urls import parse_merge_request_url
from pr_review_api.settings import Settings
from tests.conftest import GITLAB_TOKEN
from tests.fakes.forge_server import RecordedRequest
from tests.fakes.gitlab_server import FakeGitLab, Project, _Handler
from tests.fakes.provider_server import gzip_bomb_bytes

PATH = "grp/sub/project"
SECRET_BODY = "secret-body-text-5ac1"


def client_for(
    fake: FakeGitLab, token: str | None = GITLAB_TOKEN, **overrides: Any
) -> GitLabClient:
    """A client of `fake`; GITLAB_TOKEN is a token the fake knows (user `reviewer`)."""
    fake.users.setdefault(GITLAB_TOKEN, "reviewer")
    return GitLabClient(fake.settings(Path("unused"), token=token, **overrides))


def mr_api_url(fake: FakeGitLab, iid: int = 3) -> str:
    settings = fake.settings(Path("unused"))
    ref = parse_merge_request_url(f"{fake.server_url}/{PATH}/-/merge_requests/{iid}", settings)
    return ref.api_url(settings)


async def error_of(fake: FakeGitLab, url: str, token: str | None = GITLAB_TOKEN) -> Exception:
    async with client_for(fake, token) as gitlab:
        with pytest.raises((GitLabUnavailable, PullRequestNotFound)) as caught:
            await gitlab.get_json(url)
    return caught.value


@pytest.mark.anyio
async def test_token_goes_as_private_token_to_the_api(fake_gitlab: FakeGitLab) -> None:
    fake_gitlab.users[GITLAB_TOKEN] = "reviewer"
    fake_gitlab.set_document(PATH, 3)
    async with client_for(fake_gitlab) as gitlab:
        document = await gitlab.get_json(mr_api_url(fake_gitlab))
    assert document["iid"] == 3
    (request,) = fake_gitlab.requests
    assert request.path == "/gitlab/api/v4/projects/grp%2Fsub%2Fproject/merge_requests/3"
    assert request.private_token == GITLAB_TOKEN
    assert "authorization" not in request.headers
    assert request.headers["user-agent"].startswith("pr-review/")


@pytest.mark.anyio
async def test_no_token_header_without_a_token(fake_gitlab: FakeGitLab) -> None:
    fake_gitlab.set_document(PATH, 3)
    async with client_for(fake_gitlab, token=None) as gitlab:
        await gitlab.get_json(mr_api_url(fake_gitlab))
    (request,) = fake_gitlab.requests
    assert request.private_token is None


@pytest.mark.anyio
async def test_token_reaches_both_origins_and_no_other(
    fake_gitlab: FakeGitLab, tmp_path: Path
) -> None:
    """GITLAB_API_URL on its own origin: the token goes there and to GITLAB_SERVER_URL's origin;
    a URL on a third origin is refused before anything is sent."""
    api = FakeGitLab(tmp_path / "api")
    other = FakeGitLab(tmp_path / "other")
    try:
        for fake in (fake_gitlab, api):
            fake.users[GITLAB_TOKEN] = "reviewer"
            fake.set_document(PATH, 3)
        async with client_for(fake_gitlab, gitlab_api_url=api.api_url) as gitlab:
            await gitlab.get_json(gitlab.api_url("/projects/grp%2Fsub%2Fproject/merge_requests/3"))
            await gitlab.get_json(mr_api_url(fake_gitlab))  # GITLAB_SERVER_URL's origin
            with pytest.raises(GitLabUnavailable) as caught:
                await gitlab.get_json(other.api_url + "/user")
        assert [r.private_token for r in api.requests] == [GITLAB_TOKEN]
        assert [r.private_token for r in fake_gitlab.requests] == [GITLAB_TOKEN]
        assert other.requests == []
        assert GITLAB_TOKEN not in caught.value.message
    finally:
        api.close()
        other.close()


@pytest.mark.anyio
async def test_a_redirect_is_not_followed(fake_gitlab: FakeGitLab, tmp_path: Path) -> None:
    elsewhere = FakeGitLab(tmp_path / "elsewhere")
    try:
        fake_gitlab.users[GITLAB_TOKEN] = "reviewer"
        fake_gitlab.api_redirect = f"{elsewhere.api_url}/user"
        error = await error_of(fake_gitlab, mr_api_url(fake_gitlab))
        assert isinstance(error, GitLabUnavailable)
        assert error.message == "GitLab redirected the request; it was not followed."
        assert len(fake_gitlab.requests) == 1
        assert elsewhere.requests == []
    finally:
        elsewhere.close()


@pytest.mark.anyio
async def test_a_url_with_user_info_is_refused(fake_gitlab: FakeGitLab) -> None:
    url = mr_api_url(fake_gitlab).replace("http://", "http://user:pass@")
    error = await error_of(fake_gitlab, url)
    assert isinstance(error, GitLabUnavailable)
    assert fake_gitlab.requests == []


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("status", "token", "kind", "message"),
    [
        (404, GITLAB_TOKEN, PullRequestNotFound, NOT_FOUND_MESSAGE),
        (410, GITLAB_TOKEN, PullRequestNotFound, NOT_FOUND_MESSAGE),
        (403, GITLAB_TOKEN, PullRequestNotFound, NOT_FOUND_MESSAGE),
        (401, GITLAB_TOKEN, GitLabUnavailable, TOKEN_REFUSED_MESSAGE),
        (401, None, GitLabUnavailable, TOKEN_NEEDED_MESSAGE),
        (500, GITLAB_TOKEN, GitLabUnavailable, "GitLab answered with a server error (status 500)."),
        (503, None, GitLabUnavailable, "GitLab answered with a server error (status 503)."),
        (418, GITLAB_TOKEN, GitLabUnavailable, "GitLab answered with an unexpected status (418)."),
        (
            301,
            GITLAB_TOKEN,
            GitLabUnavailable,
            "GitLab redirected the request; it was not followed.",
        ),
    ],
)
async def test_statuses_map_to_fixed_sentences(
    fake_gitlab: FakeGitLab,
    status: int,
    token: str | None,
    kind: type[Exception],
    message: str,
) -> None:
    fake_gitlab.users[GITLAB_TOKEN] = "reviewer"
    body = f'{{"message":"{SECRET_BODY} {GITLAB_TOKEN}"}}'
    fake_gitlab.respond(PATH, 3, status, body, {"Location": f"{fake_gitlab.api_url}/x"})
    error = await error_of(fake_gitlab, mr_api_url(fake_gitlab), token)
    assert type(error) is kind
    assert str(error) == message
    assert SECRET_BODY not in str(error)
    assert GITLAB_TOKEN not in str(error)


@pytest.mark.anyio
async def test_rate_limit_says_when_to_try_again(fake_gitlab: FakeGitLab) -> None:
    fake_gitlab.respond(PATH, 3, 429, "{}", {"Retry-After": "42"})
    error = await error_of(fake_gitlab, mr_api_url(fake_gitlab), None)
    assert isinstance(error, GitLabUnavailable)
    assert error.code == "gitlab_unavailable"
    assert error.status == 502
    assert error.message == "GitLab's API rate limit was reached; try again in 42 seconds."


def test_a_refused_write_is_not_a_missing_merge_request() -> None:
    """403 means "not visible" only on a read; a refused write is GitLab refusing it."""
    response = GitLabResponse(403, httpx.Headers(), b"")
    assert isinstance(status_error(response, anonymous=False), PullRequestNotFound)
    error = status_error(response, anonymous=False, read=False)
    assert isinstance(error, GitLabUnavailable)
    assert error.message == "GitLab refused the request (status 403)."


@pytest.mark.anyio
async def test_an_unknown_token_is_refused_on_every_endpoint(fake_gitlab: FakeGitLab) -> None:
    fake_gitlab.set_document(PATH, 3)
    error = await error_of(fake_gitlab, mr_api_url(fake_gitlab), "glpat-not-known")
    assert error.message == TOKEN_REFUSED_MESSAGE  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_a_private_project_without_a_token_is_a_401(fake_gitlab: FakeGitLab) -> None:
    fake_gitlab.project(PATH, private=True)
    fake_gitlab.set_document(PATH, 3)
    error = await error_of(fake_gitlab, mr_api_url(fake_gitlab), None)
    assert isinstance(error, GitLabUnavailable)
    assert error.message == TOKEN_NEEDED_MESSAGE
    assert fake_gitlab.requests[0].status == 401


@pytest.mark.anyio
async def test_pages_follow_x_next_page_until_it_is_empty(fake_gitlab: FakeGitLab) -> None:
    for iid in range(1, 6):
        fake_gitlab.set_document(PATH, iid)
    fake_gitlab.page_size = 2
    url = mr_api_url(fake_gitlab).rsplit("/", 1)[0]
    async with client_for(fake_gitlab) as gitlab:
        items, complete = await gitlab.paginated(url, max_pages=10)
    assert [item["iid"] for item in items] == [1, 2, 3, 4, 5]
    assert complete
    queries = [r.query for r in fake_gitlab.requests]
    assert queries == [f"per_page=100&page={page}" for page in (1, 2, 3)]


@pytest.mark.anyio
async def test_the_page_budget_stops_a_long_listing(fake_gitlab: FakeGitLab) -> None:
    for iid in range(1, 6):
        fake_gitlab.set_document(PATH, iid)
    fake_gitlab.page_size = 2
    url = mr_api_url(fake_gitlab).rsplit("/", 1)[0]
    async with client_for(fake_gitlab) as gitlab:
        items, complete = await gitlab.paginated(url, max_pages=2)
    assert [item["iid"] for item in items] == [1, 2, 3, 4]
    assert not complete
    assert len(fake_gitlab.requests) == 2


@pytest.mark.anyio
@pytest.mark.parametrize("total_pages", [True, False])
async def test_a_long_listing_read_at_both_ends_is_its_first_and_newest_pages(
    fake_gitlab: FakeGitLab, total_pages: bool
) -> None:
    for iid in range(1, 10):
        fake_gitlab.set_document(PATH, iid)
    fake_gitlab.page_size = 2  # five pages
    if not total_pages:  # GitLab leaves X-Total-Pages out past 10,000 items: pages in order
        fake_gitlab.omit_total_pages = True
    url = mr_api_url(fake_gitlab).rsplit("/", 1)[0]
    async with client_for(fake_gitlab) as gitlab:
        items, complete = await gitlab.paginated(url, max_pages=3, ends=True)
    read = [item["iid"] for item in items]
    assert read == ([1, 2, 7, 8, 9] if total_pages else [1, 2, 3, 4, 5, 6])
    assert not complete
    assert len(fake_gitlab.requests) == 3


@pytest.mark.anyio
async def test_one_page_is_complete(fake_gitlab: FakeGitLab) -> None:
    fake_gitlab.set_document(PATH, 1)
    url = mr_api_url(fake_gitlab).rsplit("/", 1)[0]
    async with client_for(fake_gitlab) as gitlab:
        items, complete = await gitlab.paginated(url, max_pages=1)
    assert (len(items), complete) == (1, True)


def _route(answer: Any, headers: dict[str, str], delay: float = 0.0) -> Any:
    def route(
        fake: FakeGitLab,
        handler: _Handler,
        record: RecordedRequest,
        project: Project,
        tail: list[str],
        body: bytes,
    ) -> bool:
        if tail != ["odd"]:
            return False
        if delay:
            time.sleep(delay)  # the handler runs in the server's thread
        handler.send_json(record, 200, answer, headers)
        return True

    return route


@pytest.mark.anyio
@pytest.mark.parametrize("next_page", ["1", "0", "x", "-2", "99999999999999999999"])
async def test_a_next_page_that_does_not_move_forward_is_refused(
    fake_gitlab: FakeGitLab, next_page: str
) -> None:
    fake_gitlab.project(PATH)
    fake_gitlab.routes.append(_route([{"n": 1}], {"X-Next-Page": next_page}))
    url = mr_api_url(fake_gitlab).split("/merge_requests")[0] + "/odd"
    async with client_for(fake_gitlab) as gitlab:
        with pytest.raises(GitLabUnavailable) as caught:
            await gitlab.paginated(url, max_pages=50)
    assert caught.value.message == "GitLab's pagination headers are not valid."
    assert len(fake_gitlab.requests) == 1


@pytest.mark.anyio
async def test_a_page_that_is_not_a_list_is_refused(fake_gitlab: FakeGitLab) -> None:
    fake_gitlab.project(PATH)
    fake_gitlab.routes.append(_route({"items": []}, {}))
    url = mr_api_url(fake_gitlab).split("/merge_requests")[0] + "/odd"
    async with client_for(fake_gitlab) as gitlab:
        with pytest.raises(GitLabUnavailable):
            await gitlab.paginated(url, max_pages=5)


@pytest.mark.anyio
async def test_username_is_asked_once(fake_gitlab: FakeGitLab) -> None:
    fake_gitlab.users[GITLAB_TOKEN] = "pr-review-bot"
    async with client_for(fake_gitlab) as gitlab:
        assert await gitlab.username() == "pr-review-bot"
        assert await gitlab.username() == "pr-review-bot"
    assert [r.path for r in fake_gitlab.requests] == ["/gitlab/api/v4/user"]


@pytest.mark.anyio
async def test_username_without_a_token_is_refused(fake_gitlab: FakeGitLab) -> None:
    async with client_for(fake_gitlab, token=None) as gitlab:
        with pytest.raises(GitLabUnavailable) as caught:
            await gitlab.username()
    assert caught.value.message == TOKEN_NEEDED_MESSAGE


@pytest.mark.anyio
async def test_a_json_body_is_sent_compact(fake_gitlab: FakeGitLab) -> None:
    fake_gitlab.users[GITLAB_TOKEN] = "reviewer"
    fake_gitlab.project(PATH)
    url = mr_api_url(fake_gitlab) + "/notes"
    async with client_for(fake_gitlab) as gitlab:
        response = await gitlab.request("POST", url, json={"body": "hé"})
    assert response.status == 404  # returned, not raised: the caller decides
    (request,) = fake_gitlab.requests
    assert request.body == '{"body":"hé"}'.encode()
    assert request.headers["content-type"] == "application/json"


@pytest.mark.anyio
async def test_a_refused_port_is_gitlab_unavailable(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    gitlab = GitLabClient(Settings(gitlab_server_url=f"http://127.0.0.1:{port}"))
    async with gitlab:
        with pytest.raises(GitLabUnavailable) as caught:
            await gitlab.get_json(f"http://127.0.0.1:{port}/api/v4/user")
    assert caught.value.message == "GitLab could not be reached."


@pytest.mark.anyio
async def test_a_slow_answer_is_gitlab_unavailable(
    fake_gitlab: FakeGitLab, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gitlab_client.GitLabClient, "request_timeout_seconds", 0.2)
    fake_gitlab.project(PATH)
    fake_gitlab.routes.append(_route([], {}, delay=2.0))
    url = mr_api_url(fake_gitlab).split("/merge_requests")[0] + "/odd"
    async with client_for(fake_gitlab) as gitlab:
        with pytest.raises(GitLabUnavailable) as caught:
            await gitlab.get_json(url)
    assert caught.value.message == "GitLab did not answer in time."


@pytest.mark.anyio
async def test_a_gzip_bomb_is_refused_at_the_cap(fake_gitlab: FakeGitLab) -> None:
    bomb = gzip_bomb_bytes(8 * 1024 * 1024)
    fake_gitlab.respond(PATH, 3, 200, bomb, {"Content-Encoding": "gzip"})
    error = await error_of(fake_gitlab, mr_api_url(fake_gitlab))
    assert error.message == "GitLab's answer was larger than allowed."  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_the_token_is_never_logged(
    fake_gitlab: FakeGitLab, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    fake_gitlab.users[GITLAB_TOKEN] = "reviewer"
    fake_gitlab.set_document(PATH, 3)
    async with client_for(fake_gitlab) as gitlab:
        await gitlab.get_json(mr_api_url(fake_gitlab))
        await gitlab.username()
    assert caplog.records  # the client and httpx did log
    assert GITLAB_TOKEN not in caplog.text


def test_the_default_token_is_the_settings(fake_gitlab: FakeGitLab) -> None:
    settings = fake_gitlab.settings(Path("unused"), token=GITLAB_TOKEN)
    assert not GitLabClient(settings).anonymous
    assert GitLabClient(settings, token=None).anonymous
    assert not GitLabClient(
        settings.model_copy(update={"gitlab_token": None}), token=SecretStr("t")
    ).anonymous
