"""Errors to statuses (service/errors.py): every `ReviewError` has its status and document."""

from __future__ import annotations

import pytest

from pr_review_api import errors
from pr_review_api.errors import ReviewError
from tests.service.support import FakeReviewer, app_with, assert_error, client_for, post_review

pytestmark = pytest.mark.anyio


# --- the error tree ---------------------------------------------------------------------------

ERROR_CASES: list[tuple[ReviewError, int, str | None]] = [
    (errors.InvalidPullRequestUrl(), 422, None),
    (errors.PullRequestNotFound(), 404, None),
    (errors.GitHubUnavailable(), 502, None),
    (errors.GitLabUnavailable(), 502, None),
    (errors.GiteaUnavailable(), 502, None),
    (errors.OpenCodeAuthenticationFailed(), 502, None),
    (errors.OpenCodeRateLimited(retry_after=30), 503, None),
    (errors.OpenCodeUnavailable(), 502, None),
    (errors.MaxRounds(), 502, "max_rounds"),
    (errors.MaxToolCalls(), 502, "max_tool_calls"),
    (errors.InvalidToolCall(), 502, "invalid_tool_call"),
    (errors.InvalidModelResponse(), 502, "invalid_model_response"),
    (errors.UpstreamResponseTooLarge(), 502, "upstream_response_too_large"),
    (errors.UnsupportedFinishReason(), 502, "unsupported_finish_reason"),
    (errors.TokenBudget(), 502, "token_budget"),
    (errors.ReviewTimeout(), 504, "review_timeout"),
    (errors.ConfigurationError(), 500, None),
    # A pull request's repository over the preparation budgets (specification §5: 422).
    (errors.InvalidRepository(), 422, None),
    # A post whose token may not publish, said before the model is asked (specification §15).
    (errors.PublishNotPossible(), 422, None),
    (errors.GitLabPublishNotPossible(), 422, None),
    (errors.GiteaPublishNotPossible(), 422, None),
    (errors.ServerBusy(), 503, None),
    (errors.InvalidSignature(), 401, None),
    (errors.JobNotFound(), 404, None),
]


@pytest.mark.parametrize(
    ("error", "status", "termination_reason"),
    ERROR_CASES,
    ids=[error.code for error, _, _ in ERROR_CASES],
)
async def test_review_errors_map_to_their_status_and_document(
    error: ReviewError, status: int, termination_reason: str | None
) -> None:
    async with client_for(app_with(FakeReviewer(error=error))) as client:
        response = await post_review(client)
    document = assert_error(response, status, error.code)
    assert document == error.to_body()
    assert document["termination_reason"] == termination_reason


def _contract_errors(cls: type[ReviewError] = ReviewError) -> set[type[ReviewError]]:
    found = set()
    for sub in cls.__subclasses__():
        if sub.__module__ == errors.__name__:
            found |= {sub} | _contract_errors(sub)
    return found


def test_every_error_the_service_can_raise_has_a_mapping_test() -> None:
    abstract = {errors.ProviderError, errors.ReviewTerminated, errors.ForgeUnavailable}
    cli_only = {errors.Interrupted}
    tested = {type(error) for error, _, _ in ERROR_CASES}
    # InvalidRequest and Unauthorized are raised by the shell itself; tested below.
    shell = {errors.InvalidRequest, errors.Unauthorized}
    assert _contract_errors() - abstract - cli_only - shell == tested


async def test_rate_limit_sets_retry_after_header_and_field() -> None:
    error = errors.OpenCodeRateLimited(retry_after=30)
    async with client_for(app_with(FakeReviewer(error=error))) as client:
        response = await post_review(client)
    document = assert_error(response, 503, "opencode_rate_limited")
    assert response.headers["retry-after"] == "30"
    assert document["error"]["retry_after"] == 30


async def test_rate_limit_without_a_hint_has_no_retry_after() -> None:
    error = errors.OpenCodeRateLimited()
    async with client_for(app_with(FakeReviewer(error=error))) as client:
        response = await post_review(client)
    document = assert_error(response, 503, "opencode_rate_limited")
    assert "retry-after" not in response.headers
    assert "retry_after" not in document["error"]


async def test_unknown_path_and_wrong_method_use_the_error_document() -> None:
    async with client_for(app_with()) as client:
        missing = await client.get("/v2/reviews")
        wrong = await client.get("/v1/reviews")
    assert_error(missing, 404, "invalid_request")
    assert_error(wrong, 405, "invalid_request")
    assert wrong.headers["allow"] == "POST"
