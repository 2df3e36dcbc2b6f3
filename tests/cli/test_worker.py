"""`pr-review worker`'s metrics options (cli/worker.py): a public address needs the service
keys, and a port in use is one clear line and exit status 2, before any job is taken.

Each rule is checked twice: by the command in this process (the fast tier), and by a real
`pr-review worker` process (marked e2e: a process's start-up costs a second of CPU or two).
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from click.testing import Result

from tests.cli.support import run
from tests.conftest import PROVIDER_KEY
from tests.environment import Environment, process_environment, review_variables

WORKER = [sys.executable, "-m", "pr_review_api.cli", "worker"]
# Never reached: the worker refuses its options before it connects.
UNREACHABLE_DATABASE = "postgresql://nobody:secret-DB-PASSWORD@127.0.0.1:1/none"


def _run(*arguments: str, keys: str | None = None) -> subprocess.CompletedProcess[str]:
    environment = process_environment(
        review_variables(
            OPENCODE_API_KEY=PROVIDER_KEY,
            PR_REVIEW_DATABASE_URL=UNREACHABLE_DATABASE,
            PR_REVIEW_API_KEYS=keys,
        )
    )
    return subprocess.run(
        [*WORKER, *arguments],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _run_here(environment: Environment, *arguments: str) -> Result:
    """The same command in this process (the environment as `_run` sets it)."""
    environment(OPENCODE_API_KEY=PROVIDER_KEY, PR_REVIEW_DATABASE_URL=UNREACHABLE_DATABASE)
    return run("worker", *arguments)


PUBLIC_ADDRESS_REFUSED = (
    "error: PR_REVIEW_API_KEYS is not set: set it to serve metrics on a non-loopback "
    "address, or use --metrics-host 127.0.0.1. (configuration_error)\n"
)


def port_in_use_refused(port: int) -> str:
    return f"error: --metrics-port {port} cannot be used on 127.0.0.1. (configuration_error)\n"


@contextmanager
def port_in_use() -> Iterator[int]:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]


def test_a_public_metrics_address_needs_the_service_keys(environment: Environment) -> None:
    done = _run_here(environment, "--metrics-port", "0", "--metrics-host", "0.0.0.0")
    assert done.exit_code == 2
    assert done.stderr == PUBLIC_ADDRESS_REFUSED


def test_a_metrics_port_in_use_is_one_line_and_exit_status_2(
    environment: Environment,
) -> None:
    with port_in_use() as port:
        done = _run_here(environment, "--metrics-port", str(port))
    assert done.exit_code == 2
    assert done.stderr == port_in_use_refused(port)
    assert "secret-DB-PASSWORD" not in done.output


def test_the_metrics_port_is_range_checked(environment: Environment) -> None:
    done = _run_here(environment, "--metrics-port", "70000")
    assert done.exit_code == 2
    assert "--metrics-port" in done.stderr
    assert "Traceback" not in done.output


@pytest.mark.e2e
def test_a_worker_process_refuses_a_public_metrics_address_without_the_service_keys() -> None:
    done = _run("--metrics-port", "0", "--metrics-host", "0.0.0.0")
    assert done.returncode == 2
    assert done.stderr == PUBLIC_ADDRESS_REFUSED


@pytest.mark.e2e
def test_a_worker_process_says_a_metrics_port_is_in_use_in_one_line_and_exits_2() -> None:
    with port_in_use() as port:
        done = _run("--metrics-port", str(port))
    assert done.returncode == 2
    assert done.stderr == port_in_use_refused(port)
    assert "secret-DB-PASSWORD" not in done.stderr + done.stdout


@pytest.mark.e2e
def test_a_worker_process_range_checks_the_metrics_port() -> None:
    done = _run("--metrics-port", "70000")
    assert done.returncode == 2
    assert "--metrics-port" in done.stderr
    assert "Traceback" not in done.stderr
