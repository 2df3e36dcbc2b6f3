"""A real fake GitHub on loopback: the REST pull-request endpoint and git smart HTTP.

`FakeGitHub` runs a `ThreadingHTTPServer` in a background thread. It answers

- `GET /api/v3/repos/{owner}/{repo}/pulls/{number}` with what a test configured
  (`set_pull` for GitHub-shaped JSON, `respond` for any status, headers, body and delay);
- `/{owner}/{repo}.git/...` by running `git http-backend` (found via `git --exec-path`) as a
  CGI program over bare repositories under `root/git`, so the client speaks to real git.

Every request is recorded (method, path, query, Authorization header, status, bytes sent) so
tests can assert the token was sent, and that no other repository (a planted submodule, say)
was ever asked for. `Origin` builds the bare "origin" repositories: branches, and
`refs/pull/N/head` as GitHub publishes them. The `fake_github` fixture (a plugin of the root
conftest, so no test imports it) yields a running server:

    from tests.fakes.github_server import FakeGitHub

    def test_something(fake_github: FakeGitHub) -> None:
        pull = fake_github.pull_request("acme", "widget", 7, base={"a.py": "1\\n"}, head={...})
        settings = fake_github.settings(cache_dir)
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import SplitResult

import pytest

from pr_review_api.settings import Settings
from tests.fakes import forge_server
from tests.fakes.forge_server import (
    FakeForge,
    ForgeHandler,
    ForgeServer,
    RecordedRequest,
    serving,
)
from tests.fakes.github_app import FakeApp, app_endpoint
from tests.fakes.github_comments import comment_endpoints, graphql
from tests.fakes.github_documents import pull_json
from tests.fakes.github_issues import issues
from tests.fakes.github_reviews import comment_view, create_review, reviews
from tests.gitrepo import FastCommit, GitRepo, git, import_commits

API_PREFIX = "/api/v3"


@dataclass
class CannedResponse(forge_server.CannedResponse):
    """What the API answers for one pull request, after a delay."""

    delay: float = 0.0


@dataclass(frozen=True)
class PullRequestFixture:
    """A pull request published on the fake server."""

    origin: Origin
    number: int
    base_sha: str
    head_sha: str
    base_ref: str
    url: str


class Origin:
    """A bare repository served by the fake server, built through a working repository."""

    def __init__(self, server: FakeGitHub, owner: str, repo: str) -> None:
        self.server = server
        self.owner = owner
        self.repo = repo
        self.bare = server.git_root / owner / f"{repo}.git"
        self.bare.parent.mkdir(parents=True, exist_ok=True)
        git(self.bare.parent, "init", "-q", "--template=", "--bare", self.bare.name)
        self.work = GitRepo(server.root / "work" / owner / repo)
        # The working repository reads the served one's objects, so a commit can be made
        # straight in the served repository (`FakeGitHub.pull_request`) and still be a parent
        # here. Never the other way: the served repository holds only what was published.
        alternates = self.work.git_dir / "objects" / "info" / "alternates"
        alternates.parent.mkdir(parents=True, exist_ok=True)
        alternates.write_text(f"{self.bare.resolve() / 'objects'}\n")

    def publish(self, sha: str, ref: str) -> None:
        """Point `ref` of the served repository at `sha` (forced)."""
        git(self.work.path, "push", "-q", "--force", str(self.bare), f"{sha}:{ref}")

    def set_branch(self, name: str, sha: str) -> None:
        self.publish(sha, f"refs/heads/{name}")

    def set_pull_head(self, number: int, sha: str) -> None:
        self.publish(sha, f"refs/pull/{number}/head")

    def commit(
        self, files: Mapping[str, str | bytes], parent: str | None, message: str = "c"
    ) -> str:
        """Commit files on top of `parent` (None: a root commit) without moving any branch."""
        return self.work.commit_onto(files, parent, message)

    def has_object(self, sha: str) -> bool:
        done = subprocess.run(
            ["git", "--git-dir", str(self.bare), "cat-file", "-e", sha],
            capture_output=True,
            check=False,
            env={"PATH": os.environ.get("PATH", os.defpath), "GIT_CONFIG_NOSYSTEM": "1"},
        )
        return done.returncode == 0


class FakeGitHub(FakeForge):
    """A running fake GitHub on 127.0.0.1 (see the module docstring)."""

    forge = "github"
    api_prefix = API_PREFIX

    def __init__(self, root: Path) -> None:
        self.responses: dict[tuple[str, str, int], CannedResponse] = {}
        self.require_token: str | None = None
        self.git_delay = 0.0
        self._origins: dict[tuple[str, str], Origin] = {}
        # --- reviews (the publishing endpoints) ---
        self.users: dict[str, str] = {}  # token -> login answered by GET /user
        self.workflow_tokens: set[str] = set()  # post as github-actions[bot]; /user is 403
        self.refused_tokens: set[str] = set()  # answered 401 Bad credentials on /user, /repos
        # token -> `permissions` in GET /repos/{o}/{r} (absent: the answer has none, as a
        # workflow token's)
        self.repo_permissions: dict[str, dict[str, bool]] = {}
        self.page_size = 100  # at most this many items per page, whatever per_page says
        self.reviews: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
        self.review_comments: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
        self.review_faults: list[CannedResponse] = []  # answers to the next review POSTs
        self.list_faults: list[CannedResponse] = []  # answers to the next review listings
        self.review_posts: list[dict[str, Any]] = []  # every POSTed review payload
        self.review_edits: list[tuple[int, str]] = []  # (review id, body) of each edit taken
        self.edit_faults: list[CannedResponse] = []  # answers to the next review edits (PUT)
        # --- the merge gate (check runs and commit statuses) ---
        self.no_checks_tokens: set[str] = set()  # tokens answered 403 on check runs (personal)
        self.check_runs: dict[int, dict[str, Any]] = {}  # id -> the run as GitHub keeps it
        self.check_requests: list[tuple[str, dict[str, Any]]] = []  # (method, payload) each
        self.statuses: list[dict[str, Any]] = []  # every commit status, with its `sha`
        # --- the comment commands (specification §15) ---
        # (owner, repo, user) -> "admin" | "maintain" | "write" | "triage" | "read" | "none"
        self.permissions: dict[tuple[str, str, str], str] = {}
        self.permission_requests = 0
        self.issue_comments: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
        self.reactions: list[dict[str, Any]] = []  # {"on", "comment_id", "content", "user"}
        self.reply_refusals = 0  # replies refused because the target was not top-level
        self.resolved_threads: set[str] = set()  # node ids of resolved review threads
        # --- a GitHub App (install_app): its JWT, installations and their tokens ---
        self.app: FakeApp | None = None
        # --- issues (specification §21; tests/fakes/github_issues.py) ---
        # (owner, repo, number), lower case -> (title, body)
        self.issues: dict[tuple[str, str, int], tuple[str, str | None]] = {}
        self.hidden_repos: set[tuple[str, str]] = set()  # 404 to every issue read
        self.issue_reads: list[tuple[str, str, int]] = []
        self._pulls: dict[tuple[str, str, int], PullRequestFixture] = {}
        self._next_id = 1000
        self._stopping = threading.Event()
        super().__init__(root, _Server, _Handler)

    def close(self) -> None:
        self._stopping.set()
        super().close()

    def settings(self, cache_dir: Path, token: str | None = None, **overrides: Any) -> Settings:
        """Settings pointing at this server, its API URL too."""
        return super().settings(cache_dir, token, github_api_url=self.api_url, **overrides)

    # --- configuring answers ---

    def install_app(
        self, public_key: Any, *, app_id: int, slug: str, installations: dict[int, str]
    ) -> FakeApp:
        """A GitHub App installed on `installations` (id -> account): from now on the API and
        git take only its installation tokens (tests/fakes/github_app.py)."""
        self.app = FakeApp(app_id, slug, public_key, installations)
        return self.app

    def repository(self, owner: str, repo: str) -> Origin:
        """The served repository owner/repo, created empty on first use."""
        key = (owner, repo)
        if key not in self._origins:
            self._origins[key] = Origin(self, owner, repo)
        return self._origins[key]

    def respond(
        self,
        owner: str,
        repo: str,
        number: int,
        status: int = 200,
        body: bytes | str = b"",
        *,
        headers: Mapping[str, str] | None = None,
        delay: float = 0.0,
    ) -> None:
        """Answer the pull request's API URL with exactly this."""
        data = body.encode() if isinstance(body, str) else body
        self.responses[(owner, repo, number)] = CannedResponse(
            status, data, dict(headers or {}), delay
        )

    def set_pull(self, owner: str, repo: str, number: int, **fields: Any) -> dict[str, Any]:
        """Answer the API with a GitHub-shaped document (see `pull_json`)."""
        document = pull_json(number, **fields)
        self.respond(
            owner,
            repo,
            number,
            200,
            json.dumps(document),
            headers={"Content-Type": "application/json"},
        )
        return document

    def pull_request(  # noqa: PLR0913  (every field has a default; a test names the few it sets)
        self,
        owner: str,
        repo: str,
        number: int,
        *,
        base: Mapping[str, str | bytes] | None = None,
        head: Mapping[str, str | bytes] | None = None,
        base_ref: str = "main",
        title: str = "A change",
        body: str | None = "Please review.",
        author: str = "octocat",
        labels: tuple[str, ...] = (),
    ) -> PullRequestFixture:
        """Publish a pull request: the base branch (advanced by `base`), a head commit on it."""
        origin = self.repository(owner, repo)
        current = git(
            origin.bare, "for-each-ref", "--format=%(objectname)", f"refs/heads/{base_ref}"
        )
        # Published as they are made: both commits straight in the served repository, each
        # on its ref, in one process (as a push of the base branch and the pull head would).
        commits = []
        if base or not current:
            base_files = base or {"README.md": "hello\n"}
            commits.append(
                FastCommit(f"refs/heads/{base_ref}", base_files, current or None, "base")
            )
        head_files = head or {f"change-{number}.txt": f"{number}\n"}
        head_parent = 0 if commits else current
        commits.append(FastCommit(f"refs/pull/{number}/head", head_files, head_parent, "head"))
        *made, head_sha = import_commits(origin.bare, commits)
        base_sha = made[0] if made else current
        self.set_pull(
            owner,
            repo,
            number,
            base_sha=base_sha,
            head_sha=head_sha,
            base_ref=base_ref,
            title=title,
            body=body,
            author=author,
            labels=labels,
        )
        url = f"{self.server_url}/{owner}/{repo}/pull/{number}"
        fixture = PullRequestFixture(origin, number, base_sha, head_sha, base_ref, url)
        self._pulls[(owner, repo, number)] = fixture
        return fixture

    def push_head(
        self, pull: PullRequestFixture, files: Mapping[str, str | bytes], parent: str | None = None
    ) -> PullRequestFixture:
        """A new head on the pull request (a push): a commit on `parent` (default the head),
        made straight in the served repository."""
        pushed = FastCommit(f"refs/pull/{pull.number}/head", files, parent or pull.head_sha, "push")
        [head_sha] = import_commits(pull.origin.bare, [pushed])
        owner, repo = pull.origin.owner, pull.origin.repo
        self.set_pull(
            owner,
            repo,
            pull.number,
            base_sha=pull.base_sha,
            head_sha=head_sha,
            base_ref=pull.base_ref,
        )
        new = PullRequestFixture(
            pull.origin, pull.number, pull.base_sha, head_sha, pull.base_ref, pull.url
        )
        self._pulls[(owner, repo, pull.number)] = new
        return new

    def add_issue(self, owner: str, repo: str, number: int, title: str, body: str = "") -> None:
        """An issue of owner/repo (tests/fakes/github_issues.py answers it)."""
        self.issues[(owner.lower(), repo.lower(), number)] = (title, body)

    def pulls(self) -> dict[tuple[str, str, int], PullRequestFixture]:
        """The pull requests published, by (owner, repo, number) in lower case."""
        return {(o.lower(), r.lower(), n): p for (o, r, n), p in self._pulls.items()}

    # --- reviews ---

    def add_review(
        self, owner: str, repo: str, number: int, author: str, body: str, commit_id: str = ""
    ) -> dict[str, Any]:
        """A review already on the pull request (someone else's, or a planted one)."""
        review = self._new_review(owner, repo, number, author, body, commit_id)
        self.reviews.setdefault((owner, repo, number), []).append(review)
        return review

    def add_review_comment(
        self,
        owner: str,
        repo: str,
        number: int,
        author: str,
        body: str,
        in_reply_to_id: int | None = None,
    ) -> dict[str, Any]:
        """A review comment by `author`; with `in_reply_to_id`, a reply in that thread."""
        comment: dict[str, Any] = {"id": self._id(), "user": {"login": author}, "body": body}
        if in_reply_to_id is not None:
            top = self.review_comment(in_reply_to_id)
            assert top is not None
            assert "in_reply_to_id" not in top
            comment.update(
                in_reply_to_id=in_reply_to_id,
                path=top.get("path"),
                commit_id=top.get("commit_id"),
                original_commit_id=top.get("original_commit_id"),
            )
        self.review_comments.setdefault((owner, repo, number), []).append(comment)
        return comment

    def review_comment(self, comment_id: int) -> dict[str, Any] | None:
        for comments in self.review_comments.values():
            for comment in comments:
                if comment["id"] == comment_id:
                    return comment
        return None

    def replies_to(self, comment_id: int) -> list[dict[str, Any]]:
        """The thread of a top-level review comment, oldest first."""
        return [
            c
            for comments in self.review_comments.values()
            for c in comments
            if c.get("in_reply_to_id") == comment_id
        ]

    def posted(self, owner: str, repo: str, number: int) -> list[dict[str, Any]]:
        """The reviews on the pull request, each with its `comments` as GitHub stored them."""
        return list(self.reviews.get((owner, repo, number), []))

    def runs_on(self, head_sha: str) -> list[dict[str, Any]]:
        """The check runs created on `head_sha`, oldest first, with all their annotations."""
        return [run for run in self.check_runs.values() if run.get("head_sha") == head_sha]

    def _id(self) -> int:
        with self.lock:
            self._next_id += 1
            return self._next_id

    def _new_review(
        self, owner: str, repo: str, number: int, author: str, body: str, commit_id: str
    ) -> dict[str, Any]:
        review_id = self._id()
        return {
            "id": review_id,
            "user": {"login": author},
            "body": body,
            "commit_id": commit_id,
            "state": "COMMENTED",
            "html_url": (
                f"{self.server_url}/{owner}/{repo}/pull/{number}#pullrequestreview-{review_id}"
            ),
            "comments": [],
        }

    def right_lines(self, owner: str, repo: str, number: int) -> dict[str, set[int]]:
        """Per new path, the RIGHT-side lines GitHub accepts: inside a hunk of the diff from the
        merge base to the head, computed with git (renames detected, 3 lines of context)."""
        return {
            path: {line for hunk in hunks for line in hunk}
            for path, hunks in self.right_hunks(owner, repo, number).items()
        }

    def right_hunks(self, owner: str, repo: str, number: int) -> dict[str, list[range]]:
        """Per new path, each hunk's RIGHT-side lines: a multi-line comment must lie in one."""
        pull = self._pulls[(owner, repo, number)]
        bare = pull.origin.bare
        merge_base = git(bare, "merge-base", pull.base_sha, pull.head_sha)
        diff = subprocess.run(
            [
                "git",
                "--git-dir",
                str(bare),
                "diff",
                "-M",
                "-U3",
                "--no-color",
                "--src-prefix=a/",
                "--dst-prefix=b/",
                merge_base,
                pull.head_sha,
            ],
            capture_output=True,
            check=True,
            env={
                "PATH": os.environ.get("PATH", os.defpath),
                "GIT_CONFIG_NOSYSTEM": "1",
                "HOME": os.devnull,
            },
        ).stdout.decode("utf-8", "replace")
        lines: dict[str, list[range]] = {}
        current: list[range] | None = None
        remaining = 0
        for line in diff.split("\n"):
            if remaining > 0:
                if not line.startswith("-"):
                    remaining -= 1
                continue
            if line.startswith("+++ "):
                name = line[4:].rstrip("\t")
                current = (
                    None if name == "/dev/null" else lines.setdefault(name.removeprefix("b/"), [])
                )
            elif line.startswith("@@ ") and current is not None:
                new_range = line.split(" ")[2].removeprefix("+")
                start, _, count = new_range.partition(",")
                size = 1 if not count else int(count)
                current.append(range(int(start), int(start) + size))
                remaining = size
        return lines

    # --- what was asked ---

    def git_requests(
        self, owner: str | None = None, repo: str | None = None
    ) -> list[RecordedRequest]:
        """Requests for git data, optionally of one repository."""
        prefix = "/" if owner is None else f"/{owner}/{repo}.git/"
        with self.lock:
            return [r for r in self.requests if r.path.startswith(prefix) and ".git/" in r.path]

    def fetches(self, owner: str, repo: str) -> int:
        """How many git fetches (ref advertisements) the repository served."""
        return sum(1 for r in self.git_requests(owner, repo) if r.path.endswith("/info/refs"))

    def _token_ok(self, authorization: str | None, *, git_side: bool) -> bool:
        if self.app is not None:  # an App's repositories: only its installation tokens
            tokens = list(self.app.tokens)
            return authorization in [_basic(t) if git_side else f"Bearer {t}" for t in tokens]
        if self.require_token is None:
            return True
        if not git_side:
            return authorization == f"Bearer {self.require_token}"
        return authorization == _basic(self.require_token)

    def _sleep(self, seconds: float) -> None:
        self._stopping.wait(seconds)


