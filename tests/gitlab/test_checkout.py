"""A merge request fetched into the shared repository cache (gitlab/checkout.py): nested groups
on a self-managed server under a path prefix, the token as `oauth2` credentials scoped to the
server's origin and nowhere else, failures told in GitLab's words, hostile metadata refused
before git runs.
"""

from __future__ import annotations

import base64
import json
import logging
import traceback
from pathlib import Path

import pytest

from pr_review_api.errors import GitLabUnavailable, PullRequestNotFound
from pr_review_api.fetch.cache import PreparedChange, RepositoryCache
from pr_review_api.git_runner import run_git
from pr_review_api.github.checkout import open_pull_request
from pr_review_api.gitlab.checkout import open_merge_request
from pr_review_api.gitlab.client import TOKEN_NEEDED_MESSAGE
from pr_review_api.gitlab.git_http import fetch_config
from pr_review_api.gitlab.metadata import DIFF_NOT_READY, INVALID_METADATA
from pr_review_api.settings import Settings
from tests.conftest import GITLAB_TOKEN
from tests.fakes.github_server import FakeGitHub
from tests.fakes.gitlab_server import FakeGitLab, MergeRequestFixture
from tests.github.support import (
    Launch,
    assert_token_kept_out,
    config_of,
    diff_of,
    has_object,
    our_git,
)
from tests.gitrepo import git

PATH = "grp/sub/project"
TOKEN_FORMS = (
    GITLAB_TOKEN,
    base64.b64encode(f"oauth2:{GITLAB_TOKEN}".encode()).decode(),
    base64.b64encode(GITLAB_TOKEN.encode()).decode().rstrip("="),
)
FETCH_FAILED = "Fetching the merge request's commits from GitLab failed."


async def review(url: str, settings: Settings) -> PreparedChange:
    async with open_merge_request(url, settings) as prepared:
        return prepared


async def refused(fake: FakeGitLab, settings: Settings, iid: int = 3) -> Exception:
    with pytest.raises((GitLabUnavailable, PullRequestNotFound)) as caught:
        await review(f"{fake.server_url}/{PATH}/-/merge_requests/{iid}", settings)
    return caught.value


def private_merge_request(fake: FakeGitLab) -> MergeRequestFixture:
    fake.users[GITLAB_TOKEN] = "reviewer"
    return fake.merge_request(PATH, 3, base={"a.py": "one\n"}, head={"a.py": "two\n"}, private=True)


# --- fetching and pinning ---


@pytest.mark.anyio
async def test_a_nested_merge_request_is_pinned_to_its_diff_refs(
    fake_gitlab: FakeGitLab, tmp_path: Path
) -> None:
    mr = fake_gitlab.merge_request(PATH, 3, base={"a.py": "one\n"}, head={"a.py": "two\n"})
    settings = fake_gitlab.settings(tmp_path / "cache")
    async with open_merge_request(mr.url + "/diffs?view=inline", settings) as prepared:
        info = prepared.info
        assert (info.url, info.owner, info.repo, info.number) == (mr.url, "grp/sub", "project", 3)
        assert info.forge == "gitlab"
        metadata = prepared.metadata
        assert (metadata.base_sha, metadata.head_sha) == (mr.start_sha, mr.head_sha)
        assert metadata.diff_base_sha == mr.base_sha
        assert has_object(prepared.git_dir, mr.start_sha)
        assert has_object(prepared.git_dir, mr.head_sha)
        assert "-one\n+two" in diff_of(prepared)
    assert prepared.git_dir.is_relative_to(tmp_path / "cache")
    paths = {r.path for r in fake_gitlab.git_requests()}
    assert paths == {
        "/gitlab/grp/sub/project.git/info/refs",
        "/gitlab/grp/sub/project.git/git-upload-pack",
    }


@pytest.mark.anyio
async def test_the_fetch_names_the_merge_request_ref_and_the_target_branch(
    fake_gitlab: FakeGitLab, tmp_path: Path, launches: list[Launch]
) -> None:
    mr = fake_gitlab.merge_request(PATH, 3, target_branch="release/2.x")
    await review(mr.url, fake_gitlab.settings(tmp_path / "cache"))
    (fetch,) = [launch for launch in our_git(launches) if "fetch" in launch.argv]
    argv = fetch.argv
    end = argv.index("--end-of-options")
    assert argv[end + 1 : end + 3] == [
        f"{fake_gitlab.server_url}/grp/sub/project.git",
        "+refs/merge-requests/3/head:refs/pr-review/merge-requests/3",
    ]
    assert argv[-1].startswith("+refs/heads/release/2.x:refs/pr-review/base/")
    assert fetch.env["GIT_ALLOW_PROTOCOL"] == "http"
    config = dict(config_of(fetch))
    assert config["http.followRedirects"] == "false"
    assert config["transfer.fsckObjects"] == "true"


