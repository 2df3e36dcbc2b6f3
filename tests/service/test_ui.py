"""The `/ui` pages (service/ui.py) through the real application on a real embedded PostgreSQL:
what they show, that model text is only ever text, and that they are guarded like /v1.

tests/service/test_ui_browser.py loads the same pages in a real browser from `pr-review serve`.
"""

from __future__ import annotations

import asyncio
import uuid
from html.parser import HTMLParser
from typing import Any

import pytest
from pydantic import SecretStr

from pr_review_api.jobs.queue import JobQueue
from pr_review_api.jobs.records import JobRecord
from pr_review_api.service.ui import safe_link
from pr_review_api.settings import Settings
from tests.jobs.conftest import database_url, embedded_postgres
from tests.jobs.test_jobs import FAST, SERVER, pull, service, settings_for, wait_for, worker

__all__ = ["database_url", "embedded_postgres"]  # the job suite's fixtures, used here too

SERVICE_KEY = "svc-test-KEY-ui-77aa"
SCRIPT = "<script>alert(1)</script>"
JS_LINK = "[click me](javascript:alert(1))"
IMG = '<img src=x onerror="alert(2)">'
ANCHOR = '<a href="javascript:alert(3)">here</a>'
MARKDOWN_LINK = "[the docs](https://evil.example/phish)"


def hostile_document(url: str) -> dict[str, Any]:
    """A review whose every model-written field tries to become markup or a link."""
    finding = {
        "severity": "high",
        "title": SCRIPT,
        "explanation": JS_LINK + " " + ANCHOR,
        "path": '"><script>alert(4)</script>.py',
        "line": 3,
        "evidence": IMG,
        "recommendation": MARKDOWN_LINK,
    }
    low = {**finding, "severity": "low", "title": "plain", "path": "b.py", "line": None}
    return {
        "termination_reason": "final_review",
        "pull_request": None,
        "revisions": {"base_sha": "b" * 40, "head_sha": "c" * 40, "merge_base_sha": "b" * 40},
        "model": "<b>model</b>",
        "review": {
            "summary": ANCHOR + " " + SCRIPT,
            "findings": [finding, low],
            "notes": [MARKDOWN_LINK, "javascript:alert(5)"],
            "walkthrough": [{"paths": [SCRIPT], "summary": "walk " + IMG}],
            "linked_issues": [{"ref": "#12", "addressed": "no", "explanation": "why " + ANCHOR}],
        },
        "usage": {"prompt_tokens": 100, "completion_tokens": 23, "total_tokens": 123},
        "rounds": 2,
        "tool_calls": 1,
        "coverage": {"changed_files": 3, "inspected_files": 2, "not_inspected": [SCRIPT]},
        "trace": [
            {
                "round": 1,
                "protocol_action": "execute_tools",
                "finish_reason": "tool_calls",
                "usage": {"total_tokens": 50},
                "tool_calls": [
                    {
                        "name": "read_file",
                        "ok": True,
                        "arguments": {"path": "</script><script>alert(6)</script>"},
                        "result_bytes": 10,
                        "duration_ms": 1,
                    }
                ],
            }
        ],
        "publication": {"status": "published", "url": "javascript:alert(7)"},
    }


