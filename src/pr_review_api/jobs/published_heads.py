"""The service's ledger of published reviews in PostgreSQL (`published_heads`, migration 3).

`ledger.py` says what it is for. Here: one row per (pull request, publishing identity,
head), inserted as soon as GitHub accepts the review, never updated (a second insert of the
same head changes nothing). Reading it costs one indexed query whatever the pull request holds
on GitHub, so a job of a head already published asks neither the model nor GitHub's listings.

A database that fails while reading answers `ServerBusy` (the job is tried again later); one
that fails while recording is logged and passed over: the review is on GitHub by then, and
its marker there still stops a second one.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Collection
from contextlib import AbstractAsyncContextManager
from typing import Any

import psycopg
from psycopg import AsyncConnection

from pr_review_api.errors import ServerBusy
from pr_review_api.ledger import HeadKey, PublishedHead
from pr_review_api.model import Publication, ReviewResult

logger = logging.getLogger(__name__)

Connections = Callable[[], AbstractAsyncContextManager[AsyncConnection[Any]]]
"""Lends a connection of the worker's pool (`pool.connection`)."""

_DATABASE_DOWN = "The job database is not available; try again shortly."


class DatabaseLedger:
    """`ledger.PublishLedger` on the jobs database."""

    def __init__(self, connections: Connections) -> None:
        self._connections = connections

    async def find(self, key: HeadKey) -> PublishedHead | None:
        row = await self._one(
            "SELECT review_id, url, result FROM published_heads "
            "WHERE pull_request = %s AND identity = %s AND head_sha = %s",
            (key.pull_request, key.identity, key.head_sha),
        )
        if row is None:
            return None
        review_id, url, result = row
        return PublishedHead(review_id, url, result)

    async def fingerprints(self, key: HeadKey) -> set[str]:
        row = await self._one(
            "SELECT coalesce(array_agg(DISTINCT f), '{}') FROM published_heads, "
            "unnest(fingerprints) AS f WHERE pull_request = %s AND identity = %s",
            (key.pull_request, key.identity),
        )
        return set() if row is None else set(row[0])

    async def record(
        self,
        key: HeadKey,
        publication: Publication,
        fingerprints: Collection[str],
        result: ReviewResult,
    ) -> None:
        document = result.model_dump(mode="json")
        document["publication"] = publication.model_dump(mode="json")
        try:
            async with self._connections() as connection:
                await connection.execute(
                    "INSERT INTO published_heads (pull_request, identity, head_sha, review_id, "
                    "url, fingerprints, result) VALUES (%s, %s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT DO NOTHING",
                    (
                        key.pull_request,
                        key.identity,
                        key.head_sha,
                        publication.review_id,
                        publication.url,
                        sorted(fingerprints),
                        json.dumps(document),
                    ),
                )
        except psycopg.Error as exc:
            logger.warning("the published review was not recorded: %s", type(exc).__name__)

    async def _one(self, query: str, parameters: tuple[Any, ...]) -> tuple[Any, ...] | None:
        try:
            async with self._connections() as connection:
                cursor = await connection.execute(query, parameters)
                return await cursor.fetchone()
        except psycopg.Error:
            raise ServerBusy(_DATABASE_DOWN) from None
