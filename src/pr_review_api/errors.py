"""The one error tree of pr-review.

Every failure a user, a script or an HTTP client can see is a `ReviewError` whose `code` is
one of the stable codes of specification §5. The HTTP API and the CLI each map this tree
in exactly one place (`api.py`, `cli.py`).

    ReviewError
    ├── InvalidRequest                 invalid_request                 422
    ├── InvalidPullRequestUrl          invalid_pull_request_url        422
    ├── Unauthorized                   unauthorized                    401
    ├── PullRequestNotFound            pull_request_not_found          404
    ├── GitHubUnavailable              github_unavailable              502
    ├── GitLabUnavailable              gitlab_unavailable              502
    ├── GiteaUnavailable               gitea_unavailable               502
    ├── ProviderError
    │   ├── OpenCodeAuthenticationFailed  opencode_authentication_failed 502
    │   ├── OpenCodeRateLimited        opencode_rate_limited           503 (+ retry_after)
    │   └── OpenCodeUnavailable        opencode_unavailable            502
    ├── ReviewTerminated               the loop ended without a final review; code == reason
    │   ├── MaxRounds                  max_rounds                      502
    │   ├── MaxToolCalls               max_tool_calls                  502
    │   ├── InvalidToolCall            invalid_tool_call               502
    │   ├── InvalidModelResponse       invalid_model_response          502
    │   ├── UpstreamResponseTooLarge   upstream_response_too_large     502
    │   ├── UnsupportedFinishReason    unsupported_finish_reason       502
    │   ├── TokenBudget                token_budget                    502
    │   └── ReviewTimeout              review_timeout                  504
    ├── InvalidRepository              invalid_repository              422; CLI exit 2
    ├── PublishNotPossible             github_publish_failed           422; CLI exit 1
    │   ├── GitLabPublishNotPossible   gitlab_publish_failed           422; CLI exit 1
    │   └── GiteaPublishNotPossible    gitea_publish_failed            422; CLI exit 1
    ├── ConfigurationError             configuration_error             CLI exit 2
    ├── ServerBusy                     server_busy                     503 (+ Retry-After)
    ├── InvalidSignature               invalid_signature               401
    ├── JobNotFound                    job_not_found                   404
    └── Interrupted                    interrupted                     CLI exit 130

Messages are fixed sentences written here or by the raiser: never a provider body, a key, a
token, a header, a local path or a stack trace. An error that ended a review carries the
review's `RunRecord` in `run` (rounds, usage, trace) for internal callers; `to_body()` never
shows it. `ToolError` is separate: it is a tool-level
result returned to the model (specification §7), not a failure of the review.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Literal

if TYPE_CHECKING:  # model.py imports settings, which imports this module
    from pr_review_api.model import RunRecord

ToolErrorCode = Literal[
    "path_not_found",
    "invalid_path",
    "outside_repository",
    "not_a_file",
    "not_a_directory",
    "binary_file",
    "file_too_large",
    "invalid_range",
    "invalid_cursor",
]


class ReviewError(Exception):
    """Root of every contract error; carries a stable code and an HTTP status."""

    code: ClassVar[str] = "internal_error"
    status: ClassVar[int] = 500
    default_message: ClassVar[str] = "The review failed."

    def __init__(self, message: str | None = None) -> None:
        self.message = message or self.default_message
        # What the review had spent when this ended it (rounds, usage, trace), set by the
        # conversation engine and run_review: for internal callers only, never in to_body().
        self.run: RunRecord | None = None
        super().__init__(self.message)

    @property
    def termination_reason(self) -> str | None:
        """The loop's termination reason, when the loop ran and ended without a review."""
        return None

    def to_body(self) -> dict[str, object]:
        """The contract's error document."""
        return {
            "error": {"code": self.code, "message": self.message},
            "termination_reason": self.termination_reason,
            "trace": None,
        }


class InvalidRequest(ReviewError):
    """The request body does not match the API schema."""

    code = "invalid_request"
    status = 422
    default_message = "The request body is not valid."


class InvalidPullRequestUrl(ReviewError):
    """The pull-request URL is not one this server accepts."""

    code = "invalid_pull_request_url"
    status = 422
    default_message = "The pull request URL is not a supported pull request URL."


class Unauthorized(ReviewError):
    """A service key is required and was missing or wrong."""

    code = "unauthorized"
    status = 401
    default_message = "A valid service key is required: send Authorization: Bearer <key>."


class PullRequestNotFound(ReviewError):
    """The host says the pull request or repository does not exist or is not visible."""

    code = "pull_request_not_found"
    status = 404
    default_message = "The pull request does not exist or is not visible with these credentials."


class ForgeUnavailable(ReviewError):
    """A forge failed, timed out, rate-limited us or refused the fetch: each forge's own error
    (its code names the forge) derives from it, so that what treats every forge's outage alike
    (a job tried again later) names none."""

    status = 502


class GitHubUnavailable(ForgeUnavailable):
    """The host failed, timed out, rate-limited us or refused the fetch."""

    code = "github_unavailable"
    status = 502
    default_message = "GitHub could not be reached or refused the request."


class GitLabUnavailable(ForgeUnavailable):
    """GitLab failed, timed out, rate-limited us or refused the fetch (specification §17)."""

    code = "gitlab_unavailable"
    status = 502
    default_message = "GitLab could not be reached or refused the request."


