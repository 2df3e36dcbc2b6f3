"""A repository's learnings (specification §20), in PostgreSQL (`learnings`, migration 7).

One row per learning: the repository (the dismissals' key: `owner/repo` on GitHub,
`gitlab:group/project` on GitLab, lower case), its text (1-500 characters), who stored it, the
comment's URL and when. `remember` in a comment (jobs/learning_jobs.py) and `pr-review
learnings add` store one, `forget`, `learnings remove` and the /ui page remove one; every later
review of the repository is given the newest (loop/knowledge.py's bounds) through the
`Learnings` protocol (ledger.py). A learning's text is data wherever it goes: escaped where it
is shown, JSON-encoded where the model reads it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from pr_review_api.errors import ServerBusy
from pr_review_api.jobs.dismissals import Connections
from pr_review_api.settings import MAX_LEARNING_CHARS, MAX_LEARNINGS_GIVEN

_DATABASE_DOWN = "The job database is not available; try again shortly."
_REPOSITORY_KEY = re.compile(r"^(?:(?:gitlab|gitea):)?[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)+$")


def is_repository_key(value: str) -> bool:
    """Whether `value` can be a repository's key: `owner/repo`, or `<forge>:<path>` (the
    command line and /ui take these; what a forge names is checked where it is parsed)."""
    if len(value) > 300 or _REPOSITORY_KEY.fullmatch(value) is None:
        return False
    path = value.rsplit(":", maxsplit=1)[-1]
    return not any(part in (".", "..") for part in path.split("/"))


def valid_text(text: str) -> str | None:
    """The learning's text as stored (ends stripped), or None when it is not 1-500 characters
    or holds a control character other than a line break or a tab."""
    stripped = text.strip()
    if not 1 <= len(stripped) <= MAX_LEARNING_CHARS:
        return None
    if any((ord(c) < 32 and c not in "\n\t") or ord(c) == 127 for c in stripped):
        return None
    return stripped


@dataclass(frozen=True)
class Learning:
    id: int
    repository: str
    text: str
    author: str
    created_at: datetime | None
    url: str | None

    def document(self) -> dict[str, Any]:
        """`pr-review learnings list --format json`'s shape."""
        return {
            "id": self.id,
            "repository": self.repository,
            "text": self.text,
            "author": self.author,
            "created_at": None if self.created_at is None else self.created_at.isoformat(),
            "url": self.url,
        }


class DatabaseLearnings:
    """The learnings table through a connection factory (the queue's pool, or its own)."""

    def __init__(self, connections: Connections) -> None:
        self._connections = connections

    async def add(
        self,
        repository: str,
        text: str,
        author: str,
        url: str | None = None,
        origin: str | None = None,
    ) -> Learning | None:
        """Store a learning; None when its text is not valid. A second store of the same
        `origin` (a comment's job run again) answers the first row."""
        valid = valid_text(text)
        if valid is None:
            return None
        rows = await self._rows(
            "INSERT INTO learnings (repository, text, author, url, origin) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (origin) DO NOTHING "
            "RETURNING id, repository, text, author, created_at, url",
            (repository.lower(), valid, author, url, origin),
        )
        if not rows and origin is not None:
            rows = await self._rows(
                "SELECT id, repository, text, author, created_at, url FROM learnings "
                "WHERE origin = %s",
                (origin,),
            )
        return Learning(*rows[0]) if rows else None

    async def remove(self, learning_id: int, repository: str | None = None) -> bool:
        """Remove one (of `repository` only, when given: a `forget` never reaches another
        repository's learning); False when there was none."""
        rows = await self._rows(
            "DELETE FROM learnings WHERE id = %s AND (%s::text IS NULL OR repository = %s) "
            "RETURNING 1",
            (learning_id, *(None if repository is None else repository.lower(),) * 2),
        )
        return bool(rows)

    async def listed(self, repository: str | None = None) -> list[Learning]:
        """Newest first; of one repository, or all."""
        rows = await self._rows(
            "SELECT id, repository, text, author, created_at, url FROM learnings "
            "WHERE (%s::text IS NULL OR repository = %s) "
            "ORDER BY id DESC",
            (None if repository is None else repository.lower(),) * 2,
        )
        return [Learning(*row) for row in rows]

    async def given(self, repository: str) -> list[tuple[int, str]]:
        """The repository's newest learnings (id, text), at most MAX_LEARNINGS_GIVEN; the
        review bounds their bytes (loop/knowledge.py)."""
        rows = await self._rows(
            "SELECT id, text FROM learnings WHERE repository = %s ORDER BY id DESC LIMIT %s",
            (repository.lower(), MAX_LEARNINGS_GIVEN),
        )
        return [(int(row[0]), str(row[1])) for row in rows]

    async def _rows(self, query: str, parameters: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        try:
            async with self._connections() as connection:
                cursor = await connection.execute(query, parameters)
                return await cursor.fetchall() if cursor.description else []
        except psycopg.Error:
            raise ServerBusy(_DATABASE_DOWN) from None
