"""The documents of the HTTP API (specification §5), as OpenAPI shows them."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# What `pull_request_url` may name, for every body that takes one (forge/urls.py routes it).
CHANGE_URL_DESCRIPTION = (
    "A pull request on the configured GitHub host, a merge request on the configured GitLab "
    "host (specification §17), or a pull request on the configured Gitea or Forgejo server "
    "(`GITEA_SERVER_URL`, specification §19)."
)


class ReviewRequest(BaseModel):
    """The body of `POST /v1/reviews`: no other fields, no type coercion."""

    model_config = ConfigDict(extra="forbid", strict=True)

    pull_request_url: str = Field(
        description=CHANGE_URL_DESCRIPTION,
        examples=["https://github.com/acme/widget/pull/7"],
    )
    include_trace: bool = Field(
        default=False, description="Return the per-round trace with the review."
    )
    post: bool = Field(
        default=False,
        description="Publish the validated review on the pull request (docs/publishing.md); the "
        "result's `publication` says how it went.",
    )


class ErrorDetail(BaseModel):
    """What went wrong, as a stable code and a fixed sentence."""

    code: str = Field(description="A stable error code (docs/http-api.md).")
    message: str = Field(description="A short fixed sentence; never provider text or secrets.")
    retry_after: int | None = Field(
        default=None, description="Seconds the provider asked to wait (opencode_rate_limited)."
    )


class ErrorDocument(BaseModel):
    """Every failure, whatever its status."""

    error: ErrorDetail
    termination_reason: str | None = Field(
        description="The loop's termination reason when it ran and ended without a review."
    )
    trace: None = Field(description="Always null: a failed review returns no trace.")


class Health(BaseModel):
    """The liveness answer."""

    status: str = Field(examples=["ok"])


def _documented(description: str, **extra: Any) -> dict[str, Any]:
    return {"model": ErrorDocument, "description": description, **extra}


_RETRY_AFTER_HEADER = {
    "Retry-After": {
        "description": "Seconds to wait before retrying (always set for server_busy).",
        "schema": {"type": "integer"},
    }
}
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: _documented("`unauthorized`: a service key is required and was missing or wrong."),
    404: _documented("`pull_request_not_found`, or `invalid_request` for an unknown path."),
    413: _documented("`invalid_request`: the body exceeds 64 KiB."),
    422: _documented("`invalid_request` (body not the schema) or `invalid_pull_request_url`."),
    500: _documented("`internal_error` or `configuration_error`."),
    502: _documented(
        "`github_unavailable`, `opencode_authentication_failed`, `opencode_unavailable`, or a "
        "termination reason: `max_rounds`, `max_tool_calls`, `invalid_tool_call`, "
        "`invalid_model_response`, `upstream_response_too_large`, `unsupported_finish_reason`, "
        "`token_budget`."
    ),
    503: _documented(
        "`opencode_rate_limited` or `server_busy`, with Retry-After when known.",
        headers=_RETRY_AFTER_HEADER,
    ),
    504: _documented("`review_timeout`: the review outlasted REVIEW_TIMEOUT_SECONDS."),
}