def _basic(token: str) -> str:
    """The Authorization of a git request with `token`, as git sends it."""
    return "Basic " + base64.b64encode(f"x-access-token:{token}".encode()).decode()


class _Server(ForgeServer):
    fake: FakeGitHub


class _Handler(ForgeHandler):
    server: _Server
    methods = frozenset({"GET", "POST", "PATCH", "PUT"})

    # --- routing ---

    def route(self, record: RecordedRequest, parts: SplitResult, body: bytes) -> None:
        if parts.path == "/api/graphql":
            record.body = body
            graphql(self.server.fake, self, record, body)
        else:
            super().route(record, parts, body)

    def not_found(self, record: RecordedRequest) -> None:
        self.send(record, 404, b"not found", {"Content-Type": "text/plain"})

    def api(  # noqa: C901, PLR0911, PLR0912  (one return per endpoint)
        self, record: RecordedRequest, path: str, body: bytes
    ) -> None:
        fake = self.server.fake
        pieces = path.split("/")  # "", "repos", owner, repo, "pulls", number
        if app_endpoint(fake, self, record, path):
            return
        if path == "/user":
            self._user(fake, record)
            return
        if len(pieces) == 4 and pieces[1] == "repos" and self.command == "GET":
            self._repository(fake, record, pieces[2], pieces[3])
            return
        if issues(fake, self, record, pieces):
            return
        if (
            len(pieces) >= 5
            and pieces[1] == "repos"
            and comment_endpoints(fake, self, record, pieces, body)
        ):
            return
        if len(pieces) >= 5 and pieces[1] == "repos" and pieces[4] in ("check-runs", "statuses"):
            self._gate(fake, record, pieces, body)
            return
        if (
            len(pieces) == 7
            and pieces[1] == "repos"
            and pieces[4] == "pulls"
            and pieces[5].isdigit()
            and pieces[6] in ("reviews", "comments")
        ):
            key = (pieces[2], pieces[3], int(pieces[5]))
            if self.command == "POST" and pieces[6] == "reviews":
                create_review(fake, self, record, key, body)
            else:
                self._list(fake, record, key, pieces[6])
            return
        if reviews(fake, self, record, pieces, body):
            return
        if (
            len(pieces) != 6
            or pieces[1] != "repos"
            or pieces[4] != "pulls"
            or not pieces[5].isdigit()
        ):
            self.send(record, 404, b'{"message":"Not Found"}', {"Content-Type": "application/json"})
            return
        if not fake._token_ok(record.authorization, git_side=False):
            self.send(
                record, 401, b'{"message":"Bad credentials"}', {"Content-Type": "application/json"}
            )
            return
        canned = fake.responses.get((pieces[2], pieces[3], int(pieces[5])))
        if canned is None:
            self.send(record, 404, b'{"message":"Not Found"}', {"Content-Type": "application/json"})
            return
        fake._sleep(canned.delay)
        self.send(record, canned.status, canned.body, canned.headers)

    @staticmethod
    def _bearer(record: RecordedRequest) -> str | None:
        value = record.authorization or ""
        return value.removeprefix("Bearer ") if value.startswith("Bearer ") else None

    def _repository(self, fake: FakeGitHub, record: RecordedRequest, owner: str, repo: str) -> None:
        token = self._bearer(record)
        if token in fake.refused_tokens:
            self.send_json(record, 401, {"message": "Bad credentials"})
            return
        document: dict[str, Any] = {"full_name": f"{owner}/{repo}", "private": False}
        if token is not None and token in fake.repo_permissions:
            document["permissions"] = fake.repo_permissions[token]
        self.send_json(record, 200, document)

    def _user(self, fake: FakeGitHub, record: RecordedRequest) -> None:
        token = self._bearer(record)
        if token is None or token in fake.refused_tokens:
            self.send_json(record, 401, {"message": "Requires authentication"})
        elif token in fake.users:
            self.send_json(record, 200, {"login": fake.users[token], "id": 7})
        else:  # a workflow token may not read /user
            self.send_json(record, 403, {"message": "Resource not accessible by integration"})

    def _author(self, fake: FakeGitHub, record: RecordedRequest) -> str | None:
        token = self._bearer(record)
        if token in fake.users:
            return fake.users[token]
        if token in fake.workflow_tokens:
            return "github-actions[bot]"
        if fake.app is not None and token in fake.app.tokens:
            return fake.app.login
        return None

    def _list(
        self, fake: FakeGitHub, record: RecordedRequest, key: tuple[str, str, int], kind: str
    ) -> None:
        if key not in fake._pulls:
            self.send_json(record, 404, {"message": "Not Found"})
            return
        if fake.list_faults:
            canned = fake.list_faults.pop(0)
            self.send(record, canned.status, canned.body, canned.headers)
            return
        if kind == "reviews":
            items = [
                {k: v for k, v in r.items() if k != "comments"} for r in fake.reviews.get(key, [])
            ]
        else:
            items = [comment_view(fake, key, c) for c in fake.review_comments.get(key, [])]
        query = dict(part.partition("=")[::2] for part in record.query.split("&") if part)
        # GitHub: review comments ascending by id; `direction` counts only with `sort`.
        order = ""
        if kind == "comments" and query.get("sort") in ("created", "updated", "created_at"):
            order = f"&sort={query['sort']}&direction={query.get('direction') or 'desc'}"
            if query.get("direction", "desc") == "desc":
                items = items[::-1]
        per_page = max(1, min(int(query.get("per_page") or 30), 100, fake.page_size))
        page = max(1, int(query.get("page") or 1))
        chunk = items[(page - 1) * per_page : page * per_page]
        # As GitHub: next and last while pages follow, prev and first after page 1.
        last = max(1, -(-len(items) // per_page))
        owner, repo, number = key
        base = f"{fake.api_url}/repos/{owner}/{repo}/pulls/{number}/{kind}?per_page={per_page}"
        base += order
        links = []
        if page < last:
            links += [f'<{base}&page={page + 1}>; rel="next"', f'<{base}&page={last}>; rel="last"']
        if page > 1:
            links += [f'<{base}&page={page - 1}>; rel="prev"', f'<{base}&page=1>; rel="first"']
        headers = {"Link": ", ".join(links)} if links else {}
        self.send_json(record, 200, chunk, headers)

    def _gate(
        self, fake: FakeGitHub, record: RecordedRequest, pieces: list[str], body: bytes
    ) -> None:
        """Check runs (POST, PATCH) and commit statuses (POST), as GitHub checks them."""
        try:
            payload = json.loads(body)
        except ValueError:
            self.send_json(record, 400, {"message": "Problems parsing JSON"})
            return
        token = self._bearer(record)
        if token is None:
            self.send_json(record, 401, {"message": "Requires authentication"})
            return
        if pieces[4] == "statuses" and len(pieces) == 6 and self.command == "POST":
            self._commit_status(fake, record, pieces[5], payload)
            return
        if pieces[4] != "check-runs":
            self.send_json(record, 404, {"message": "Not Found"})
            return
        fake.check_requests.append((self.command, payload))
        if token in fake.no_checks_tokens:
            self.send_json(
                record, 403, {"message": "Resource not accessible by personal access token"}
            )
            return
        self._check_run(fake, record, pieces, payload)

    def _check_run(
        self, fake: FakeGitHub, record: RecordedRequest, pieces: list[str], payload: dict[str, Any]
    ) -> None:
        """Create (POST) or update (PATCH) a check run, refused as GitHub refuses it."""
        refused = check_run_refusal(payload, creating=self.command == "POST")
        if refused is not None:
            self.send_json(record, 422, {"message": "Validation Failed", "errors": [refused]})
            return
        if payload.get("conclusion") is not None:
            payload["status"] = "completed"  # GitHub: a conclusion completes the run
        annotations = (payload.get("output") or {}).get("annotations") or []
        if len(annotations) > 50:
            self.send_json(record, 422, {"message": "Only 50 annotations may be sent at a time"})
            return
        if self.command == "POST" and len(pieces) == 5:
            run = {"id": fake._id(), "annotations": [], **payload}
            run["annotations"] = list(annotations)
            fake.check_runs[run["id"]] = run
            self.send_json(record, 201, {k: v for k, v in run.items() if k != "annotations"})
            return
        if self.command == "PATCH" and len(pieces) == 6 and pieces[5].isdigit():
            existing = fake.check_runs.get(int(pieces[5]))
            if existing is None:
                self.send_json(record, 404, {"message": "Not Found"})
                return
            existing["annotations"] += annotations
            existing.update({k: v for k, v in payload.items() if k != "annotations"})
            self.send_json(record, 200, {k: v for k, v in existing.items() if k != "annotations"})
            return
        self.send_json(record, 404, {"message": "Not Found"})

    def _commit_status(
        self, fake: FakeGitHub, record: RecordedRequest, sha: str, payload: dict[str, Any]
    ) -> None:
        if payload.get("state") not in STATUS_STATES:
            self.send_json(record, 422, {"message": "Validation Failed"})
            return
        fake.statuses.append({**payload, "sha": sha})
        self.send_json(record, 201, {"id": fake._id(), **payload})

    def git(self, record: RecordedRequest, path: str, query: str, body: bytes) -> None:
        fake = self.server.fake
        if not fake._token_ok(record.authorization, git_side=True):
            self.send(record, 401, b"auth required", {"WWW-Authenticate": 'Basic realm="fake"'})
            return
        if fake.git_redirect is not None:
            location = fake.git_redirect + path + (f"?{query}" if query else "")
            self.send(record, 302, b"", {"Location": location})
            return
        if self.command == "POST":
            fake._sleep(fake.git_delay)
        self.send_git(record, path, query, body)


# GitHub's REST rules for check runs and commit statuses (docs: "Create a check run", "Create a
# commit status"): `stale` is GitHub's own conclusion; `waiting`, `requested` and `pending` are
# statuses only GitHub Actions sets; a completed run needs a conclusion; a details_url must be
# http(s) (GitHub's 422 says "details_url must use the http or https scheme").
CHECK_CONCLUSIONS = frozenset(
    {"action_required", "cancelled", "failure", "neutral", "success", "skipped", "timed_out"}
)
CHECK_STATUSES = frozenset({"queued", "in_progress", "completed"})
STATUS_STATES = frozenset({"error", "failure", "pending", "success"})


def check_run_refusal(payload: dict[str, Any], *, creating: bool) -> str | None:
    """Why GitHub would answer 422 to this check-run request, or None."""
    if creating and not (isinstance(payload.get("name"), str) and payload.get("head_sha")):
        return "name and head_sha are required"
    conclusion = payload.get("conclusion")
    if conclusion is not None and conclusion not in CHECK_CONCLUSIONS:
        return f"conclusion is not included in the list: {conclusion}"
    status = payload.get("status")
    if status is not None and status not in CHECK_STATUSES:
        return f"status is not included in the list: {status}"
    if status == "completed" and conclusion is None:
        return "conclusion is required when status is completed"
    details = payload.get("details_url")
    if details is not None and not str(details).startswith(("http://", "https://")):
        return "details_url must use the http or https scheme"
    return None


@pytest.fixture
def fake_github(tmp_path: Path) -> Iterator[FakeGitHub]:
    """A running fake GitHub whose repositories live under tmp_path/fake-github."""
    yield from serving(FakeGitHub(tmp_path / "fake-github"))
