"""The findings a repository dismissed (specification §15), in PostgreSQL (`dismissals`, migration
5).

One row per (repository, fingerprint): who dismissed it, when, and the finding's title and path
as our comment showed them. `ignore` in one of our findings' threads stores a row; a review of
any pull request of that repository posts no finding whose fingerprint has one
(`publication.suppressed`); `pr-review dismissals list|remove` and the /ui page read it.
Repository names are stored lower case: GitHub's are case-insensitive.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg import AsyncConnection

from pr_review_api.errors import ServerBusy

Connections = Callable[[], AbstractAsyncContextManager[AsyncConnection[Any]]]
_DATABASE_DOWN = "The job database is not available; try again shortly."


@dataclass(frozen=True)
class Dismissal:
    repository: str  # "owner/repo", lower case
    fingerprint: str
    title: str
    path: str | None
    dismissed_by: str
    dismissed_at: datetime | None = None

    def document(self) -> dict[str, Any]:
        return {
            "repository": self.repository,
            "fingerprint": self.fingerprint,
            "title": self.title,
            "path": self.path,
            "dismissed_by": self.dismissed_by,
            "dismissed_at": None if self.dismissed_at is None else self.dismissed_at.isoformat(),
        }


def repository_key(owner: str, repo: str) -> str:
    return f"{owner}/{repo}".lower()


class DatabaseDismissals:
    """The dismissals table through a connection factory (the queue's pool, or one of its own)."""

    def __init__(self, connections: Connections) -> None:
        self._connections = connections

    async def add(self, dismissal: Dismissal) -> bool:
        """Store it; False when the repository had dismissed that fingerprint already."""
        cursor = await self._execute(
            "INSERT INTO dismissals (repository, fingerprint, title, path, dismissed_by) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING 1",
            (
                dismissal.repository,
                dismissal.fingerprint,
                dismissal.title,
                dismissal.path,
                dismissal.dismissed_by,
            ),
        )
        return bool(cursor)

    async def dismiss(
        self, repository: str, fingerprint: str, title: str, path: str | None, by: str
    ) -> None:
        await self.add(Dismissal(repository.lower(), fingerprint, title, path, by))

    async def titles(self, repository: str, paths: Collection[str]) -> list[str]:
        rows = await self._rows(
            "SELECT DISTINCT title FROM dismissals WHERE repository = %s AND path = ANY(%s) "
            "ORDER BY title LIMIT 50",
            (repository.lower(), list(paths)),
        )
        return [str(row[0]) for row in rows]

    async def fingerprints(self, repository: str) -> set[str]:
        rows = await self._rows(
            "SELECT fingerprint FROM dismissals WHERE repository = %s", (repository.lower(),)
        )
        return {str(row[0]) for row in rows}

    async def listed(self, repository: str | None = None) -> list[Dismissal]:
        rows = await self._rows(
            "SELECT repository, fingerprint, title, path, dismissed_by, dismissed_at "
            "FROM dismissals WHERE (%s::text IS NULL OR repository = %s) "
            "ORDER BY dismissed_at DESC, fingerprint",
            (None if repository is None else repository.lower(),) * 2,
        )
        return [Dismissal(*row) for row in rows]

    async def remove(self, repository: str, fingerprint: str) -> bool:
        """Undo a dismissal; False when there was none."""
        cursor = await self._execute(
            "DELETE FROM dismissals WHERE repository = %s AND fingerprint = %s RETURNING 1",
            (repository.lower(), fingerprint),
        )
        return bool(cursor)

    async def _execute(self, query: str, parameters: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        return await self._rows(query, parameters)

    async def _rows(self, query: str, parameters: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        try:
            async with self._connections() as connection:
                cursor = await connection.execute(query, parameters)
                return await cursor.fetchall() if cursor.description else []
        except psycopg.Error:
            raise ServerBusy(_DATABASE_DOWN) from None