@pytest.mark.anyio
async def test_a_repeat_review_fetches_nothing(fake_gitlab: FakeGitLab, tmp_path: Path) -> None:
    mr = fake_gitlab.merge_request(PATH, 3)
    settings = fake_gitlab.settings(tmp_path / "cache")
    first = await review(mr.url, settings)
    fetched = len(fake_gitlab.git_requests())
    second = await review(mr.url.replace("grp/sub/project", "GRP/Sub/Project"), settings)
    assert fetched > 0
    assert len(fake_gitlab.git_requests()) == fetched
    assert first.git_dir == second.git_dir


@pytest.mark.anyio
async def test_gitlab_and_github_share_the_cache_under_different_keys(
    fake_gitlab: FakeGitLab, fake_github: FakeGitHub, tmp_path: Path
) -> None:
    mr = fake_gitlab.merge_request("grp/project", 3)
    pull = fake_github.pull_request("grp", "project", 3, head={"github.txt": "github\n"})
    cache = tmp_path / "cache"
    settings = fake_gitlab.settings(cache).model_copy(
        update={
            "github_server_url": fake_github.server_url,
            "github_api_url": fake_github.api_url,
        }
    )
    from_gitlab = await review(mr.url, settings)
    async with open_pull_request(pull.url, settings) as from_github:
        assert from_github.git_dir != from_gitlab.git_dir
        assert from_github.git_dir.parent.parent == from_gitlab.git_dir.parent.parent
    assert has_object(from_gitlab.git_dir, mr.head_sha)
    assert not has_object(from_gitlab.git_dir, pull.head_sha)
    assert RepositoryCache(settings).total_size() > 0


# --- the token ---


@pytest.mark.anyio
async def test_the_token_reaches_the_api_and_git_and_nothing_else(
    fake_gitlab: FakeGitLab,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    launches: list[Launch],
) -> None:
    caplog.set_level(logging.DEBUG)
    mr = private_merge_request(fake_gitlab)
    cache_dir = tmp_path / "cache"
    settings = fake_gitlab.settings(cache_dir, token=GITLAB_TOKEN)
    prepared = await review(mr.url, settings)
    assert "+two" in diff_of(prepared)
    moved = mr.project.commit({"late.txt": "late\n"}, mr.head_sha)
    mr.project.set_merge_request_head(3, moved)  # a git-side failure after a fetch with the token
    fake_gitlab.merge_request(PATH, 4, private=True)
    mr.project.set_merge_request_head(4, moved)
    failures = [await refused(fake_gitlab, settings, 4), await refused(fake_gitlab, settings, 9)]
    assert failures[0].message == "The merge request's head moved while fetching; retry the review."  # type: ignore[attr-defined]
    assert isinstance(failures[1], PullRequestNotFound)
    # Sent: as PRIVATE-TOKEN to the API, as basic oauth2 credentials to git, nothing else.
    assert {r.private_token for r in fake_gitlab.api_requests()} == {GITLAB_TOKEN}
    assert {r.authorization for r in fake_gitlab.api_requests()} == {None}
    assert {r.authorization for r in fake_gitlab.git_requests()} == {f"Basic {TOKEN_FORMS[1]}"}
    assert_token_kept_out(
        TOKEN_FORMS,
        origin=fake_gitlab.origin,
        launches=launches,
        records=caplog.records,
        cache=cache_dir,
        requests=fake_gitlab.requests,
        failures=failures,
    )


def test_the_git_header_is_scoped_to_the_servers_origin(
    fake_gitlab: FakeGitLab, tmp_path: Path
) -> None:
    mr = private_merge_request(fake_gitlab)
    settings = fake_gitlab.settings(tmp_path / "cache", token=GITLAB_TOKEN)
    git_dir = tmp_path / "probe.git"
    git(tmp_path, "init", "-q", "--bare", str(git_dir))
    config = fetch_config(settings, settings.gitlab_token)
    other_origin = f"http://localhost:{fake_gitlab.port}/gitlab/{PATH}.git"  # same server
    run_git(git_dir, ["ls-remote", "--end-of-options", other_origin], config=config, check=False)
    run_git(
        git_dir, ["ls-remote", "--end-of-options", mr.url.split("/-/")[0] + ".git"], config=config
    )
    first, second = [r for r in fake_gitlab.git_requests() if r.path.endswith("/info/refs")]
    assert first.authorization is None
    assert first.status == 401  # a private project: without the header, GitLab's challenge
    assert second.authorization == f"Basic {TOKEN_FORMS[1]}"


