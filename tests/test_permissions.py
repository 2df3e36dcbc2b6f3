"""permissions.py: a forge's answers to who may write, kept per repository and user (any case)
for the holder's ttl, and asked again only when none is kept."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from pr_review_api import permissions
from pr_review_api.permissions import PermissionCache


def _asker(answer: bool, asked: list[str], user: str) -> Callable[[], Awaitable[bool]]:
    async def ask() -> bool:
        asked.append(user)
        return answer

    return ask


def test_an_answer_is_kept_per_repository_and_user_whatever_their_case() -> None:
    cache = PermissionCache()
    asked: list[str] = []

    async def main() -> list[bool]:
        return [
            await cache.answer("acme/widget", "alice", _asker(True, asked, "alice")),
            await cache.answer("ACME/Widget", "Alice", _asker(False, asked, "Alice")),
            await cache.answer("acme/widget", "mallory", _asker(False, asked, "mallory")),
            await cache.answer("acme/other", "alice", _asker(False, asked, "alice@other")),
        ]

    assert asyncio.run(main()) == [True, True, False, False]
    assert asked == ["alice", "mallory", "alice@other"]  # the kept answer was not asked again


def test_an_expired_answer_is_asked_again() -> None:
    cache = PermissionCache(ttl=0)
    asked: list[str] = []

    async def main() -> None:
        await cache.answer("acme/widget", "alice", _asker(True, asked, "alice"))
        await cache.answer("acme/widget", "alice", _asker(False, asked, "alice"))

    asyncio.run(main())
    assert asked == ["alice", "alice"]


def test_the_cache_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(permissions, "MAX_PERMISSION_ENTRIES", 3)
    cache = PermissionCache()
    asked: list[str] = []

    async def main() -> bool:
        for number in range(5):
            user = f"user{number}"
            await cache.answer("acme/widget", user, _asker(True, asked, user))
        # user0 was dropped when the cache was full of live answers: asked again.
        return await cache.answer("acme/widget", "user0", _asker(False, asked, "user0"))

    assert asyncio.run(main()) is False
    assert len(cache._answers) <= 3
    assert asked == ["user0", "user1", "user2", "user3", "user4", "user0"]
