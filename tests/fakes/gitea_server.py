"""A real fake Gitea on loopback: REST v1 and git smart HTTP, under a path prefix.

`FakeGitea` runs a `ThreadingHTTPServer` in a background thread, at
`http://127.0.0.1:<port>/git` (a Gitea under a sub-path, `ROOT_URL = .../git/`, on a
non-default port), with the API at `<server>/api/v1`. It answers as Gitea answers
(docs/gitea.md cites the swagger and source each rule comes from):

- `Authorization: token <t>` must name a known token when sent (else 401 on every endpoint);
  a private repository answers 404 to whoever may not read it, as Gitea hides it;
- listings take `page` (1-based) and `limit` (at most `max_items`, Gitea's
  `MAX_RESPONSE_ITEMS`, default 50) and answer `X-Total-Count` and a `Link` header with
  `rel="next"` while pages remain;
- git data is served by `git http-backend` over real bare repositories, with
  `refs/pull/<index>/head` as Gitea keeps it; a private repository's git needs basic
  credentials carrying a known token (as user name with an empty or `x-oauth-basic`
  password, or as password), 401 with a challenge otherwise.

Writes (tests/fakes/gitea_reviews.py: reviews, commit statuses, issue comments, reactions,
the collaborator-permission lookup) need a token with write access to the repository (403
otherwise). Every request is recorded (`RecordedRequest`). The `fake_gitea` fixture (a plugin of
the root conftest) yields a running server:

    def test_something(fake_gitea: FakeGitea) -> None:
        pull = fake_gitea.pull_request("acme/widget", 3, base={...}, head={...})
        settings = fake_gitea.settings(cache_dir, token=GITEA_TOKEN)
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qs

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

PREFIX = "/git"  # the sub-path Gitea is served under
API_PREFIX = f"{PREFIX}/api/v1"
DEFAULT_MAX_ITEMS = 50  # Gitea's [api] MAX_RESPONSE_ITEMS
Access = Literal["read", "write", "admin"]
ACCESS_ORDER = ("none", "read", "write", "admin", "owner")


@dataclass(frozen=True)
class User:
    """A user the fake knows, with the token it signs in with."""

    id: int
    login: str


@dataclass(frozen=True)
class PullFixture:
    """A pull request published on the fake server."""

    repo: Repository
    index: int
    base_sha: str  # the base branch's tip
    head_sha: str
    merge_base: str
    base_branch: str
    url: str


class Repository(ServedRepository):
    """A repository served by the fake."""

    def __init__(self, server: FakeGitea, path: str, repo_id: int, *, private: bool) -> None:
        super().__init__(server, path, repo_id, private=private)
        self.owner, self.name = path.split("/")
        self.access: dict[str, str] = {}  # login -> "read" | "write" | "admin"

    def permission(self, login: str | None) -> str:
        """What `login` may do here: `owner` for the owner, its grant, `read` of a public one."""
        if login is None:
            return "none" if self.private else "read"
        if login.lower() == self.owner.lower():
            return "owner"
        return self.access.get(login, "none" if self.private else "read")


# A route other fakes add: (fake, handler, record, repository, tail pieces, body) -> handled.
Route = Callable[["FakeGitea", "GiteaHandler", RecordedRequest, Repository, list[str], bytes], bool]


def user_json(user: User) -> dict[str, Any]:
    return {"id": user.id, "login": user.login, "username": user.login, "full_name": ""}


def pull_json(  # noqa: PLR0913  (a document's fields; tests name the few they set)
    index: int,
    *,
    base_sha: str = "a" * 40,
    head_sha: str = "b" * 40,
    merge_base: str | None = None,
    base_branch: str = "main",
    title: str = "A change",
    body: str = "Please review.",
    author: str = "alice",
    labels: tuple[str, ...] = (),
    draft: bool = False,
    html_url: str = "",
) -> dict[str, Any]:
    """A pull request as Gitea's API returns it (modules/structs/pull.go's fields)."""
    return {
        "id": 10_000 + index,
        "number": index,
        "user": {"id": 7, "login": author},
        "title": title,
        "body": body,
        "labels": [{"id": i + 1, "name": name} for i, name in enumerate(labels)],
        "state": "open",
        "draft": draft,
        "html_url": html_url,
        "merged": False,
        "base": {"label": base_branch, "ref": base_branch, "sha": base_sha},
        "head": {"label": f"feature-{index}", "ref": f"feature-{index}", "sha": head_sha},
        "merge_base": merge_base if merge_base is not None else base_sha,
    }


class FakeGitea(FakeForge):
    """A running fake Gitea on 127.0.0.1 (see the module docstring)."""

    prefix = PREFIX
    forge = "gitea"
    api_prefix = API_PREFIX

    def __init__(self, root: Path) -> None:
        self.tokens: dict[str, User] = {}  # token -> the user it signs in
        self.max_items = DEFAULT_MAX_ITEMS
        self.routes: list[Route] = []
        self.documents: dict[tuple[int, int], dict[str, Any]] = {}  # (repo id, index) -> pull
        self.canned: dict[tuple[int, int], CannedResponse] = {}
        self.state: dict[str, Any] = {}  # what other fakes keep (reviews, statuses, ...)
        self._repositories: dict[str, Repository] = {}
        self._pulls: dict[tuple[int, int], PullFixture] = {}
        self._users: dict[str, User] = {}
        super().__init__(root, _Server, GiteaHandler)

    # --- configuring ---

    def user(self, login: str) -> User:
        """The user `login`, made on first use with a stable id."""
        with self.lock:
            key = login.lower()
            if key not in self._users:
                self._users[key] = User(100 + len(self._users), login)
            return self._users[key]

    def add_token(self, token: str, login: str) -> User:
        """A token that signs in as `login`."""
        user = self.user(login)
        self.tokens[token] = user
        return user

    def repository(self, path: str, *, private: bool = False) -> Repository:
        """The served repository `owner/name`, created empty on first use."""
        key = path.lower()  # Gitea looks names up in lower case
        if key not in self._repositories:
            number = len(self._repositories) + 1
            self._repositories[key] = Repository(self, path, number, private=private)
        repo = self._repositories[key]
        repo.private = repo.private or private  # made public by an earlier call, now private
        return repo

    def grant(self, path: str, login: str, access: Access) -> None:
        """Make `login` a collaborator of the repository with `access`."""
        self.repository(path).access[login] = access

    def pull_request(
        self,
        path: str,
        index: int,
        *,
        base: Mapping[str, str | bytes] | None = None,
        head: Mapping[str, str | bytes] | None = None,
        base_branch: str = "main",
        private: bool = False,
        **fields: Any,
    ) -> PullFixture:
        """Publish a pull request: the base branch (advanced by `base`), a head on it."""
        repo = self.repository(path, private=private)
        head_ref = f"refs/pull/{index}/head"
        start, head_sha, merge_base = repo.open_change(index, head_ref, base_branch, base, head)
        url = f"{self.server_url}/{path}/pulls/{index}"
        self.documents[(repo.id, index)] = pull_json(
            index,
            base_sha=start,
            head_sha=head_sha,
            merge_base=merge_base,
            base_branch=base_branch,
            html_url=url,
            **fields,
        )
        fixture = PullFixture(repo, index, start, head_sha, merge_base, base_branch, url)
        self._pulls[(repo.id, index)] = fixture
        return fixture

    def set_document(self, path: str, index: int, **fields: Any) -> dict[str, Any]:
        """Answer the pull request's endpoint with a document of these fields (`pull_json`)."""
        document = pull_json(index, **fields)
        self.documents[(self.repository(path).id, index)] = document
        return document

    def respond(self, path: str, index: int, status: int, body: bytes | str = b"") -> None:
        """Answer the pull request's endpoint with exactly this."""
        data = body.encode() if isinstance(body, str) else body
        self.canned[(self.repository(path).id, index)] = CannedResponse(status, data)

    def fixture(self, path: str, index: int) -> PullFixture:
        return self._pulls[(self.repository(path).id, index)]

    def head_of(self, repo: Repository, index: int) -> str | None:
        """The head the pull request's document names (None: no such pull request)."""
        document = self.documents.get((repo.id, index))
        return None if document is None else str(document["head"]["sha"])

    # --- Gitea's rules ---

    def find_repository(self, owner: str, name: str) -> Repository | None:
        return self._repositories.get(f"{owner}/{name}".lower())

    def git_user(self, authorization: str | None) -> User | Literal[False] | None:
        """Who basic credentials sign in (None: anonymous; False: refused), as Gitea's
        services/auth/basic.go reads them: the token is the user name when the password is
        empty or `x-oauth-basic`, else the password."""
        if authorization is None:
            return None
        scheme, _, encoded = authorization.partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            name, _, password = base64.b64decode(encoded).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return False
        token = name if password in ("", "x-oauth-basic") else password
        return self.tokens.get(token, False)


