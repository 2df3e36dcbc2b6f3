"""`serve`'s hold on its data folder (jobs/serve_database.py): one `serve` per folder at a
time, and a restarted `serve` waits for the previous one's orphaned worker instead of adopting
a database that worker is about to stop. A real lock held by a real second process."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import SecretStr

from pr_review_api.jobs import serve_database
from pr_review_api.jobs.serve_database import LOCK_FILE_NAME, service_database
from pr_review_api.settings import Settings
from tests.conftest import PROVIDER_KEY

HOLD_LOCK = """
import fcntl, sys
with open(sys.argv[1], "ab") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    print("held", flush=True)
    sys.stdin.read()
"""


def test_a_data_folder_held_by_another_serve_is_refused_after_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(serve_database, "WORKER_STOP_SLACK_SECONDS", 0)
    settings = Settings(
        opencode_api_key=SecretStr(PROVIDER_KEY),
        pr_review_data_dir=tmp_path,
        review_timeout_seconds=1,
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(tmp_path / LOCK_FILE_NAME)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "held\n"
        with pytest.raises(SystemExit) as exited, service_database(settings):
            pytest.fail("the database started in a folder another serve holds")
    finally:
        holder.communicate("")
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert error == (
        "error: another pr-review serve uses PR_REVIEW_DATA_DIR (configuration_error)\n"
    )
    assert not (tmp_path / "postgres").exists()  # nothing was started
    # Made 0644 by the other process; ours is 0600, since a stranger could hold it too.
    assert stat.S_IMODE((tmp_path / LOCK_FILE_NAME).stat().st_mode) == 0o600
