"""Who is a writer on Gitea (gitea/permissions.py) against the fake Gitea: write, admin and the
owner are; read is not; a token that is not a repository admin gets 403, which is no, and a
Gitea that fails is `gitea_unavailable`; the answers are kept per repository and user."""

from __future__ import annotations

import asyncio

import pytest

from pr_review_api.errors import GiteaUnavailable
from pr_review_api.gitea.permissions import may_write
from pr_review_api.permissions import PermissionCache
from tests.fakes.gitea_reviews import GiteaWrites
from tests.fakes.gitea_server import FakeGitea
from tests.gitea.support import PATH, REVIEWER, client_for, pull_ref


def ask(
    fake: FakeGitea, logins: list[str], cache: PermissionCache, *, admin: bool = False
) -> list[bool]:
    """Ask about each login with the reviewer's token (a writer of PATH, or an admin)."""
    client = client_for(fake)
    if admin:
        fake.grant(PATH, REVIEWER, "admin")

    async def run() -> list[bool]:
        async with client as gitea:
            return [await may_write(gitea, pull_ref(fake), login, cache) for login in logins]

    return asyncio.run(run())


def lookups(fake: FakeGitea) -> list[tuple[str, int]]:
    return [(r.path, r.status) for r in fake.api_requests() if r.path.endswith("/permission")]


def test_writers_admins_and_the_owner_may_ask_readers_and_strangers_may_not(
    fake_gitea: FakeGitea, fake_gitea_writes: GiteaWrites
) -> None:
    fake_gitea.repository(PATH)
    fake_gitea.grant(PATH, "wendy", "write")
    fake_gitea.grant(PATH, "adam", "admin")
    fake_gitea.grant(PATH, "rita", "read")
    logins = ["wendy", "adam", "acme", "rita", "nobody", "a/../b?c"]
    answers = ask(fake_gitea, logins, PermissionCache(), admin=True)
    assert answers == [True, True, True, False, False, False]
    assert all(status == 200 for _, status in lookups(fake_gitea))
    # The odd login went as one escaped path piece, never as more of the path.
    assert lookups(fake_gitea)[-1][0].endswith("/collaborators/a%2F..%2Fb%3Fc/permission")


def test_a_token_that_is_not_an_admin_gets_403_and_nobody_may_ask(
    fake_gitea: FakeGitea, fake_gitea_writes: GiteaWrites
) -> None:
    fake_gitea.repository(PATH)
    fake_gitea.grant(PATH, "wendy", "write")
    cache = PermissionCache()
    assert ask(fake_gitea, ["wendy", "wendy", "WENDY"], cache) == [False] * 3
    assert [status for _, status in lookups(fake_gitea)] == [403]  # kept a while


def test_a_gitea_that_fails_is_unavailable(fake_gitea: FakeGitea) -> None:
    fake_gitea.repository(PATH)  # no permission endpoint on this fake: a 404 is a no
    assert ask(fake_gitea, ["wendy"], PermissionCache()) == [False]
    fake_gitea.api_redirect = "http://127.0.0.1:9/elsewhere"
    with pytest.raises(GiteaUnavailable):
        ask(fake_gitea, ["wendy"], PermissionCache())
