"""The endpoints (service/routes.py): /healthz, /docs and a successful POST /v1/reviews."""

from __future__ import annotations

import pytest

from pr_review_api.loop.workspace import ChangeTarget
from pr_review_api.output.json import render_json
from tests.results import PR_URL, as_json, review_result
from tests.service.support import FakeReviewer, app_with, client_for, post_review

pytestmark = pytest.mark.anyio


# --- health and documentation ----------------------------------------------------------------


async def test_healthz_answers_ok() -> None:
    async with client_for(app_with()) as client:
        response = await client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


async def test_swagger_ui_is_served_when_the_service_is_open() -> None:
    async with client_for(app_with()) as client:
        response = await client.get("/docs")
    assert response.status_code == 200
    assert "swagger-ui" in response.text
    assert "/openapi.json" in response.text


# --- success ---------------------------------------------------------------------------------


async def test_success_returns_the_review_document() -> None:
    reviewer = FakeReviewer(review_result(trace=True))
    async with client_for(app_with(reviewer)) as client:
        response = await post_review(client, {"pull_request_url": PR_URL, "include_trace": True})
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == as_json(reviewer.result)
    assert response.content == render_json(as_json(reviewer.result)).encode()
    [(target, include_trace, _)] = reviewer.calls
    assert target == ChangeTarget(PR_URL)
    assert include_trace is True


async def test_include_trace_defaults_to_false() -> None:
    reviewer = FakeReviewer()
    async with client_for(app_with(reviewer)) as client:
        await post_review(client)
    assert reviewer.calls[0][1] is False
