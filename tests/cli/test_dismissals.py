"""`pr-review dismissals list|remove` against a real embedded PostgreSQL (PR_REVIEW_DATABASE_URL),
and the /ui page of a repository's dismissals reading the same table (specification §15).
"""

from __future__ import annotations

import asyncio
import json

import psycopg
import pytest
from click.testing import CliRunner, Result

from pr_review_api.cli import commands as cli
from pr_review_api.jobs.schema import apply_migrations
from tests.jobs.conftest import database_url, embedded_postgres
from tests.jobs.test_jobs import service, settings_for

__all__ = ["database_url", "embedded_postgres"]

# Every test here reads and writes a real PostgreSQL: the default run's, not --fast.
pytestmark = pytest.mark.e2e


@pytest.fixture
def with_dismissals(database_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    asyncio.run(apply_migrations(database_url))
    with psycopg.connect(database_url) as connection:
        for repository, fingerprint, title in (
            ("acme/widget", "a" * 16, "average() drops the last value"),
            ("acme/other", "b" * 16, "<script>alert(1)</script>"),
        ):
            connection.execute(
                "INSERT INTO dismissals (repository, fingerprint, title, path, dismissed_by) "
                "VALUES (%s, %s, %s, 'a.py', 'alice')",
                (repository, fingerprint, title),
            )
    monkeypatch.setenv("PR_REVIEW_DATABASE_URL", database_url)
    return database_url


def dismissals(*args: str) -> Result:
    return CliRunner().invoke(cli.main, ["dismissals", *args], prog_name="pr-review")


def test_list_shows_a_repositorys_dismissals_and_remove_undoes_one(with_dismissals: str) -> None:
    listed = dismissals("list", "--repository", "ACME/widget", "--format", "json")
    assert listed.exit_code == 0, listed.output
    (item,) = json.loads(listed.stdout)["dismissals"]
    assert item["fingerprint"] == "a" * 16
    assert item["title"] == "average() drops the last value"
    assert item["dismissed_by"] == "alice"
    removed = dismissals("remove", "acme/widget", "a" * 16)
    assert removed.exit_code == 0, removed.output
    assert dismissals("remove", "acme/widget", "a" * 16).exit_code == 1  # nothing left to remove
    left = json.loads(dismissals("list", "--format", "json").stdout)["dismissals"]
    assert [d["repository"] for d in left] == ["acme/other"]


def test_the_ui_page_lists_the_repositorys_dismissals_escaped(with_dismissals: str) -> None:
    async def pages() -> tuple[str, str]:
        async with service(settings_for(with_dismissals)) as client:
            widget = await client.get("/ui/repositories/acme/widget/dismissals")
            other = await client.get("/ui/repositories/acme/other/dismissals")
            return widget.text, other.text

    widget, other = asyncio.run(pages())
    assert "average() drops the last value" in widget
    assert "alice" in widget
    assert "<script>" not in other
    assert "&lt;script&gt;" in other
