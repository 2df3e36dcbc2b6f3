"""`pr-review jobs list|show|retry|cancel` as an operator runs it: against the embedded
PostgreSQL under PR_REVIEW_DATA_DIR, running (as under `serve`) and stopped (the command starts
it and stops it again). The main commands run as real `pr-review` processes; the variations
of output and input run the same command in this process (`_jobs_here`), which is quicker.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pydantic import SecretStr

from pr_review_api import cli
from pr_review_api.jobs.embedded import EmbeddedPostgres
from pr_review_api.jobs.queue import JobQueue
from pr_review_api.settings import Settings
from tests.conftest import PROVIDER_KEY
from tests.jobs.test_admin import CountingRunner
from tests.jobs.test_jobs import FAST, SERVER, pull, wait_for, worker
from tests.service.support import serve_data_dir


@pytest.fixture
def data_dir() -> Iterator[Path]:
    with serve_data_dir() as folder:
        yield folder


def _jobs(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    environment = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("OPENCODE_", "PR_REVIEW_"))},
        "PR_REVIEW_DATA_DIR": str(data_dir),
    }
    return subprocess.run(
        [sys.executable, "-m", "pr_review_api.cli", "jobs", *args],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


class _Done:
    """What `_jobs_here` ran to: the shape of `subprocess.CompletedProcess` the test reads."""

    def __init__(self, returncode: int, stdout: str, stderr: str) -> None:
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr


def _jobs_here(data_dir: Path, *args: str) -> _Done:
    environment = {name: None for name in os.environ if name.startswith("PR_REVIEW_")}
    result = CliRunner().invoke(
        cli.main,
        ["jobs", *args],
        env={**environment, "PR_REVIEW_DATA_DIR": str(data_dir)},
        prog_name="pr-review",
    )
    return _Done(result.exit_code, result.stdout, result.stderr)


def _seed(url: str) -> dict[str, uuid.UUID]:
    """A failed job (acme/widget#1), two queued ones (#2, other/thing#3)."""
    settings = Settings(
        opencode_api_key=SecretStr(PROVIDER_KEY),
        github_server_url=SERVER,
        github_api_url=SERVER + "/api/v3",
        pr_review_database_url=SecretStr(url),
    )

    async def scenario() -> dict[str, uuid.UUID]:
        runner = CountingRunner(failing=True)
        async with worker(settings, runner) as queue:
            failed = (await queue.enqueue(pull(1), source="api")).job_id

            async def is_failed() -> bool:
                record = await queue.get(failed)
                return record is not None and record.status == "failed"

            await wait_for(is_failed, what="the failure")
        queue = JobQueue(settings, tuning=FAST)
        async with queue.opened():
            second = (await queue.enqueue(pull(2, head_sha="d" * 40), source="api")).job_id
            third = (await queue.enqueue(pull(3, "other", "thing"), source="api")).job_id
        return {"failed": failed, "second": second, "third": third}

    return asyncio.run(scenario())


def _json(done: subprocess.CompletedProcess[str] | _Done) -> Any:
    return json.loads(done.stdout)


@pytest.mark.e2e
def test_jobs_commands_against_the_running_embedded_database(data_dir: Path) -> None:
    database = EmbeddedPostgres(data_dir).start()
    ids = _seed(database.url())

    listed = _jobs(data_dir, "list", "--format", "json")
    assert listed.returncode == 0, listed.stderr
    page = _json(listed)
    expected_order = [str(ids["third"]), str(ids["second"]), str(ids["failed"])]
    assert [job["job_id"] for job in page["jobs"]] == expected_order
    assert page["next"] is None

    table = _jobs(data_dir, "list", "--repository", "ACME/widget")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == [
        "JOB",
        "STATUS",
        "PULL",
        "REQUEST",
        "HEAD",
        "CREATED",
        "FINDINGS",
        "TOKENS",
        "TIME",
    ]
    assert [line.split()[0] for line in lines[1:]] == [str(ids["second"]), str(ids["failed"])]
    assert "acme/widget#2" in lines[1]
    assert "dddddddddddd" in lines[1]

    paged = _jobs_here(data_dir, "list", "--limit", "2", "--format", "json")
    cursor = _json(paged)["next_cursor"]
    rest = _jobs_here(data_dir, "list", "--limit", "2", "--cursor", cursor, "--format", "json")
    assert [job["job_id"] for job in _json(rest)["jobs"]] == [str(ids["failed"])]

    shown = _jobs_here(data_dir, "show", str(ids["failed"]), "--format", "json")
    document = _json(shown)
    assert document["status"] == "failed"
    assert document["result"]["error"]["code"] == "invalid_model_response"
    details = _jobs_here(data_dir, "show", str(ids["failed"]))
    assert "error:        invalid_model_response" in details.stdout

    cancelled = _jobs(data_dir, "cancel", str(ids["second"]), "--format", "json")
    assert cancelled.returncode == 0, cancelled.stderr
    assert _json(cancelled) == {
        "job_id": str(ids["second"]),
        "status": "superseded",
        "outcome": "cancelled",
    }
    twice = _jobs_here(data_dir, "cancel", str(ids["second"]))
    assert twice.returncode == 1
    assert "only a queued job can be cancelled" in twice.stderr

    retried = _jobs(data_dir, "retry", str(ids["failed"]))
    assert retried.returncode == 0, retried.stderr
    assert retried.stdout.startswith("queued again as job ")
    new_id = retried.stdout.split()[-1]
    again = _jobs_here(data_dir, "show", new_id, "--format", "json")
    assert _json(again)["status"] == "queued"
    not_failed = _jobs_here(data_dir, "retry", new_id)
    assert not_failed.returncode == 1

    for bad in (["show", "nope"], ["show", str(uuid.uuid4())], ["cancel", str(uuid.uuid4())]):
        missing = _jobs_here(data_dir, *bad, "--format", "json")
        assert missing.returncode == 2
        assert _json(missing)["error"]["code"] == "job_not_found"
    bad_cursor = _jobs_here(data_dir, "list", "--cursor", str(uuid.uuid4()))
    assert bad_cursor.returncode == 2
    assert "(invalid_request)" in bad_cursor.stderr
    assert database.is_running()  # a database it did not start is left running


@pytest.mark.e2e
def test_jobs_start_a_stopped_embedded_database_and_stop_it_again(data_dir: Path) -> None:
    database = EmbeddedPostgres(data_dir).start()
    ids = _seed(database.url())
    database.stop()
    listed = _jobs(data_dir, "list", "--status", "failed", "--format", "json")
    assert listed.returncode == 0, listed.stderr
    assert [job["job_id"] for job in _json(listed)["jobs"]] == [str(ids["failed"])]
    assert not database.is_running()


@pytest.mark.e2e
def test_jobs_without_any_database_say_how_to_get_one(tmp_path: Path) -> None:
    done = _jobs(tmp_path / "empty", "list")
    assert done.returncode == 2
    assert "(configuration_error)" in done.stderr
    assert "PR_REVIEW_DATABASE_URL" in done.stderr
    assert str(tmp_path) not in done.stderr
