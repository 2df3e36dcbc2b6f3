"""`serve` and workers as separate machines would run them, against one external PostgreSQL
over TCP with TLS and a password (docs/service.md, "More than one machine").

The server is Debian's `postgresql` package (`/usr/lib/postgresql/<version>/bin`), run as an
unprivileged user on 127.0.0.1 with a certificate of its own, accepting only `hostssl`
connections with SCRAM passwords. `serve` and two `pr-review worker` processes (each with
its own cache folder, as on separate hosts) reach it with `sslmode=verify-full`. Twenty
published reviews are queued through `serve`; one worker is SIGKILLed while it runs a job.
Every job must end succeeded, and GitHub must receive exactly one review per head.

Skipped, with the reason, when the Debian binaries are not installed
(`apt-get install -y postgresql`).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.conftest import GITHUB_TOKEN, PROVIDER_KEY
from tests.environment import process_environment, review_variables
from tests.fakes import github_server
from tests.fakes.github_server import FakeGitHub
from tests.fakes.provider_server import RecordedRequest, ScriptedProvider, stop_turn
from tests.scrape import value

fake_github = github_server.fake_github

JOBS = 20
KILL_AFTER_SUCCEEDED = 5
PASSWORD = "pg-PASSWORD-secret-3f9d"
DATABASE = "reviews"
ROLE = "pr_review"
REVIEW = {"summary": "Looks fine.", "findings": [], "notes": []}
START_DEADLINE_SECONDS = 60.0
RUN_DEADLINE_SECONDS = 300.0
PROVIDER_LATENCY_SECONDS = 0.5  # each job is in flight long enough for the kill to hit one


def _debian_bin() -> Path | None:
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    return versions[-1].parent if versions else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class ExternalPostgres:
    url: str  # what the operator puts in PR_REVIEW_DATABASE_URL
    admin_url: str


def _certificates(folder: Path) -> tuple[Path, Path, Path]:
    """A CA, and a server certificate for 127.0.0.1 it signed: (ca.pem, server.crt, .key)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "pr-review test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    server = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    paths = folder / "ca.pem", folder / "server.crt", folder / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(server.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return paths


