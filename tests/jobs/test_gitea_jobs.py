"""Jobs of Gitea pull requests run by a real worker (specification §§11, 19): `POST /v1/review-jobs`
with a Gitea URL is reviewed with `GITEA_TOKEN` (no GitHub identity: the GitHub settings point
at a port where nothing listens), and the job's document and key name the forge."""

from __future__ import annotations

import pytest

from tests.conftest import GITEA_TOKEN
from tests.fakes.gitea_server import FakeGitea
from tests.fakes.provider_server import ScriptedProvider, stop_turn
from tests.jobs.forge_service import assert_reviewed_unpublished, review_job
from tests.jobs.gitea_service import FINDING, REVIEW, GiteaService, pull
from tests.jobs.test_jobs import rows

pytestmark = pytest.mark.e2e


def test_a_gitea_pull_request_job_is_reviewed_with_the_gitea_token(
    database_url: str,
    fake_gitea: FakeGitea,
    scripted_provider: ScriptedProvider,
    gitea_service: GiteaService,
) -> None:
    settings = gitea_service.settings(scripted_provider)
    fixture = pull(fake_gitea)
    scripted_provider.script(stop_turn(REVIEW))
    body = {"pull_request_url": fixture.url + "/files"}
    job = gitea_service.run(settings, lambda client: review_job(client, body))
    assert_reviewed_unpublished(
        job,
        {"url": fixture.url, "owner": "acme", "repo": "widget", "number": 3, "forge": "gitea"},
        fixture.head_sha,
        FINDING["title"],
    )
    scripted_provider.assert_complete()
    assert rows(database_url, "SELECT pr_key, tenant FROM review_jobs") == [
        ("gitea:acme/widget#3", "gitea:acme")
    ]
    # Every API request carried the token; nothing was written.
    requests = fake_gitea.api_requests()
    assert requests
    assert all(r.authorization == f"token {GITEA_TOKEN}" for r in requests)
    assert all(r.method == "GET" for r in requests)
