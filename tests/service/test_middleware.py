"""The access log and the last line of defence (service/middleware.py)."""

from __future__ import annotations

import logging

import pytest

from pr_review_api import errors
from tests.conftest import PROVIDER_KEY
from tests.service.support import (
    SERVICE_KEY,
    FakeReviewer,
    app_with,
    assert_error,
    client_for,
    post_review,
)

pytestmark = pytest.mark.anyio


async def test_unexpected_exception_is_a_fixed_500_without_details(
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret = "boom sk-live-LEAKED-in-a-message /home/user/secret.txt"
    reviewer = FakeReviewer(error=RuntimeError(secret))
    with caplog.at_level(logging.DEBUG):
        async with client_for(app_with(reviewer)) as client:
            response = await post_review(client)
    document = assert_error(response, 500, "internal_error")
    assert document == {
        "error": {"code": "internal_error", "message": "The server failed unexpectedly."},
        "termination_reason": None,
        "trace": None,
    }
    assert "RuntimeError" in caplog.text
    assert secret not in caplog.text
    assert "LEAKED" not in caplog.text


async def test_the_service_keeps_serving_after_an_unexpected_exception() -> None:
    reviewer = FakeReviewer(error=ZeroDivisionError())
    async with client_for(app_with(reviewer)) as client:
        assert (await post_review(client)).status_code == 500
        reviewer.error = None
        assert (await post_review(client)).status_code == 200


# --- access log ---------------------------------------------------------------------------------


async def test_each_request_logs_one_structured_line_without_secrets(
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret_body = "https://github.com/acme/widget/pull/7?token=BODY-SECRET"
    app = app_with(FakeReviewer(error=errors.MaxRounds()), pr_review_api_keys=SERVICE_KEY)
    with caplog.at_level(logging.INFO, logger="pr_review_api.access"):
        async with client_for(app) as client:
            await post_review(
                client,
                {"pull_request_url": secret_body},
                headers={"Authorization": f"Bearer {SERVICE_KEY}"},
                params={"q": "QUERY-SECRET"},
            )
            await client.get("/healthz")
    records = [r for r in caplog.records if r.name == "pr_review_api.access"]
    assert [r.getMessage().split(" duration_ms=")[0] for r in records] == [
        "method=POST path=/v1/reviews status=502",
        "method=GET path=/healthz status=200",
    ]
    assert records[0].getMessage().endswith(" code=max_rounds")
    assert records[1].getMessage().endswith(" code=-")
    fields = records[0].access  # type: ignore[attr-defined]
    assert fields["status"] == 502
    assert fields["code"] == "max_rounds"
    assert isinstance(fields["duration_ms"], int)
    for secret in (SERVICE_KEY, "BODY-SECRET", "QUERY-SECRET", PROVIDER_KEY):
        assert secret not in caplog.text


async def test_unauthorized_and_oversized_requests_are_logged_with_their_code(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = app_with(FakeReviewer(), pr_review_api_keys=SERVICE_KEY)
    headers = {"Authorization": f"Bearer {SERVICE_KEY}"}
    with caplog.at_level(logging.INFO, logger="pr_review_api.access"):
        async with client_for(app) as client:
            await post_review(client)
            await client.post("/v1/reviews", content=b"x" * 70_000, headers=headers)
    messages = [r.getMessage() for r in caplog.records if r.name == "pr_review_api.access"]
    assert "status=401" in messages[0]
    assert messages[0].endswith("code=unauthorized")
    assert "status=413" in messages[1]
    assert messages[1].endswith("code=invalid_request")


async def test_a_hostile_path_cannot_forge_log_lines(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="pr_review_api.access"):
        async with client_for(app_with()) as client:
            await client.get("/healthz%0Amethod=GET%20path=/forged")
    [record] = [r for r in caplog.records if r.name == "pr_review_api.access"]
    assert "\n" not in record.getMessage()
    assert "path=/healthz\\nmethod=GET path=/forged" in record.getMessage()