class Page(HTMLParser):
    """Every element, attribute and piece of text of a page."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attributes: list[tuple[str, str]] = []
        self.text: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attributes.extend((name, value or "") for name, value in attrs)

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    @property
    def links(self) -> list[str]:
        return [value for name, value in self.attributes if name == "href"]

    @property
    def all_text(self) -> str:
        return "".join(self.text)


def assert_inert(page: Page) -> None:
    """No script, no handler, no link anywhere but our pages and http(s) URLs."""
    assert "script" not in page.tags
    assert "img" not in page.tags
    assert not [name for name, _ in page.attributes if name.startswith("on")]
    for link in page.links:
        assert link.startswith(("/ui", f"{SERVER}/")), link


async def _hostile_job(settings: Settings) -> uuid.UUID:
    async def runner(record: JobRecord, settings: Settings) -> dict[str, Any]:
        url = record.pull_request_url
        return hostile_document(url)

    async with worker(settings, runner) as queue:
        job_id = (await queue.enqueue(pull(7, head_sha="c" * 40), source="api")).job_id

        async def done() -> bool:
            record = await queue.get(job_id)
            return record is not None and record.status == "succeeded"

        await wait_for(done, what="the review")
    return job_id


@pytest.mark.e2e  # a real PostgreSQL: the default run's, not --fast
def test_pages_show_model_text_as_text_and_never_as_markup(database_url: str) -> None:
    settings = settings_for(database_url)

    async def scenario() -> tuple[str, str, dict[str, str]]:
        job_id = await _hostile_job(settings)
        async with service(settings) as client:
            listing = await client.get("/ui")
            assert listing.status_code == 200
            detail = await client.get(f"/ui/jobs/{job_id}")
            assert detail.status_code == 200
            return listing.text, detail.text, dict(detail.headers)

    listing_html, detail_html, headers = asyncio.run(scenario())
    listing = Page(listing_html)
    assert_inert(listing)
    assert "acme/widget#7" in listing.all_text
    assert "1 high" in listing.all_text
    assert "1 low" in listing.all_text
    assert "123" in listing.all_text
    assert "javascript:alert(7)" not in listing_html  # a URL that may not be a link is not shown

    detail = Page(detail_html)
    assert_inert(detail)
    for text in (SCRIPT, JS_LINK, ANCHOR, IMG, MARKDOWN_LINK, "javascript:alert(5)"):
        assert text in detail.all_text, text  # shown, as the characters the model wrote
    assert "</script><script>alert(6)</script>" in detail.all_text  # the trace's arguments
    assert "walk " + IMG in detail.all_text  # specification §21's tables, as text too
    assert "why " + ANCHOR in detail.all_text
    assert "2 of 3 changed files inspected." in detail.all_text
    assert "<b>model</b>" in detail.all_text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in detail_html
    assert "default-src 'none'" in headers["content-security-policy"]
    assert "script-src" not in headers["content-security-policy"]


@pytest.mark.e2e  # a real PostgreSQL: the default run's, not --fast
def test_recent_jobs_filters_and_pages_like_the_listing(database_url: str) -> None:
    settings = settings_for(database_url)

    async def scenario() -> None:
        queue = JobQueue(settings, tuning=FAST)
        async with queue.opened():
            for number in range(1, 4):
                await queue.enqueue(pull(number), source="api")
            await queue.enqueue(pull(1, "other", "thing"), source="api")
        async with service(settings) as client:
            everything = Page((await client.get("/ui")).text)
            assert sum(1 for tag in everything.tags if tag == "tr") == 5  # a header and four
            form = await client.get("/ui?repository=&status=queued")  # the form's empty field
            assert form.status_code == 200
            first = await client.get("/ui?repository=acme/widget&limit=2")
            page = Page(first.text)
            assert "other/thing" not in page.all_text
            older = [link for link in page.links if "cursor=" in link]
            assert len(older) == 1
            second = Page((await client.get(older[0])).text)
            assert "acme/widget#1" in second.all_text
            assert not [link for link in second.links if "cursor=" in link]
            bad = await client.get("/ui?limit=1000")
            assert bad.status_code == 422
            assert bad.json()["error"]["code"] == "invalid_request"

    asyncio.run(scenario())


@pytest.mark.e2e  # a real PostgreSQL: the default run's, not --fast
def test_dismissals_page_says_none_are_recorded(database_url: str) -> None:
    async def scenario() -> None:
        async with service(settings_for(database_url)) as client:
            answer = await client.get("/ui/repositories/acme/widget/dismissals")
            assert answer.status_code == 200
            page = Page(answer.text)
            assert "None recorded." in page.all_text
            assert "acme/widget" in page.all_text
            bad = await client.get("/ui/repositories/-acme/widget/dismissals")
            assert bad.status_code == 422

    asyncio.run(scenario())


@pytest.mark.e2e  # a real PostgreSQL: the default run's, not --fast
def test_pages_are_guarded_by_the_service_keys_like_v1(database_url: str) -> None:
    settings = settings_for(database_url, pr_review_api_keys=[SecretStr(SERVICE_KEY)])
    key = {"Authorization": f"Bearer {SERVICE_KEY}"}
    paths = ["/ui", f"/ui/jobs/{uuid.uuid4()}", "/ui/repositories/acme/widget/dismissals"]

    async def scenario() -> None:
        async with service(settings) as client:
            for path in paths:
                refused = await client.get(path)
                assert refused.status_code == 401, path
                assert refused.json()["error"]["code"] == "unauthorized"
                wrong = await client.get(path, headers={"Authorization": "Bearer nope"})
                assert wrong.status_code == 401, path
            assert (await client.get("/ui", headers=key)).status_code == 200
            missing = await client.get(paths[1], headers=key)
            assert missing.status_code == 404
            assert missing.json()["error"]["code"] == "job_not_found"
            assert (await client.get(paths[2], headers=key)).status_code == 200

    asyncio.run(scenario())


def test_only_http_and_https_urls_become_links() -> None:
    assert safe_link("https://github.example/acme/widget/pull/7") is not None
    assert safe_link("http://127.0.0.1:8080/x") is not None
    for url in ("javascript:alert(1)", "JaVaScRiPt:alert(1)", "data:text/html,x", "//evil", 7):
        assert safe_link(url) is None, url
