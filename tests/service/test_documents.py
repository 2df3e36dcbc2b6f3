"""The OpenAPI document (service/documents.py): every body it promises, checked by schemathesis."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import hypothesis
import pytest

from pr_review_api import errors
from pr_review_api.loop.run import ReviewOptions
from pr_review_api.loop.workspace import ChangeTarget
from pr_review_api.model import ReviewResult
from pr_review_api.service.jobs_routes import ReviewJobRequest
from pr_review_api.settings import Settings
from tests.conftest import examples
from tests.results import PR_URL, review_result
from tests.service.support import ERROR_KEYS, SERVICE_KEY, FakeReviewer, app_with, client_for

if TYPE_CHECKING:
    import schemathesis

pytestmark = pytest.mark.anyio


async def test_openapi_documents_the_success_and_every_error_body() -> None:
    async with client_for(app_with()) as client:
        schema = (await client.get("/openapi.json")).json()
    operation = schema["paths"]["/v1/reviews"]["post"]
    request = operation["requestBody"]["content"]["application/json"]["schema"]
    if "$ref" in request:
        request = schema["components"]["schemas"][request["$ref"].rsplit("/", 1)[1]]
    assert operation["requestBody"]["required"] is True
    assert set(request["properties"]) == {"pull_request_url", "include_trace", "post"}
    assert request["additionalProperties"] is False
    responses = operation["responses"]
    success = responses["200"]["content"]["application/json"]["schema"]["$ref"]
    assert success.endswith("/ReviewResult")
    for status in ("401", "404", "413", "422", "500", "502", "503", "504"):
        ref = responses[status]["content"]["application/json"]["schema"]["$ref"]
        assert ref.endswith("/ErrorDocument"), status
    assert "Retry-After" in responses["503"]["headers"]
    error = schema["components"]["schemas"]["ErrorDocument"]
    assert set(error["required"]) == ERROR_KEYS
    # `publication` (specification §10) arrives with the publishing work, `cost` only with a price
    # (REVIEW_PRICE_*_PER_MTOK); everything else is fixed.
    properties = set(schema["components"]["schemas"]["ReviewResult"]["properties"])
    assert properties - {"publication", "cost"} == {
        "coverage",
        "termination_reason",
        "pull_request",
        "revisions",
        "model",
        "review",
        "usage",
        "rounds",
        "tool_calls",
        "trace",
    }


# --- the OpenAPI document against the running app ----------------------------------------------


class _UrlCheckingReviewer(FakeReviewer):
    """Accepts only PR_URL, as the real service accepts only its host's pull requests."""

    async def __call__(
        self, target: ChangeTarget, settings: Settings, options: ReviewOptions
    ) -> ReviewResult:
        if target.url != PR_URL:
            raise errors.InvalidPullRequestUrl()
        return review_result(trace=options.include_trace)


def _operations(app: Any) -> list[Any]:
    # Imported here, not at collection: each pytest-xdist worker collects this file, and one
    # of them runs it.
    import schemathesis
    from schemathesis.core.result import Ok

    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    operations = []
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), "the OpenAPI document has an invalid operation"
        operations.append(result.ok())
    return operations


# schemathesis's pytest plugin does not run under pytest 9; its strategies do.
@pytest.mark.parametrize("keys", ["", SERVICE_KEY], ids=["open", "with-keys"])
def test_the_api_keeps_its_openapi_document(keys: str) -> None:
    app = app_with(_UrlCheckingReviewer(), pr_review_api_keys=keys)
    headers = {"Authorization": f"Bearer {SERVICE_KEY}"} if keys else None
    operations = _operations(app)
    assert sorted(f"{op.method.upper()} {op.path}" for op in operations) == [
        "GET /healthz",
        "POST /v1/reviews",
    ]
    from schemathesis import checks as schemathesis_checks

    for operation in operations:

        @hypothesis.given(case=operation.as_strategy())
        @hypothesis.settings(
            max_examples=examples(50),
            deadline=None,
            suppress_health_check=list(hypothesis.HealthCheck),
            database=None,
        )
        def check(case: schemathesis.Case[Any]) -> None:
            # Every other check runs. This one expects any schema-valid string to be accepted,
            # but a URL must also name a pull request on the configured host (422 otherwise),
            # which JSON Schema cannot say.
            case.call_and_validate(
                headers=headers, excluded_checks=[schemathesis_checks.positive_data_acceptance]
            )

        check()


async def test_openapi_names_every_forge_a_url_may_name() -> None:
    """The summary and each `pull_request_url` name the forges the routes accept (forge/urls.py):
    a reader of /docs learns that a Gitea or Forgejo pull request is reviewed too."""
    async with client_for(app_with()) as client:
        schema = (await client.get("/openapi.json")).json()
    request = schema["paths"]["/v1/reviews"]["post"]["requestBody"]["content"]
    review = request["application/json"]["schema"]["properties"]["pull_request_url"]
    job = ReviewJobRequest.model_json_schema()["properties"]["pull_request_url"]
    for text in (schema["info"]["summary"], review["description"], job["description"]):
        for forge in ("GitHub", "GitLab", "Gitea", "Forgejo"):
            assert forge in text, (forge, text)
