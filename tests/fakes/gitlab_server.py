"""A real fake GitLab on loopback: REST v4 and git smart HTTP, under a path prefix.

`FakeGitLab` runs a `ThreadingHTTPServer` in a background thread, at
`http://127.0.0.1:<port>/gitlab` (a self-managed GitLab under a relative URL root, on a
non-default port), with the API at `<server>/api/v4`. It enforces GitLab's rules:

- a project is named by its URL-encoded full path (`grp%2Fsub%2Fproject`, any case) or its
  numeric id; a literal `/` in the id is no project (404), as on GitLab;
- `PRIVATE-TOKEN` must be a known token when sent (else 401 on every endpoint); a private
  project answers 401 to a request without one, an unknown project or merge request 404;
- listings are paginated with `X-Page`, `X-Next-Page` (empty on the last page), `X-Per-Page`,
  `X-Total`, `X-Total-Pages`; `per_page` defaults to 20 and is at most 100 (`page_size` lowers
  it for a test; `omit_total_pages` drops the totals, as GitLab does past 10,000 items);
- git data is served by `git http-backend` over real bare repositories, with
  `refs/merge-requests/<iid>/head` as GitLab publishes them; a private project's git needs
  basic credentials `oauth2:<token>` (401 with a `WWW-Authenticate` challenge otherwise).

Every request is recorded (`RecordedRequest`). Other fakes add endpoints by appending a `Route`
to `routes` (tests/fakes/gitlab_notes.py for notes and discussions). The `fake_gitlab` fixture
(a plugin of the root conftest) yields a running server:

    def test_something(fake_gitlab: FakeGitLab) -> None:
        mr = fake_gitlab.merge_request("grp/sub/project", 3, base={...}, head={...})
        settings = fake_gitlab.settings(cache_dir, token=GITLAB_TOKEN)
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote

import pytest

from tests.fakes.forge_server import (
    CannedResponse,
    FakeForge,
    ForgeHandler,
    ForgeServer,
    RecordedRequest,
    ServedRepository,
    serving,
)

PREFIX = "/gitlab"  # the relative URL root of the self-managed instance
API_PREFIX = f"{PREFIX}/api/v4"
DEFAULT_PER_PAGE = 20
MAX_PER_PAGE = 100


@dataclass(frozen=True)
class MergeRequestFixture:
    """A merge request published on the fake server."""

    project: Project
    iid: int
    start_sha: str  # the target branch's tip when the diff was made: our base
    head_sha: str
    base_sha: str  # GitLab's merge base of the target branch and the head
    target_branch: str
    url: str


class Project(ServedRepository):
    """A project served by the fake."""

    def set_branch(self, name: str, sha: str) -> None:
        self.publish(sha, f"refs/heads/{name}")

    def set_merge_request_head(self, iid: int, sha: str) -> None:
        self.publish(sha, f"refs/merge-requests/{iid}/head")


# A route other fakes add: (fake, handler, record, project, tail pieces, body) -> handled.
Route = Callable[["FakeGitLab", "_Handler", RecordedRequest, Project, list[str], bytes], bool]


def merge_request_json(  # noqa: PLR0913  (a document's fields; tests name the few they set)
    iid: int,
    *,
    project_id: int = 1,
    start_sha: str | None = "a" * 40,
    head_sha: str = "b" * 40,
    base_sha: str | None = None,
    target_branch: str = "main",
    title: str = "A change",
    description: str | None = "Please review.",
    author: str = "alice",
    labels: tuple[str, ...] = (),
    draft: bool = False,
    web_url: str = "",
) -> dict[str, Any]:
    """A merge request as GitLab's API returns it (the fields a review reads, and some more)."""
    diff_refs = (
        None
        if start_sha is None
        else {"base_sha": base_sha or start_sha, "head_sha": head_sha, "start_sha": start_sha}
    )
    return {
        "id": 10_000 + iid,
        "iid": iid,
        "project_id": project_id,
        "title": title,
        "description": description,
        "state": "opened",
        "target_branch": target_branch,
        "source_branch": f"feature-{iid}",
        "author": {"id": 7, "username": author, "name": author.title()},
        "labels": list(labels),
        "draft": draft,
        "work_in_progress": draft,
        "sha": head_sha,
        "diff_refs": diff_refs,
        "web_url": web_url,
    }