@pytest.mark.anyio
async def test_a_git_redirect_is_not_followed(fake_gitlab: FakeGitLab, tmp_path: Path) -> None:
    elsewhere = FakeGitLab(tmp_path / "elsewhere")
    try:
        mr = private_merge_request(fake_gitlab)
        fake_gitlab.git_redirect = elsewhere.server_url
        settings = fake_gitlab.settings(tmp_path / "cache", token=GITLAB_TOKEN)
        error = await refused(fake_gitlab, settings)
        assert isinstance(error, GitLabUnavailable)
        assert error.message == FETCH_FAILED
        assert elsewhere.requests == []
        assert mr.iid == 3
    finally:
        elsewhere.close()


@pytest.mark.anyio
async def test_a_private_project_without_a_token_is_refused_before_git(
    fake_gitlab: FakeGitLab, tmp_path: Path
) -> None:
    private_merge_request(fake_gitlab)
    error = await refused(fake_gitlab, fake_gitlab.settings(tmp_path / "cache"))
    assert isinstance(error, GitLabUnavailable)
    assert error.message == TOKEN_NEEDED_MESSAGE
    assert fake_gitlab.git_requests() == []


# --- failures ---


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("status", "kind", "code"),
    [
        (404, PullRequestNotFound, "pull_request_not_found"),
        (500, GitLabUnavailable, "gitlab_unavailable"),
        (502, GitLabUnavailable, "gitlab_unavailable"),
    ],
)
async def test_api_failures_are_mapped_before_git(
    fake_gitlab: FakeGitLab, tmp_path: Path, status: int, kind: type[Exception], code: str
) -> None:
    fake_gitlab.merge_request(PATH, 3)
    fake_gitlab.respond(PATH, 3, status, '{"message":"boom at /srv/secret"}')
    error = await refused(fake_gitlab, fake_gitlab.settings(tmp_path / "cache"))
    assert type(error) is kind
    assert error.code == code  # type: ignore[attr-defined]
    assert "secret" not in str(error)
    assert fake_gitlab.git_requests() == []


@pytest.mark.anyio
async def test_a_diff_still_being_prepared_is_refused_before_git(
    fake_gitlab: FakeGitLab, tmp_path: Path
) -> None:
    fake_gitlab.merge_request(PATH, 3)
    fake_gitlab.set_document(PATH, 3, start_sha=None)
    error = await refused(fake_gitlab, fake_gitlab.settings(tmp_path / "cache"))
    assert error.message == DIFF_NOT_READY  # type: ignore[attr-defined]
    assert fake_gitlab.git_requests() == []


@pytest.mark.anyio
@pytest.mark.parametrize(
    "fields",
    [
        {"head_sha": "z" * 40},
        {"start_sha": "A" * 40},
        {"target_branch": "main..evil"},
        {"target_branch": "-upload-pack=touch x"},
        {"target_branch": "--upload-pack=touch x"},
    ],
)
async def test_hostile_metadata_is_refused_before_git(
    fake_gitlab: FakeGitLab, tmp_path: Path, fields: dict[str, str]
) -> None:
    mr = fake_gitlab.merge_request(PATH, 3)
    values = {"start_sha": mr.start_sha, "head_sha": mr.head_sha, **fields}
    fake_gitlab.set_document(PATH, 3, **values)
    error = await refused(fake_gitlab, fake_gitlab.settings(tmp_path / "cache"))
    assert isinstance(error, GitLabUnavailable)
    assert error.message == INVALID_METADATA
    assert fake_gitlab.git_requests() == []


@pytest.mark.anyio
async def test_a_huge_title_is_refused_before_git(fake_gitlab: FakeGitLab, tmp_path: Path) -> None:
    mr = fake_gitlab.merge_request(PATH, 3)
    document = fake_gitlab.documents[(mr.project.id, 3)]
    fake_gitlab.respond(PATH, 3, 200, json.dumps({**document, "title": "t" * 2 * 1024**2}))
    error = await refused(fake_gitlab, fake_gitlab.settings(tmp_path / "cache"))
    assert isinstance(error, GitLabUnavailable)
    assert fake_gitlab.git_requests() == []


@pytest.mark.anyio
async def test_a_missing_repository_is_a_fixed_gitlab_failure(
    fake_gitlab: FakeGitLab, tmp_path: Path
) -> None:
    mr = fake_gitlab.merge_request(PATH, 3)
    fake_gitlab.set_document(PATH, 3, start_sha="c" * 40, head_sha=mr.head_sha)
    error = await refused(fake_gitlab, fake_gitlab.settings(tmp_path / "cache"))
    assert isinstance(error, GitLabUnavailable)
    assert (
        error.message
        == "The merge request's base commit is no longer on its base branch; retry the review."
    )
    rendered = "".join(traceback.format_exception(error))
    assert "fatal" not in rendered
    assert str(tmp_path) not in rendered