class GiteaUnavailable(ForgeUnavailable):
    """Gitea (or Forgejo) failed, timed out, rate-limited us or refused the fetch
    (specification §19)."""

    code = "gitea_unavailable"
    status = 502
    default_message = "Gitea could not be reached or refused the request."


class ProviderError(ReviewError):
    """The model provider failed before answering with a usable turn."""


class OpenCodeAuthenticationFailed(ProviderError):
    """The provider answered 401 or 403."""

    code = "opencode_authentication_failed"
    status = 502
    default_message = "The model provider rejected the API key (check OPENCODE_API_KEY)."


class OpenCodeRateLimited(ProviderError):
    """The provider answered 429."""

    code = "opencode_rate_limited"
    status = 503
    default_message = "The model provider is rate limiting requests; try again later."

    def __init__(self, message: str | None = None, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after

    def to_body(self) -> dict[str, object]:
        body = super().to_body()
        if self.retry_after is not None:
            error = body["error"]
            assert isinstance(error, dict)
            error["retry_after"] = self.retry_after
        return body


class OpenCodeUnavailable(ProviderError):
    """The provider answered 5xx, refused the connection or the network failed."""

    code = "opencode_unavailable"
    status = 502
    default_message = "The model provider is unavailable."


class ReviewTerminated(ReviewError):
    """The review loop ended without a final review; the code is the termination reason."""

    status = 502

    @property
    def termination_reason(self) -> str | None:
        return self.code


class MaxRounds(ReviewTerminated):
    """The provider did not finish within REVIEW_MAX_ROUNDS rounds."""

    code = "max_rounds"
    default_message = "The model did not finish its review within the allowed number of rounds."


class MaxToolCalls(ReviewTerminated):
    """A round or the whole review would exceed its tool-call limit."""

    code = "max_tool_calls"
    default_message = "The model asked for more tool calls than allowed."


class TokenBudget(ReviewTerminated):
    """REVIEW_MAX_TOTAL_TOKENS was reached before anything of the review was validated."""

    code = "token_budget"
    default_message = "The review reached its token budget before a final review."


class InvalidToolCall(ReviewTerminated):
    """A tool call's id, name, argument JSON, schema or consistency was invalid."""

    code = "invalid_tool_call"
    default_message = "The model made an invalid tool call; no call of that round was run."


class InvalidModelResponse(ReviewTerminated):
    """The provider envelope, final review or accumulated tool context was invalid."""

    code = "invalid_model_response"
    default_message = "The model's response was not valid."


class UpstreamResponseTooLarge(ReviewTerminated):
    """The provider's decoded HTTP body exceeded 2 MiB."""

    code = "upstream_response_too_large"
    default_message = "The model provider's response exceeded the size limit."


class UnsupportedFinishReason(ReviewTerminated):
    """The provider returned length, content_filter, null or an unknown finish reason."""

    code = "unsupported_finish_reason"
    default_message = "The model stopped for an unsupported reason."


class ReviewTimeout(ReviewTerminated):
    """The whole review outlasted REVIEW_TIMEOUT_SECONDS."""

    code = "review_timeout"
    status = 504
    default_message = "The review did not finish within the time limit."


class InvalidRepository(ReviewError):
    """A local repository path or revision does not name a git repository or a commit, or a
    repository exceeds the preparation budgets (too many entries or links, too large an index)."""

    code = "invalid_repository"
    status = 422
    default_message = "The repository or one of its revisions is not valid."


class PublishNotPossible(ReviewError):
    """A review asked to be published whose token GitHub refuses, or may not write: said
    before the model is asked, so that no review is paid for that cannot be published."""

    code = "github_publish_failed"
    status = 422
    default_message = "The review cannot be published with this token; nothing was reviewed."


class GitLabPublishNotPossible(PublishNotPossible):
    """`PublishNotPossible` on a GitLab merge request: GitLab's own code."""

    code = "gitlab_publish_failed"


class GiteaPublishNotPossible(PublishNotPossible):
    """The same on a Gitea pull request: Gitea's publications fail with their own code."""

    code = "gitea_publish_failed"


class ConfigurationError(ReviewError):
    """A setting is missing or invalid."""

    code = "configuration_error"
    status = 500
    default_message = "The configuration is not valid."


class ServerBusy(ReviewError):
    """The server already runs its maximum number of reviews."""

    code = "server_busy"
    status = 503
    default_message = "The server is busy with other reviews; try again shortly."

    def __init__(self, message: str | None = None, retry_after: int = 5) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class InvalidSignature(ReviewError):
    """A webhook delivery without a valid X-Hub-Signature-256."""

    code = "invalid_signature"
    status = 401
    default_message = "The webhook delivery's signature is missing or not valid."


class JobNotFound(ReviewError):
    """No review job has the id asked for."""

    code = "job_not_found"
    status = 404
    default_message = "There is no review job with that id."


class Interrupted(ReviewError):
    """The user interrupted the review (Ctrl-C): CLI only, exit 130."""

    code = "interrupted"
    status = 500  # never served: only the command line raises it
    default_message = "The review was interrupted."


class ToolError(Exception):
    """A tool-level failure returned to the model as `{"ok": false, "error": ...}`."""

    def __init__(self, code: ToolErrorCode, message: str) -> None:
        super().__init__(message)
        self.code: ToolErrorCode = code
        self.message = message

    def to_result(self) -> dict[str, object]:
        """The tool result document of specification §7."""
        return {"ok": False, "error": {"code": self.code, "message": self.message}}