class _Server(ForgeServer):
    fake: FakeGitea


class GiteaHandler(ForgeHandler):
    """The fake's request handler; routes of other fakes call its `send_json` and `send_page`."""

    server: _Server
    methods = frozenset({"GET", "POST", "PATCH", "DELETE"})

    def not_found(self, record: RecordedRequest) -> None:
        self.send_json(record, 404, {"message": "Not Found"})

    # --- the API ---

    def signed_in(self, record: RecordedRequest) -> User | Literal[False] | None:
        """The token's user (None: no token; False: a token Gitea does not know)."""
        authorization = record.authorization
        if authorization is None:
            return None
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() not in ("token", "bearer"):
            return False
        return self.server.fake.tokens.get(token.strip(), False)

    def api(self, record: RecordedRequest, path: str, body: bytes) -> None:
        fake = self.server.fake
        user = self.signed_in(record)
        if user is False:
            self.send_json(record, 401, {"message": "user does not exist", "url": ""})
            return
        if path == "/user":
            if user is None:
                self.send_json(record, 401, {"message": "token is required", "url": ""})
            else:
                self.send_json(record, 200, user_json(user))
            return
        pieces = path.split("/")  # "", "repos", owner, name, ...
        repo = fake.find_repository(pieces[2], pieces[3]) if len(pieces) >= 4 else None
        login = None if user is None else user.login
        if pieces[1:2] != ["repos"] or repo is None or repo.permission(login) == "none":
            self.send_json(record, 404, {"message": "The target couldn't be found.", "url": ""})
            return
        tail = pieces[4:]
        if len(tail) == 2 and tail[0] == "pulls" and self.command == "GET":
            key = (repo.id, int(tail[1]) if tail[1].isdigit() else -1)
            missing = {"message": "pull request does not exist", "url": ""}
            self.send_change(record, fake.canned.get(key), fake.documents.get(key), missing)
            return
        if any(route(fake, self, record, repo, tail, body) for route in fake.routes):
            return
        self.send_json(record, 404, {"message": "Not Found", "url": ""})

    def may_write(self, record: RecordedRequest, repo: Repository) -> User | None:
        """The signed-in user when it may write to `repo`; else None, Gitea's answer sent
        (401 without a token, 403 with a token that may only read)."""
        user = self.signed_in(record)
        if not user:
            self.send_json(record, 401, {"message": "token is required", "url": ""})
            return None
        if ACCESS_ORDER.index(repo.permission(user.login)) < ACCESS_ORDER.index("write"):
            self.send_json(record, 403, {"message": "user should have write access", "url": ""})
            return None
        return user

    def send_page(self, record: RecordedRequest, items: list[Any]) -> None:
        """One page of `items` as Gitea pages a listing (`page`, `limit`; `X-Total-Count`
        and a `Link` header naming the next and last pages while pages remain)."""
        fake = self.server.fake
        query = parse_qs(record.query)
        try:
            limit = int(query.get("limit", [str(fake.max_items)])[0])
            page = max(1, int(query.get("page", ["1"])[0]))
        except ValueError:
            self.send_json(record, 422, {"message": "invalid page or limit", "url": ""})
            return
        limit = fake.max_items if limit <= 0 else min(limit, fake.max_items)
        pages = max(1, -(-len(items) // limit))
        headers = {"X-Total-Count": str(len(items))}
        if page < pages:
            base = f"{fake.origin}{record.path}"
            headers["Link"] = (
                f'<{base}?limit={limit}&page={page + 1}>; rel="next",'
                f'<{base}?limit={limit}&page={pages}>; rel="last"'
            )
        self.send_json(record, 200, items[(page - 1) * limit : page * limit], headers)

    # --- git ---

    def git(self, record: RecordedRequest, path: str, query: str, body: bytes) -> None:
        fake = self.server.fake
        repo_path, _, rest = path.partition(".git/")
        owner, _, name = repo_path.lstrip("/").partition("/")
        repo = fake.find_repository(owner, name)
        user = fake.git_user(record.authorization)
        login = user.login if user else None
        if repo is None or user is False or repo.permission(login) == "none":
            challenge = {"WWW-Authenticate": 'Basic realm="Gitea"'}
            self.send(record, 401, b"Unauthorized\n", challenge)
            return
        if fake.git_redirect is not None:
            self.send(record, 302, b"", {"Location": fake.git_redirect + path})
            return
        path = f"/{repo.path}.git/{rest}"  # any case names the repository, as on Gitea
        self.send_git(record, path, query, body)


@pytest.fixture
def fake_gitea(tmp_path: Path) -> Iterator[FakeGitea]:
    """A running fake Gitea whose repositories live under tmp_path/fake-gitea."""
    yield from serving(FakeGitea(tmp_path / "fake-gitea"))
