"""`/ui/learnings/{repository}` (service/ui_learnings.py) through the real application on a real
embedded PostgreSQL (specification §20): a repository's learnings shown as text, never markup; a
form adds one and a button removes one, each only from the service's own pages; guarded like /ui."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import SecretStr

from tests.jobs.conftest import database_url, embedded_postgres
from tests.jobs.test_jobs import service, settings_for
from tests.service.test_ui import Page, assert_inert

__all__ = ["database_url", "embedded_postgres"]  # the job suite's fixtures, used here too

pytestmark = pytest.mark.e2e  # a real PostgreSQL: the default run's, not --fast

HOSTILE = '<script>alert(1)</script> <img src=x onerror="alert(2)"> [x](javascript:alert(3))'
SAME = {"Sec-Fetch-Site": "same-origin"}


def test_a_learning_added_on_the_page_is_shown_as_text_and_removed_by_its_button(
    database_url: str,
) -> None:
    async def scenario() -> None:
        async with service(settings_for(database_url)) as client:
            page = "/ui/learnings/acme/widget"
            empty = await client.get(page)
            assert empty.status_code == 200
            assert "None recorded." in Page(empty.text).all_text
            added = await client.post(page, data={"text": HOSTILE}, headers=SAME)
            assert added.status_code == 303
            assert added.headers["location"] == page
            shown = await client.get(page)
            parsed = Page(shown.text)
            assert_inert(parsed)
            assert HOSTILE in parsed.all_text  # the words, as text
            other = await client.get("/ui/learnings/gitlab:grp/sub/project")
            assert HOSTILE not in Page(other.text).all_text
            (learning_id,) = [
                int(action.split("/-/")[1].split("/")[0])
                for name, action in parsed.attributes
                if name == "action" and "/-/" in action
            ]
            wrong_repo = await client.post(
                f"/ui/learnings/acme/other/-/{learning_id}/remove", headers=SAME
            )
            assert wrong_repo.status_code == 303
            assert HOSTILE in Page((await client.get(page)).text).all_text
            removed = await client.post(f"{page}/-/{learning_id}/remove", headers=SAME)
            assert removed.status_code == 303
            assert "None recorded." in Page((await client.get(page)).text).all_text

    asyncio.run(scenario())


def test_posts_from_another_site_and_bad_input_are_refused(database_url: str) -> None:
    async def scenario() -> None:
        async with service(settings_for(database_url)) as client:
            page = "/ui/learnings/acme/widget"
            foreign = [
                {"Sec-Fetch-Site": "cross-site"},
                {"Origin": "https://evil.example"},
                {"Referer": "https://evil.example/page"},
                {},  # a browser says where a form comes from; nothing said is refused
            ]
            for headers in foreign:
                refused = await client.post(page, data={"text": "x"}, headers=headers)
                assert refused.status_code == 403, headers
                assert refused.json()["error"]["code"] == "invalid_request"
            own = {"Origin": "http://service"}
            assert (await client.post(page, data={"text": "ok"}, headers=own)).status_code == 303
            for body in ({"text": ""}, {"text": "x" * 501}, {"other": "x"}):
                bad = await client.post(page, data=body, headers=SAME)
                assert bad.status_code == 422, body
            assert (await client.get("/ui/learnings/..%2Fetc")).status_code in (404, 422)
            assert (await client.get("/ui/learnings/not a repo")).status_code == 422

    asyncio.run(scenario())


def test_the_pages_are_guarded_by_the_service_keys(database_url: str) -> None:
    key = "svc-test-KEY-ui-learn-1"
    settings = settings_for(database_url, pr_review_api_keys=[SecretStr(key)])

    async def scenario() -> None:
        async with service(settings) as client:
            page = "/ui/learnings/acme/widget"
            assert (await client.get(page)).status_code == 401
            posted = await client.post(page, data={"text": "x"}, headers=SAME)
            assert posted.status_code == 401
            signed = {"Authorization": f"Bearer {key}"}
            assert (await client.get(page, headers=signed)).status_code == 200

    asyncio.run(scenario())