def _as_server_user(command: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: as root, run it as `nobody`."""
    if os.geteuid() != 0:
        return command
    return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--", *command]


def _give_to_server_user(root: Path) -> None:
    if os.geteuid() != 0:
        return
    nobody = pwd.getpwnam("nobody")
    for path in [root, *root.rglob("*")]:
        os.chown(path, nobody.pw_uid, nobody.pw_gid)


def _initdb(binaries: Path, root: Path, ca: Path, cert: Path, key: Path) -> Path:
    data = root / "data"
    password_file = root / "password"
    password_file.write_text(PASSWORD + "\n")
    key.chmod(0o600)
    _give_to_server_user(root)
    subprocess.run(
        _as_server_user(
            [
                str(binaries / "initdb"),
                "-D",
                str(data),
                "-U",
                ROLE,
                "--pwfile",
                str(password_file),
                "--auth=scram-sha-256",
                "--encoding=UTF8",
                "--no-sync",
            ]
        ),
        check=True,
        capture_output=True,
        timeout=120,
    )
    # TLS and a password, from 127.0.0.1 only: no plain `host` line, no local socket.
    (data / "pg_hba.conf").write_text(f"hostssl all {ROLE} 127.0.0.1/32 scram-sha-256\n")
    with (data / "postgresql.conf").open("a") as conf:
        conf.write(
            f"ssl = on\nssl_cert_file = '{cert}'\nssl_key_file = '{key}'\n"
            f"ssl_ca_file = '{ca}'\nunix_socket_directories = ''\n"
            "listen_addresses = '127.0.0.1'\nmax_connections = 100\nfsync = off\n"
        )
    _give_to_server_user(root)
    return data


@pytest.fixture
def external_postgres() -> Iterator[ExternalPostgres]:
    binaries = _debian_bin()
    if binaries is None:
        pytest.skip(
            "Debian's PostgreSQL binaries are not installed (apt-get install -y postgresql): "
            "this test runs an external server from /usr/lib/postgresql/<version>/bin"
        )
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: PostgreSQL refuses to run as root")
    root = Path(tempfile.mkdtemp(prefix="prr-extpg-"))
    root.chmod(0o755)
    ca, cert, key = _certificates(root)
    data = _initdb(binaries, root, ca, cert, key)
    port = _free_port()
    log = root / "server.log"
    with log.open("wb") as output:
        server = subprocess.Popen(
            _as_server_user([str(binaries / "postgres"), "-D", str(data), "-p", str(port)]),
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=output,
        )
    tls = f"sslmode=verify-full&sslrootcert={ca}"
    base = f"postgresql://{ROLE}:{PASSWORD}@127.0.0.1:{port}"
    admin_url = f"{base}/postgres?{tls}"
    try:
        _wait_for_server(admin_url, server, log)
        with psycopg.connect(admin_url, autocommit=True) as connection:
            connection.execute(f"CREATE DATABASE {DATABASE}")
        yield ExternalPostgres(url=f"{base}/{DATABASE}?{tls}", admin_url=admin_url)
    finally:
        server.send_signal(signal.SIGINT)  # fast shutdown
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        shutil.rmtree(root, ignore_errors=True)


def _wait_for_server(url: str, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_DEADLINE_SECONDS
    while time.monotonic() < deadline:
        assert server.poll() is None, log.read_text(errors="replace")
        try:
            with psycopg.connect(url, connect_timeout=2):
                return
        except psycopg.OperationalError:
            time.sleep(0.2)
    raise AssertionError("PostgreSQL did not start: " + log.read_text(errors="replace"))


# --- the processes ----------------------------------------------------------------------------


def _environment(
    database_url: str, fake: FakeGitHub, provider: ScriptedProvider, cache: Path
) -> dict[str, str]:
    return process_environment(
        review_variables(provider, github=fake, cache=cache, PR_REVIEW_DATABASE_URL=database_url)
    )


def _start(arguments: list[str], environment: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as output:
        return subprocess.Popen(
            [sys.executable, "-m", "pr_review_api.cli", *arguments],
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=output,
        )


def _wait_until(condition: Any, what: str, deadline_seconds: float) -> None:
    deadline = time.monotonic() + deadline_seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _query(url: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as connection:
        return connection.execute(sql).fetchall()  # type: ignore[arg-type, unused-ignore]


def _statuses(url: str) -> dict[str, int]:
    found = _query(url, "SELECT status, count(*) FROM review_jobs GROUP BY status")
    return {str(status): int(count) for status, count in found}


def _registered_workers(url: str) -> list[int]:
    return [int(row[0]) for row in _query(url, "SELECT id FROM procrastinate_workers ORDER BY id")]


def _running_on(url: str, worker_ids: set[int]) -> int:
    found = _query(url, "SELECT worker_id FROM procrastinate_jobs WHERE status = 'doing'")
    return sum(1 for (worker,) in found if worker in worker_ids)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _logs(tmp_path: Path) -> str:
    return "\n".join(
        f"--- {log.name}\n{log.read_text(errors='replace')[-3000:]}"
        for log in sorted(tmp_path.glob("*.log"))
    )


@pytest.mark.timeout(900)  # about 80 s here: a killed worker's job waits out the stall timeout
def test_serve_and_two_workers_on_an_external_tls_database_survive_a_killed_worker(
    external_postgres: ExternalPostgres, fake_github: FakeGitHub, tmp_path: Path
) -> None:
    fake_github.users.setdefault(GITHUB_TOKEN, "pr-review-bot")
    urls = [
        fake_github.pull_request("acme", "widget", n, head={f"f{n}.py": f"x = {n}\n"}).url
        for n in range(1, JOBS + 1)
    ]

    def answer(request: RecordedRequest) -> dict[str, Any]:
        return stop_turn(REVIEW)

    database = external_postgres.url
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    with ScriptedProvider(responder=answer, latency=PROVIDER_LATENCY_SECONDS) as provider:
        serve = _start(
            ["serve", "--port", str(port)],
            _environment(database, fake_github, provider, tmp_path / "serve-cache"),
            tmp_path / "serve.log",
        )
        workers: list[subprocess.Popen[bytes]] = []
        try:
            _wait_until(lambda: _healthy(base), "serve", START_DEADLINE_SECONDS)
            for name in ("a", "b"):  # A first: its procrastinate worker registers first
                environment = _environment(database, fake_github, provider, tmp_path / name)
                workers.append(_start_worker(database, environment, tmp_path / f"{name}.log"))
            worker_a = set(_registered_workers(database)[:1])
            job_ids = [_enqueue(base, url) for url in urls]
            _wait_until(lambda: _midway(database, worker_a), "A busy midway", RUN_DEADLINE_SECONDS)
            workers[0].send_signal(signal.SIGKILL)
            workers[0].wait(timeout=30)
            _wait_until(lambda: _finished(database), "every job to end", RUN_DEADLINE_SECONDS)
            documents = [_job(base, job_id) for job_id in job_ids]
            scrape = httpx.get(f"{base}/metrics", timeout=10).text
        except AssertionError as failure:
            raise AssertionError(f"{failure}\n{_logs(tmp_path)}") from None
        finally:
            for process in [*workers, serve]:
                _stop(process)
    # Each pull request has one head and one job: every job succeeded (none superseded).
    assert [document["status"] for document in documents] == ["succeeded"] * JOBS
    attempts = _query(database, "SELECT max(attempts) FROM review_jobs")[0][0]
    assert attempts >= 2, "the killed worker's job was not run again"
    posted: dict[str, int] = {}
    for request in fake_github.api_requests():
        if request.method == "POST" and request.path.endswith("/reviews"):
            posted[request.path] = posted.get(request.path, 0) + 1
    assert len(posted) == JOBS, posted
    assert set(posted.values()) == {1}, "a head was published twice"
    statuses = {document["result"]["publication"]["status"] for document in documents}
    assert statuses <= {"published", "already_published"}
    assert value(scrape, "pr_review_jobs", status="succeeded") == JOBS
    # Every process went through TLS: the server takes nothing else.
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(database.replace("sslmode=verify-full", "sslmode=disable")).close()
    logs = _logs(tmp_path)
    for secret in (PASSWORD, PROVIDER_KEY, GITHUB_TOKEN):
        assert secret not in logs


def _start_worker(database: str, environment: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """A worker, once its procrastinate worker is registered in the database."""
    before = len(_registered_workers(database))
    worker = _start(["worker", "--concurrency", "2"], environment, log)
    _wait_until(
        lambda: len(_registered_workers(database)) > before, "a worker", START_DEADLINE_SECONDS
    )
    return worker


def _midway(database: str, worker_a: set[int]) -> bool:
    """Some jobs done, and worker A holding one in flight."""
    done = _statuses(database).get("succeeded", 0) >= KILL_AFTER_SUCCEEDED
    return done and _running_on(database, worker_a) > 0


def _finished(database: str) -> bool:
    statuses = _statuses(database)
    return statuses.get("succeeded", 0) + statuses.get("superseded", 0) == JOBS


def _job(base: str, job_id: str) -> dict[str, Any]:
    document: dict[str, Any] = httpx.get(f"{base}/v1/review-jobs/{job_id}", timeout=10).json()
    return document


def _healthy(base: str) -> bool:
    try:
        return httpx.get(f"{base}/healthz", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def _enqueue(base: str, url: str) -> str:
    answer = httpx.post(
        f"{base}/v1/review-jobs", json={"pull_request_url": url, "post": True}, timeout=10
    )
    assert answer.status_code == 202, answer.text
    job_id: str = answer.json()["job_id"]
    return job_id
