"""Service keys (service/auth.py): who may call /v1 and /docs, and how keys are compared."""

from __future__ import annotations

import hmac

import pytest

from pr_review_api.service.body import MAX_REQUEST_BODY_BYTES
from tests.results import PR_URL
from tests.service.support import (
    SERVICE_KEY,
    FakeReviewer,
    app_with,
    assert_error,
    client_for,
    post_review,
)

pytestmark = pytest.mark.anyio
OTHER_KEY = "svc-key-OTHER-SECRET-5d20"


async def test_openapi_declares_the_bearer_scheme_when_keys_are_set() -> None:
    async with client_for(app_with(pr_review_api_keys=SERVICE_KEY)) as client:
        response = await client.get("/openapi.json")  # open without a key
    schema = response.json()
    assert schema["components"]["securitySchemes"]["serviceKey"]["scheme"] == "bearer"
    assert schema["paths"]["/v1/reviews"]["post"]["security"] == [{"serviceKey": []}]
    assert SERVICE_KEY not in response.text


async def test_swagger_ui_needs_a_service_key_when_keys_are_set() -> None:
    async with client_for(app_with(pr_review_api_keys=SERVICE_KEY)) as client:
        refused = await client.get("/docs")
        served = await client.get("/docs", headers={"Authorization": f"Bearer {SERVICE_KEY}"})
        document = await client.get("/openapi.json")  # the published contract stays public
    assert_error(refused, 401, "unauthorized")
    assert served.status_code == 200
    assert "swagger-ui" in served.text
    assert document.status_code == 200
    assert SERVICE_KEY not in served.text


async def test_the_bearer_scheme_is_absent_while_the_service_is_open() -> None:
    async with client_for(app_with()) as client:
        schema = (await client.get("/openapi.json")).json()
    assert "security" not in schema["paths"]["/v1/reviews"]["post"]
    assert "securitySchemes" not in schema.get("components", {})


# --- service keys ------------------------------------------------------------------------------


async def test_without_configured_keys_no_authorization_is_needed() -> None:
    async with client_for(app_with(FakeReviewer())) as client:
        assert (await post_review(client)).status_code == 200


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": f"Bearer {SERVICE_KEY}x"},
        {"Authorization": f"Bearer {SERVICE_KEY[:-1]}"},
        {"Authorization": f"Basic {SERVICE_KEY}"},
        {"Authorization": SERVICE_KEY},
        {"Authorization": "Bearer "},
        {"X-Api-Key": SERVICE_KEY},
    ],
    ids=["missing", "wrong", "longer", "shorter", "basic", "no-scheme", "empty", "other-header"],
)
async def test_missing_or_wrong_key_is_unauthorized(headers: dict[str, str]) -> None:
    reviewer = FakeReviewer()
    app = app_with(reviewer, pr_review_api_keys=f"{SERVICE_KEY},{OTHER_KEY}")
    async with client_for(app) as client:
        response = await post_review(client, headers=headers)
    assert_error(response, 401, "unauthorized")
    assert response.headers["www-authenticate"] == "Bearer"
    assert SERVICE_KEY not in response.text
    assert reviewer.calls == []


@pytest.mark.parametrize("key", [SERVICE_KEY, OTHER_KEY])
async def test_any_configured_key_is_accepted(key: str) -> None:
    reviewer = FakeReviewer()
    app = app_with(reviewer, pr_review_api_keys=f"{SERVICE_KEY}, {OTHER_KEY}")
    async with client_for(app) as client:
        response = await post_review(client, headers={"Authorization": f"bearer {key}"})
    assert response.status_code == 200
    assert len(reviewer.calls) == 1


async def test_two_authorization_headers_are_unauthorized() -> None:
    app = app_with(FakeReviewer(), pr_review_api_keys=SERVICE_KEY)
    headers = [("Authorization", f"Bearer {SERVICE_KEY}"), ("Authorization", "Bearer other")]
    async with client_for(app) as client:
        response = await client.post(
            "/v1/reviews", json={"pull_request_url": PR_URL}, headers=headers
        )
    assert_error(response, 401, "unauthorized")


async def test_authorization_is_checked_before_the_body_is_read() -> None:
    app = app_with(FakeReviewer(), pr_review_api_keys=SERVICE_KEY)
    async with client_for(app) as client:
        invalid = await client.post("/v1/reviews", content=b"{not json")
        huge = await client.post("/v1/reviews", content=b"x" * (MAX_REQUEST_BODY_BYTES + 1))
    assert_error(invalid, 401, "unauthorized")
    assert_error(huge, 401, "unauthorized")


async def test_health_and_openapi_need_no_key() -> None:
    app = app_with(pr_review_api_keys=SERVICE_KEY)
    async with client_for(app) as client:
        assert (await client.get("/healthz")).status_code == 200
        assert (await client.get("/openapi.json")).status_code == 200


async def test_every_key_is_compared_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    compared: list[tuple[bytes, bytes]] = []

    original = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return original(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    keys = [SERVICE_KEY, OTHER_KEY, "third-key"]
    app = app_with(FakeReviewer(), pr_review_api_keys=",".join(keys))
    async with client_for(app) as client:
        response = await post_review(client, headers={"Authorization": f"Bearer {SERVICE_KEY}"})
    assert response.status_code == 200
    # The first key matched, and still every key was compared: no early exit to time.
    assert [b for _, b in compared] == [key.encode() for key in keys]
