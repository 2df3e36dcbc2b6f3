"""What the three fake forges share: the record of a request, the server that keeps them, the
handler that records, routes and answers, and a served repository built through a working one.

`FakeForge` is a fake's base: it starts its loopback server (`prefix`: the path the forge is
served under; `api_prefix`: where its API is), keeps every request (`requests`,
`api_requests`, `git_requests`) and makes settings pointing at it; `serving` is a fixture's
body. `ForgeHandler` routes a request one way for every fake: under the API prefix to `api`
(or to `api_redirect` when set), a git path under the prefix to `git`, anything else to
`not_found`; each fake's handler answers with its own forge's rules, and answers a change's
document (`send_change`) and git (`send_git`) the same way. `ServedRepository` is the bare
repository the GitLab and Gitea fakes serve, with the commits and refs a test publishes; a
change is opened on it with `open_change`.
"""

from __future__ import annotations

import json
import threading
import time
from abc import abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar
from urllib.parse import SplitResult

from pydantic import SecretStr

from pr_review_api.settings import Settings
from tests.fakes.git_smart_http import GitHandler, LoopbackServer, serve_in_thread, stop
from tests.gitrepo import GitRepo, git


@dataclass
class RecordedRequest:
    """One request a fake server received."""

    method: str
    path: str  # as sent, still percent-encoded
    query: str
    headers: dict[str, str] = field(default_factory=dict)  # lower-case names
    status: int = 0
    body: bytes = b""  # of an API request; a git request's is not kept
    response_bytes: int = 0
    client_port: int = 0

    @property
    def authorization(self) -> str | None:
        return self.headers.get("authorization")

    @property
    def private_token(self) -> str | None:
        """GitLab's token header."""
        return self.headers.get("private-token")

    @property
    def git_protocol(self) -> str | None:
        return self.headers.get("git-protocol")

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class CannedResponse:
    """An answer a test fixed for one endpoint."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


class ForgeServer(LoopbackServer):
    """A fake's loopback server, which knows its fake."""

    fake: FakeForge


class FakeForge:
    """A running fake forge on 127.0.0.1 that records every request it answers."""

    forge: ClassVar[str]  # how the settings name it: `<forge>_server_url`, `<forge>_token`
    prefix: ClassVar[str] = ""  # the path the forge is served under ("" at the root)
    api_prefix: ClassVar[str]

    def __init__(self, root: Path, server: type[ForgeServer], handler: type[ForgeHandler]) -> None:
        self.root = root
        self.git_root = root / "git"
        self.git_root.mkdir(parents=True, exist_ok=True)
        self.requests: list[RecordedRequest] = []
        self.api_redirect: str | None = None  # answer API requests with a redirect to this URL
        self.git_redirect: str | None = None  # answer git requests with a redirect to this URL
        self.lock = threading.Lock()
        self._httpd = server(("127.0.0.1", 0), handler)
        self._httpd.fake = self
        self.port = self._httpd.server_address[1]
        self.origin = f"http://127.0.0.1:{self.port}"
        self.server_url = f"{self.origin}{self.prefix}"
        self.api_url = f"{self.origin}{self.api_prefix}"
        self._thread = serve_in_thread(self._httpd)

    def close(self) -> None:
        stop(self._httpd, self._thread)

    def settings(self, cache_dir: Path, token: str | None = None, **overrides: Any) -> Settings:
        """Settings pointing at this server (its API URL left to the default, found from the
        server's), with `token` as the forge's token."""
        values: dict[str, Any] = {
            f"{self.forge}_server_url": self.server_url,
            f"{self.forge}_token": None if token is None else SecretStr(token),
            "pr_review_cache_dir": cache_dir,
        }
        return Settings(**(values | overrides))

    def api_requests(self) -> list[RecordedRequest]:
        with self.lock:
            return [r for r in self.requests if r.path.startswith(self.api_prefix + "/")]

    def git_requests(self) -> list[RecordedRequest]:
        with self.lock:
            return [r for r in self.requests if ".git/" in r.path]

    def keep(self, request: RecordedRequest) -> None:
        with self.lock:
            self.requests.append(request)


Fake = TypeVar("Fake", bound=FakeForge)


def serving(fake: Fake) -> Iterator[Fake]:
    """`fake` for one test (a fixture's body), closed after it."""
    try:
        yield fake
    finally:
        fake.close()


