"""The repository cache (fetch/cache.py): concurrent reviews, in one process or several,
fetch once and release what they hold.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pr_review_api.fetch.cache import RepositoryCache
from pr_review_api.github.checkout import open_pull_request
from tests.fakes.github_server import FakeGitHub, PullRequestFixture
from tests.github.support import diff_of, review

# --- concurrency ---


@pytest.mark.anyio
async def test_concurrent_reviews_of_one_pull_request_fetch_once(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = fake_github.pull_request(
        "acme", "widget", 7, base={"a.py": "one\n"}, head={"a.py": "two\n"}
    )
    fake_github.git_delay = 0.05  # widen the window in which fetches could overlap
    settings = fake_github.settings(tmp_path / "cache")

    async def one() -> str:
        async with open_pull_request(pull.url, settings) as prepared:
            text = await asyncio.to_thread(diff_of, prepared)
            await asyncio.sleep(0.02)
            return text

    diffs = await asyncio.gather(*(one() for _ in range(6)))
    assert all("+two" in text for text in diffs)
    assert fake_github.fetches("acme", "widget") == 1


@pytest.mark.anyio
async def test_concurrent_reviews_of_different_pull_requests_share_one_store(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pulls = [
        fake_github.pull_request("acme", "widget", n, head={f"change{n}.py": f"CHANGE-{n}\n"})
        for n in range(1, 6)
    ]
    fake_github.git_delay = 0.02
    settings = fake_github.settings(tmp_path / "cache")

    async def one(pull: PullRequestFixture) -> tuple[Path, str]:
        async with open_pull_request(pull.url, settings) as prepared:
            return prepared.git_dir, await asyncio.to_thread(diff_of, prepared)

    results = await asyncio.gather(*(one(pull) for pull in pulls))
    assert len({git_dir for git_dir, _ in results}) == 1
    for number, (_, diff) in enumerate(results, start=1):
        assert f"CHANGE-{number}" in diff
        assert sum(f"CHANGE-{n}" in diff for n in range(1, 6)) == 1
    assert len(list((tmp_path / "cache" / "repositories").iterdir())) == 1


_WORKER = """
import asyncio, sys
from pr_review_api.github.checkout import open_pull_request
from pr_review_api.git.repository import PinnedRepository
from pr_review_api.settings import load_settings

async def main() -> None:
    async with open_pull_request(sys.argv[1], load_settings()) as pull:
        pinned = PinnedRepository.open(pull.git_dir, pull.metadata.base_sha, pull.metadata.head_sha)
        print(pinned.diff([], 10**6)[0].decode())

asyncio.run(main())
"""


@pytest.mark.e2e
def test_concurrent_reviews_in_separate_processes(fake_github: FakeGitHub, tmp_path: Path) -> None:
    pulls = [
        fake_github.pull_request("acme", "widget", n, head={"f.py": f"PROCESS-{n}\n"})
        for n in (1, 2)
    ]
    fake_github.git_delay = 0.2
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "GITHUB_SERVER_URL": fake_github.server_url,
        "GITHUB_API_URL": fake_github.api_url,
        "PR_REVIEW_CACHE_DIR": str(tmp_path / "cache"),
    }
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, pulls[i % 2].url],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for i in range(3)
    ]
    outputs = [worker.communicate(timeout=60) for worker in workers]
    for i, (worker, (out, err)) in enumerate(zip(workers, outputs, strict=True)):
        assert worker.returncode == 0, err.decode()
        assert f"+PROCESS-{pulls[i % 2].number}" in out.decode()
    assert fake_github.fetches("acme", "widget") == 2


@pytest.mark.anyio
async def test_cancelled_review_releases_its_hold(fake_github: FakeGitHub, tmp_path: Path) -> None:
    pull = fake_github.pull_request("acme", "widget", 7)
    fake_github.git_delay = 0.5
    settings = fake_github.settings(tmp_path / "cache").model_copy(
        update={"pr_review_cache_max_bytes": 0}
    )
    task = asyncio.create_task(review(pull.url, settings))
    for _ in range(1000):  # until the fetch has started
        if fake_github.git_requests():
            break
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    cache = RepositoryCache(settings)
    for _ in range(200):  # the fetch thread finishes, then lets go of the repository
        if cache.evict():
            break
        await asyncio.sleep(0.05)
    assert not list((tmp_path / "cache" / "repositories").iterdir())
