"""service/body.py: one strict reader for every JSON request body, so each endpoint answers a
bad body with the same words (specification §5)."""

from __future__ import annotations

import json

import pytest
from fastapi import FastAPI, Request
from fastapi.testclient import TestClient
from pydantic import BaseModel

from pr_review_api.errors import ReviewError
from pr_review_api.service.body import json_body
from pr_review_api.service.documents import ReviewRequest
from pr_review_api.service.jobs_routes import ReviewJobRequest

PR_URL = "https://github.com/acme/widget/pull/7"
_MODELS: dict[str, type[BaseModel]] = {"reviews": ReviewRequest, "jobs": ReviewJobRequest}


def _app() -> FastAPI:
    app = FastAPI()

    @app.post("/{kind}")
    async def read(kind: str, request: Request) -> dict[str, object]:
        try:
            body = await json_body(request, _MODELS[kind], 64 * 1024)
        except ReviewError as exc:
            return {"error": exc.message}
        return {"body": body.model_dump()}

    return app


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(_app())


def _post(client: TestClient, kind: str, content: str) -> str:
    response = client.post(
        f"/{kind}", content=content, headers={"content-type": "application/json"}
    )
    return str(response.json()["error"])


@pytest.mark.parametrize("kind", sorted(_MODELS))
def test_a_repeated_key_gets_its_own_message_on_every_endpoint(
    client: TestClient, kind: str
) -> None:
    body = json.dumps({"pull_request_url": PR_URL})[:-1] + ', "pull_request_url": "other"}'
    assert _post(client, kind, body) == "The request body must not repeat a key."


@pytest.mark.parametrize("kind", sorted(_MODELS))
@pytest.mark.parametrize("body", ["[1]", '"text"', "1", "{", "[" * 5000 + "]" * 5000])
def test_anything_but_one_object_is_refused_alike_on_every_endpoint(
    client: TestClient, kind: str, body: str
) -> None:
    assert _post(client, kind, body) == "The request body must be a JSON object."


@pytest.mark.parametrize("kind", sorted(_MODELS))
def test_an_unknown_field_names_the_fields_the_endpoint_takes(
    client: TestClient, kind: str
) -> None:
    message = _post(client, kind, json.dumps({"pull_request_url": PR_URL, "extra": 1}))
    assert message.startswith("The request body may hold only pull_request_url")


def test_a_valid_body_is_the_endpoints_model(client: TestClient) -> None:
    response = client.post("/jobs", json={"pull_request_url": PR_URL, "post": True})
    assert response.json() == {"body": {"pull_request_url": PR_URL, "post": True}}
