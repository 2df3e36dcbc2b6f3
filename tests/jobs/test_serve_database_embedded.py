"""`serve` without PR_REVIEW_DATABASE_URL: an embedded PostgreSQL and a worker process."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import psycopg
import pytest
from pydantic import SecretStr

from pr_review_api.jobs.embedded import EmbeddedPostgres
from pr_review_api.jobs.serve_database import service_database
from pr_review_api.settings import Settings
from tests.conftest import PROVIDER_KEY


def _wait_for_worker(url: str, seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with psycopg.connect(url) as connection:
            row = connection.execute("SELECT count(*) FROM procrastinate_workers").fetchone()
        if row is not None and row[0] >= 1:
            return True
        time.sleep(0.2)
    return False


def test_serve_without_a_url_runs_an_embedded_database_and_a_worker_then_stops_both(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENCODE_API_KEY", PROVIDER_KEY)  # the worker process reads its own
    # Short: the server's socket lives in the data folder, and a Unix socket path is short.
    with tempfile.TemporaryDirectory(prefix="prr-") as folder:
        data_dir = Path(folder)
        settings = Settings(opencode_api_key=SecretStr(PROVIDER_KEY), pr_review_data_dir=data_dir)
        with service_database(settings) as serving:
            assert serving.pr_review_database_url is not None
            url = serving.pr_review_database_url.get_secret_value()
            with psycopg.connect(url) as connection:
                tables = {row[0] for row in connection.execute("SELECT tablename FROM pg_tables")}
                assert {"procrastinate_jobs", "review_jobs"} <= tables
            assert (data_dir / "postgres" / "PG_VERSION").exists()
            assert _wait_for_worker(url), "the worker process never registered"
        assert not EmbeddedPostgres(data_dir).is_running()
        assert settings.pr_review_database_url is None  # the caller's settings are unchanged
