"""Configuration and every fixed limit, named as the protocol seed names them.

Settings come from the environment and from `.env` in the working directory (the environment
wins). `load_settings()` turns any invalid value into a one-line `ConfigurationError` naming
the variable, never echoing its value (it may be a secret).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from pr_review_api.errors import ConfigurationError

# --- Tool limits (seed: "How each repository tool is interpreted") ---
MAX_READ_LINES = 400
MAX_SOURCE_FILE_BYTES = 1024 * 1024
MAX_TOOL_RESULT_BYTES = 64 * 1024  # serialized compact JSON, measured after escaping
MAX_SEARCH_MATCHES = 100
MAX_SEARCH_QUERY_CHARS = 512
MAX_SEARCH_EXCERPT_CHARS = 240
MAX_LIST_PAGE = 200
MAX_DIFF_BYTES = 128 * 1024
DEFAULT_DIFF_BYTES = 64 * 1024
MAX_DIFF_PATHS = 50
MAX_SYMLINK_HOPS = 40  # as Linux's ELOOP limit
MAX_PATH_BYTES = 4096

# --- Protocol limits (seed: turn checks and stop-turn checks) ---
MAX_PROVIDER_RESPONSE_BYTES = 2 * 1024 * 1024  # decoded body
MAX_CALL_ID_CHARS = 128
MAX_TOOL_ARGUMENTS_BYTES = 64 * 1024
MAX_ACCUMULATED_TOOL_CONTENT_BYTES = 1024 * 1024
MAX_FINDINGS = 100
MAX_NOTES = 100
MAX_FINAL_TEXT_BYTES = 8 * 1024

# --- Trace limits (seed: "Trace interpretation") ---
MAX_TRACE_PREVIEW_BYTES = 4 * 1024

# --- Prompt limits: untrusted pull-request text handed to the model ---
MAX_PROMPT_DESCRIPTION_BYTES = 16 * 1024
MAX_PROMPT_CHANGED_FILES = 300


def _check_http_url(name: str, value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{name} must be an http:// or https:// URL")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise ValueError(f"{name} must not carry credentials, a query or a fragment")
    return value.rstrip("/")


class Settings(BaseSettings):
    """Every setting of CONTRACT.md section 2, plus the service's own knobs."""

    model_config = SettingsConfigDict(
        env_file=".env", env_file_encoding="utf-8", extra="ignore", case_sensitive=False
    )

    opencode_api_key: SecretStr | None = None
    opencode_base_url: str = "https://opencode.ai/zen/go/v1"
    opencode_model: str = Field(default="deepseek-v4-flash", min_length=1, max_length=200)
    github_token: SecretStr | None = None
    github_server_url: str = "https://github.com"
    github_api_url: str = "https://api.github.com"
    review_max_rounds: int = Field(default=8, ge=1, le=100)
    review_max_tool_calls: int = Field(default=24, ge=1, le=1000)
    review_max_tool_calls_per_round: int = Field(default=8, ge=1, le=100)
    review_timeout_seconds: float = Field(default=300, gt=0, le=24 * 3600)
    pr_review_cache_dir: Path = Path("~/.cache/pr-review")
    pr_review_api_keys: Annotated[tuple[SecretStr, ...], NoDecode] = ()
    # Not in the contract's table: the service's own capacity and the cache's bound.
    pr_review_max_concurrent_reviews: int = Field(default=16, ge=1, le=1024)
    pr_review_cache_max_bytes: int = Field(default=20 * 1024**3, ge=64 * 1024**2)

    @field_validator("opencode_base_url", "github_server_url", "github_api_url")
    @classmethod
    def _http_url(cls, value: str, info: object) -> str:
        name = getattr(info, "field_name", "URL") or "URL"
        return _check_http_url(name.upper(), value)

    @field_validator("opencode_api_key", "github_token", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("pr_review_api_keys", mode="before")
    @classmethod
    def _split_keys(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(key.strip() for key in value.split(",") if key.strip())
        return value

    @field_validator("pr_review_cache_dir")
    @classmethod
    def _expand_cache_dir(cls, value: Path) -> Path:
        return value.expanduser()

    def require_provider_key(self) -> SecretStr:
        """The provider key, or a configuration error that says how to set it."""
        if self.opencode_api_key is None:
            raise ConfigurationError(
                "OPENCODE_API_KEY is not set: export it or put it in .env in this folder."
            )
        return self.opencode_api_key


def load_settings(**overrides: object) -> Settings:
    """Read the settings, turning a validation error into one readable line."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        first = exc.errors()[0]
        name = str(first["loc"][0]).upper() if first["loc"] else "a setting"
        reason = first["msg"].removeprefix("Value error, ")
        # The input value is never echoed: it may be a key or a token.
        raise ConfigurationError(f"{name} is not valid: {reason}.") from None
