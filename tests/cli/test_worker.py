"""`pr-review worker`'s metrics options (cli/worker.py): a public address needs the service
keys, and a port in use is one clear line and exit status 2, before any job is taken."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from tests.conftest import PROVIDER_KEY

WORKER = [sys.executable, "-m", "pr_review_api.cli", "worker"]
# Never reached: the worker refuses its options before it connects.
UNREACHABLE_DATABASE = "postgresql://nobody:secret-DB-PASSWORD@127.0.0.1:1/none"


def _run(*arguments: str, keys: str | None = None) -> subprocess.CompletedProcess[str]:
    environment = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("PR_REVIEW_", "OPENCODE_"))},
        "OPENCODE_API_KEY": PROVIDER_KEY,
        "PR_REVIEW_DATABASE_URL": UNREACHABLE_DATABASE,
    }
    if keys is not None:
        environment["PR_REVIEW_API_KEYS"] = keys
    return subprocess.run(
        [*WORKER, *arguments],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_public_metrics_address_needs_the_service_keys() -> None:
    done = _run("--metrics-port", "0", "--metrics-host", "0.0.0.0")
    assert done.returncode == 2
    assert done.stderr == (
        "error: PR_REVIEW_API_KEYS is not set: set it to serve metrics on a non-loopback "
        "address, or use --metrics-host 127.0.0.1. (configuration_error)\n"
    )


def test_a_metrics_port_in_use_is_one_line_and_exit_status_2() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _run("--metrics-port", str(port))
    assert done.returncode == 2
    assert done.stderr == (
        f"error: --metrics-port {port} cannot be used on 127.0.0.1. (configuration_error)\n"
    )
    assert "secret-DB-PASSWORD" not in done.stderr + done.stdout


def test_the_metrics_port_is_range_checked() -> None:
    done = _run("--metrics-port", "70000")
    assert done.returncode == 2
    assert "--metrics-port" in done.stderr
    assert "Traceback" not in done.stderr