class ForgeHandler(GitHandler[RecordedRequest]):
    """A fake's request handler: every request recorded, routed by its path, and answered
    with its status and size kept in its record."""

    server: ForgeServer

    def record(self, parts: SplitResult) -> RecordedRequest:
        record = RecordedRequest(
            method=self.command,
            path=parts.path,
            query=parts.query,
            headers={name.lower(): value for name, value in self.headers.items()},
            client_port=self.client_address[1],
        )
        self.server.fake.keep(record)
        return record

    def route(self, record: RecordedRequest, parts: SplitResult, body: bytes) -> None:
        fake = self.server.fake
        if parts.path.startswith(fake.api_prefix + "/"):
            record.body = body
            if fake.api_redirect is not None:
                self.send(record, 302, b"", {"Location": fake.api_redirect})
                return
            self.api(record, parts.path[len(fake.api_prefix) :], body)
        elif parts.path.startswith(fake.prefix + "/") and ".git/" in parts.path:
            self.git(record, parts.path[len(fake.prefix) :], parts.query, body)
        else:
            self.not_found(record)

    @abstractmethod
    def api(self, record: RecordedRequest, path: str, body: bytes) -> None:
        """Answer an API request (`path` after the API prefix)."""

    @abstractmethod
    def git(self, record: RecordedRequest, path: str, query: str, body: bytes) -> None:
        """Answer a git request (`path` after the prefix)."""

    @abstractmethod
    def not_found(self, record: RecordedRequest) -> None:
        """Answer a path that is neither the API nor git."""

    def send_change(
        self,
        record: RecordedRequest,
        canned: CannedResponse | None,
        document: dict[str, Any] | None,
        missing: dict[str, Any],
    ) -> None:
        """A change's endpoint: what a test fixed for it, else its document, else 404 with
        the forge's `missing` body."""
        if canned is not None:
            self.send(record, canned.status, canned.body, canned.headers)
        elif document is None:
            self.send_json(record, 404, missing)
        else:
            self.send_json(record, 200, document)

    def send_json(
        self,
        record: RecordedRequest,
        status: int,
        document: Any,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        data = json.dumps(document).encode()
        self.send(record, status, data, {"Content-Type": "application/json", **(headers or {})})

    def send_git(self, record: RecordedRequest, path: str, query: str, body: bytes) -> None:
        """The backend's answer to a git request the fake let through (`path` under its git
        root)."""
        status, headers, payload = self.serve_git(self.server.fake.git_root, path, query, body)
        self.send(record, status, payload, headers)

    def send(
        self, record: RecordedRequest, status: int, body: bytes, headers: Mapping[str, str]
    ) -> None:
        record.status = status
        record.response_bytes = len(body)
        self._write(status, body, headers)


class ServedRepository:
    """A bare repository a fake serves (at `<git_root>/<path>.git`), built through a working
    repository so that a test's commits reach it only when published; `id` is the forge's
    number for it, and a `private` one is hidden from whoever may not read it."""

    def __init__(self, fake: FakeForge, path: str, number: int, *, private: bool) -> None:
        self.path = path
        self.id = number
        self.private = private
        self.bare = fake.git_root / f"{path}.git"
        self.bare.parent.mkdir(parents=True, exist_ok=True)
        git(self.bare.parent, "init", "-q", "--bare", self.bare.name)
        self.work = GitRepo(fake.root / "work" / path)

    def publish(self, sha: str, ref: str) -> None:
        """Point `ref` of the served repository at `sha` (forced)."""
        git(self.work.path, "push", "-q", "--force", str(self.bare), f"{sha}:{ref}")

    def branch(self, name: str) -> str:
        return git(self.bare, "for-each-ref", "--format=%(objectname)", f"refs/heads/{name}")

    def commit(
        self, files: Mapping[str, str | bytes], parent: str | None, message: str = "c"
    ) -> str:
        """Commit files on top of `parent` (None: a root commit) without moving any branch."""
        if parent is None:
            git(self.work.path, "checkout", "-q", "--orphan", f"tmp-{time.monotonic_ns()}")
            git(self.work.path, "rm", "-rfq", "--ignore-unmatch", ".")
            git(self.work.path, "clean", "-fdxq")
        else:
            git(self.work.path, "checkout", "-q", "--detach", parent)
        return self.work.commit_files(files, message)

    def open_change(
        self,
        number: int,
        head_ref: str,
        branch: str,
        base: Mapping[str, str | bytes] | None,
        head: Mapping[str, str | bytes] | None,
    ) -> tuple[str, str, str]:
        """Publish a change: `branch` (advanced by `base`, made when missing) and a head on
        it at `head_ref`. Returns the branch's tip, the head and their merge base."""
        current = self.branch(branch)
        start = current or self.commit(base or {"README.md": "hello\n"}, None, "base")
        if current and base:
            start = self.commit(base, current, "base")
        if start != current:
            self.publish(start, f"refs/heads/{branch}")
        head_sha = self.commit(head or {f"change-{number}.txt": f"{number}\n"}, start, "head")
        self.publish(head_sha, head_ref)
        return start, head_sha, git(self.bare, "merge-base", start, head_sha)