class FakeGitLab(FakeForge):
    """A running fake GitLab on 127.0.0.1 (see the module docstring)."""

    prefix = PREFIX
    forge = "gitlab"
    api_prefix = API_PREFIX

    def __init__(self, root: Path) -> None:
        self.users: dict[str, str] = {}  # token -> username answered by GET /user
        self.user_ids: dict[str, int] = {}  # username -> its id in every document (user_id)
        self.page_size = MAX_PER_PAGE  # at most this many items per page, whatever per_page says
        self.omit_total_pages = False  # as GitLab past 10,000 items: no X-Total, X-Total-Pages
        self.routes: list[Route] = []
        self.documents: dict[tuple[int, int], dict[str, Any]] = {}  # (project id, iid) -> MR
        self.canned: dict[tuple[int, int], CannedResponse] = {}
        self._projects: dict[str, Project] = {}
        self._merge_requests: dict[tuple[int, int], MergeRequestFixture] = {}
        super().__init__(root, _Server, _Handler)

    # --- configuring ---

    def project(self, path: str, *, private: bool = False) -> Project:
        """The served project at `path` (`grp/sub/project`), created empty on first use."""
        key = path.lower()  # GitLab's paths are case-insensitive
        if key not in self._projects:
            self._projects[key] = Project(self, path, len(self._projects) + 1, private=private)
        return self._projects[key]

    def merge_request(
        self,
        path: str,
        iid: int,
        *,
        base: Mapping[str, str | bytes] | None = None,
        head: Mapping[str, str | bytes] | None = None,
        target_branch: str = "main",
        private: bool = False,
        **fields: Any,
    ) -> MergeRequestFixture:
        """Publish a merge request: the target branch (advanced by `base`), a head on it."""
        project = self.project(path, private=private)
        head_ref = f"refs/merge-requests/{iid}/head"
        start, head_sha, merge_base = project.open_change(iid, head_ref, target_branch, base, head)
        url = f"{self.server_url}/{path}/-/merge_requests/{iid}"
        self.documents[(project.id, iid)] = merge_request_json(
            iid,
            project_id=project.id,
            start_sha=start,
            head_sha=head_sha,
            base_sha=merge_base,
            target_branch=target_branch,
            web_url=url,
            **fields,
        )
        fixture = MergeRequestFixture(project, iid, start, head_sha, merge_base, target_branch, url)
        self._merge_requests[(project.id, iid)] = fixture
        return fixture

    def set_document(self, path: str, iid: int, **fields: Any) -> dict[str, Any]:
        """Answer the merge request's endpoint with a document of these fields (see
        `merge_request_json`), whatever the repository holds."""
        project = self.project(path)
        document = merge_request_json(iid, project_id=project.id, **fields)
        self.documents[(project.id, iid)] = document
        return document

    def respond(
        self,
        path: str,
        iid: int,
        status: int,
        body: bytes | str = b"",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Answer the merge request's endpoint with exactly this."""
        data = body.encode() if isinstance(body, str) else body
        self.canned[(self.project(path).id, iid)] = CannedResponse(
            status, data, dict(headers or {})
        )

    def fixture(self, path: str, iid: int) -> MergeRequestFixture:
        return self._merge_requests[(self.project(path).id, iid)]

    def user_id(self, username: str) -> int:
        """The user's id, as notes, awards and `GET /user` give it (stable for the server)."""
        with self.lock:
            return self.user_ids.setdefault(username, 100 + len(self.user_ids))

    # --- GitLab's rules ---

    def find_project(self, project_id: str) -> Project | None:
        """The project an API path's `:id` names: a numeric id or the URL-encoded full path
        (already decoded once by the caller; a raw `/` never reaches here)."""
        if project_id.isdigit():
            return next((p for p in self._projects.values() if p.id == int(project_id)), None)
        return self._projects.get(project_id.lower())

    def git_access(self, authorization: str | None, project: Project) -> bool:
        """Basic `oauth2:<token>` with a known token, or a public project's anonymous read."""
        if authorization is None:
            return not project.private
        allowed = {
            "Basic " + base64.b64encode(f"oauth2:{token}".encode()).decode() for token in self.users
        }
        return authorization in allowed


class _Server(ForgeServer):
    fake: FakeGitLab


class _Handler(ForgeHandler):
    server: _Server
    methods = frozenset({"GET", "POST", "PUT", "DELETE"})

    def not_found(self, record: RecordedRequest) -> None:
        self.send_json(record, 404, {"message": "404 Not Found"})

    # --- the API ---

    def api(  # noqa: C901, PLR0911  (one return per endpoint)
        self, record: RecordedRequest, path: str, body: bytes
    ) -> None:
        fake = self.server.fake
        token = record.private_token
        if token is not None and token not in fake.users:
            self.send_json(record, 401, {"message": "401 Unauthorized"})
            return
        if path == "/user":
            if token is None:
                self.send_json(record, 401, {"message": "401 Unauthorized"})
            else:
                username = fake.users[token]
                self.send_json(record, 200, {"id": fake.user_id(username), "username": username})
            return
        pieces = path.split("/")  # "", "projects", id, ...
        if len(pieces) < 3 or pieces[1] != "projects":
            self.send_json(record, 404, {"message": "404 Not Found"})
            return
        project = fake.find_project(unquote(pieces[2]))
        if project is None:
            self.send_json(record, 404, {"message": "404 Project Not Found"})
            return
        if project.private and token is None:
            self.send_json(record, 401, {"message": "401 Unauthorized"})
            return
        tail = pieces[3:]
        if not tail and self.command == "GET":
            document = {"id": project.id, "path_with_namespace": project.path}
            self.send_json(record, 200, document)
            return
        if tail == ["merge_requests"] and self.command == "GET":
            items = [d for (pid, _), d in sorted(fake.documents.items()) if pid == project.id]
            self.send_page(record, items)
            return
        if len(tail) == 2 and tail[0] == "merge_requests" and self.command == "GET":
            key = (project.id, int(tail[1]) if tail[1].isdigit() else -1)
            missing = {"message": "404 Not found"}
            self.send_change(record, fake.canned.get(key), fake.documents.get(key), missing)
            return
        if any(route(fake, self, record, project, tail, body) for route in fake.routes):
            return
        self.send_json(record, 404, {"message": "404 Not Found"})

    def send_page(self, record: RecordedRequest, items: list[Any]) -> None:
        """One page of `items` as GitLab paginates a listing (offset pagination)."""
        query = parse_qs(record.query)
        fake = self.server.fake
        try:
            per_page = int(query.get("per_page", [str(DEFAULT_PER_PAGE)])[0])
            page = max(1, int(query.get("page", ["1"])[0]))
        except ValueError:
            self.send_json(record, 400, {"error": "page is invalid"})
            return
        per_page = max(1, min(per_page, MAX_PER_PAGE, fake.page_size))
        pages = max(1, -(-len(items) // per_page))
        headers = {
            "X-Page": str(page),
            "X-Per-Page": str(per_page),
            "X-Total": str(len(items)),
            "X-Total-Pages": str(pages),
            "X-Next-Page": str(page + 1) if page < pages else "",
            "X-Prev-Page": str(page - 1) if page > 1 else "",
        }
        if fake.omit_total_pages:
            del headers["X-Total"], headers["X-Total-Pages"]
        self.send_json(record, 200, items[(page - 1) * per_page : page * per_page], headers)

    def signed_in(self, record: RecordedRequest) -> str | None:
        """The request's token; None (and GitLab's 401 sent) when it has none: every write
        needs one, whatever the project's visibility."""
        if record.private_token is None:
            self.send_json(record, 401, {"message": "401 Unauthorized"})
        return record.private_token

    # --- git ---

    def git(self, record: RecordedRequest, path: str, query: str, body: bytes) -> None:
        fake = self.server.fake
        project_path, _, rest = path.partition(".git/")
        project = fake._projects.get(project_path.lstrip("/").lower())
        if project is None:
            self.send(record, 404, b"not found", {"Content-Type": "text/plain"})
            return
        path = f"/{project.path}.git/{rest}"  # any case names the project, as on GitLab
        if not fake.git_access(record.authorization, project):
            challenge = {"WWW-Authenticate": 'Basic realm="GitLab"'}
            self.send(record, 401, b"HTTP Basic: Access denied", challenge)
            return
        if fake.git_redirect is not None:
            location = fake.git_redirect + path + (f"?{query}" if query else "")
            self.send(record, 302, b"", {"Location": location})
            return
        self.send_git(record, path, query, body)


@pytest.fixture
def fake_gitlab(tmp_path: Path) -> Iterator[FakeGitLab]:
    """A running fake GitLab whose repositories live under tmp_path/fake-gitlab."""
    yield from serving(FakeGitLab(tmp_path / "fake-gitlab"))
