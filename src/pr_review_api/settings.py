"""Configuration and every fixed limit, named as the protocol seed names them.

Settings come from the environment and from `.env` in the working directory (the environment
wins). A `.env` that git tracks is never read (specification §2): the working directory may be
a checkout of the pull request under review, and a committed `.env` could point the provider key
and the GitHub token at another host. `load_settings()` turns any invalid value into a one-line
`ConfigurationError` naming the variable, never echoing its value (it may be a secret).
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Literal, Self
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    DotEnvSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from pr_review_api.errors import ConfigurationError
from pr_review_api.git_runner import GitConfig, run_git

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
# specification §14: a suggestion replaces at most this many lines with at most 8 KiB of text.
MAX_SUGGESTION_LINES = 50
MAX_SUGGESTION_BYTES = 8 * 1024
# The parses that prove one review's suggestions keep the file parsing share this many seconds.
MAX_SYNTAX_CHECK_SECONDS = 20.0
# They run in a child process with this much address space (loop/syntax_process.py): one tree
# of 1 MiB of dense code can take hundreds of megabytes, and a review may change many files.
# With the review's own process (about 80 MB), a review stays under 300 MB (bench/syntax.py).
MAX_SYNTAX_CHECK_MEMORY = 192 * 1024 * 1024

# --- Trace limits (seed: "Trace interpretation") ---
MAX_TRACE_PREVIEW_BYTES = 4 * 1024

# --- Prompt limits: untrusted pull-request text handed to the model ---
MAX_PROMPT_DESCRIPTION_BYTES = 16 * 1024
MAX_PROMPT_CHANGED_FILES = 300

# --- Review coverage (specification §5): changed files listed as not inspected ---
MAX_NOT_INSPECTED = 100

# --- Team knowledge (specification §20): custom checks and learnings ---
MAX_CUSTOM_CHECKS = 10
MAX_CHECK_NAME_CHARS = 80
MAX_CHECK_INSTRUCTIONS_BYTES = 2 * 1024
MAX_LEARNING_CHARS = 500
MAX_LEARNINGS_GIVEN = 50  # the newest, to every later review of the repository
MAX_LEARNINGS_GIVEN_BYTES = 8 * 1024  # their texts, all together


# REVIEW_PROFILE=local: what a model on a local server (llama.cpp, Ollama, vLLM on a CPU or a
# small GPU) needs to finish a review, each value taken only where its own variable is unset.
# The default profile changes nothing: the seed's protocol exactly (specification §12).
LOCAL_PROFILE: dict[str, object] = {
    "review_tolerant_final_json": True,  # small models fence their JSON
    "review_repair_attempts": 1,  # and get a field wrong once
    "review_inline_diff_bytes": 16 * 1024,  # many answer at once, without calling a tool
    "review_timeout_seconds": 1800.0,  # a CPU writes 10-20 tokens a second
}

ENV_FILE = ".env"
# For the one look-up below: the folder may belong to another user (a CI checkout), and git
# refuses such a repository unless told otherwise; the query itself is read-only and hardened.
_ENV_FILE_QUERY_CONFIG = GitConfig(values=(("safe.directory", "*"),))


def _inside_git_work_tree(directory: Path) -> bool:
    return any((folder / ".git").exists() for folder in (directory, *directory.parents))


def _git_tracks(directory: Path, name: str) -> bool | None:
    """Whether git tracks `name` in `directory` (index or HEAD); None when it cannot tell."""
    args = ["ls-files", "--error-unmatch", "--", name]
    try:
        for with_head in (True, False):  # --with-tree fails in a repository with no commit yet
            option = ["--with-tree=HEAD"] if with_head else []
            done = run_git(
                None,
                [args[0], *option, *args[1:]],
                cwd=directory,
                config=_ENV_FILE_QUERY_CONFIG,
                timeout=30,
                check=False,
            )
            if done.returncode in (0, 1):
                return done.returncode == 0
    except (OSError, subprocess.SubprocessError):
        pass
    return None


def trusted_env_file(directory: Path | None = None) -> Path | None:
    """The `.env` to read from `directory` (the working directory), or None.

    A `.env` is skipped, with one line on stderr, when git tracks it or when the folder is in a
    git work tree and git cannot say whether it does: committed content is the pull request's,
    not the operator's.
    """
    folder = Path.cwd() if directory is None else directory
    candidate = folder / ENV_FILE
    if not candidate.exists() and not candidate.is_symlink():
        return None
    if not _inside_git_work_tree(folder):
        return candidate
    tracked = _git_tracks(folder, ENV_FILE)
    if tracked is False:
        return candidate
    reason = "git tracks it" if tracked else "git could not say whether it tracks it"
    # One line that says what to do: the operator's own settings belong in the environment,
    # or in a `.env` git does not track (untracked, it is read again once that is committed).
    sys.stderr.write(
        f"warning: not reading .env in the working directory: {reason}, so it may come "
        "from the code under review; set these variables in the environment instead, or "
        "keep .env out of git (list it in .gitignore, then `git rm --cached .env` and "
        "commit).\n"
    )
    return None


# A `Host` name: letters, digits and hyphens between dots, or a bracketed IPv6 address.
_HOST_NAME = re.compile(r"\[[0-9a-f:.]+\]|[a-z0-9-]+(?:\.[a-z0-9-]+)*", re.ASCII)


def _check_http_url(name: str, value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{name} must be an http:// or https:// URL")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise ValueError(f"{name} must not carry credentials, a query or a fragment")
    return value.rstrip("/")


class Settings(BaseSettings):
    """Every setting of specification §2, plus the service's own knobs."""

    model_config = SettingsConfigDict(
        env_file=ENV_FILE, env_file_encoding="utf-8", extra="ignore", case_sensitive=False
    )

    opencode_api_key: SecretStr | None = None
    opencode_base_url: str = "https://opencode.ai/zen/go/v1"
    opencode_model: str = Field(default="deepseek-v4-flash", min_length=1, max_length=200)
    github_token: SecretStr | None = None
    github_server_url: str = "https://github.com"
    github_api_url: str = "https://api.github.com"
    # GitLab merge requests (specification §17); the API base defaults to `<server>/api/v4`.
    gitlab_server_url: str = "https://gitlab.com"
    gitlab_api_url: str | None = None
    gitlab_token: SecretStr | None = None
    pr_review_gitlab_webhook_secret: SecretStr | None = None
    # Gitea and Forgejo pull requests (specification §19): no default server, so unset routes
    # nothing to Gitea; the API base defaults to `<server>/api/v1`.
    gitea_server_url: str | None = None
    gitea_api_url: str | None = None
    gitea_token: SecretStr | None = None
    pr_review_gitea_webhook_secret: SecretStr | None = None
    review_max_rounds: int = Field(default=8, ge=1, le=100)
    review_max_tool_calls: int = Field(default=24, ge=1, le=1000)
    review_max_tool_calls_per_round: int = Field(default=8, ge=1, le=100)
    review_timeout_seconds: float = Field(default=300, gt=0, le=24 * 3600)
    pr_review_cache_dir: Path = Path("~/.cache/pr-review")
    pr_review_api_keys: Annotated[tuple[SecretStr, ...], NoDecode] = ()
    # Host names a keyless `serve` answers besides loopback (specification §5, service/hosts.py).
    pr_review_allowed_hosts: Annotated[tuple[str, ...], NoDecode] = ()
    # Not in the contract's table: the service's own capacity and the cache's bound.
    pr_review_max_concurrent_reviews: int = Field(default=16, ge=1, le=1024)
    pr_review_cache_max_bytes: int = Field(default=20 * 1024**3, ge=64 * 1024**2)
    # A one-shot review hands the search-index build it leaves unfinished to a detached,
    # low-priority process (loop/background_index.py), as `git gc --auto` detaches.
    pr_review_background_index: bool = True
    # Publishing (specification §10): inline comments in one review; the rest go in its body.
    pr_review_max_inline_comments: int = Field(default=30, ge=0, le=1000)
    # The merge gate (specification §16): a published review sets a check run (or commit status).
    # PR_REVIEW_FAIL_ON (not in the contract's table; the Action's `fail-on` input) can only
    # make the base's `fail_on` stricter (loop/gate.py).
    pr_review_check_runs: bool = True
    pr_review_fail_on: Literal["critical", "high", "medium", "low", "info", "none"] | None = None
    # The comment commands (specification §15): answers in our threads, per pull request per hour.
    pr_review_max_answers_per_hour: int = Field(default=20, ge=0, le=10_000)
    # Real models (specification §12); the defaults keep the seed's protocol exactly.
    # One name for the four settings below that a local model needs (LOCAL_PROFILE).
    review_profile: Literal["default", "local"] = "default"
    opencode_max_retries: int = Field(default=2, ge=0, le=10)
    review_repair_attempts: int = Field(default=0, ge=0, le=10)
    review_tolerant_final_json: bool = False
    review_inline_diff_bytes: int = Field(default=0, ge=0, le=1024 * 1024)
    # specification §2: each finding confirmed or refuted in its own short tool loop
    # (loop/verify.py).
    review_verify_findings: bool = False
    # specification §2: findings must quote code the model received (loop/evidence.py).
    review_require_evidence: bool = False
    # specification §14: findings may carry a committable replacement (loop/suggestions.py).
    review_suggestions: bool = False
    # specification §21: the final review carries a walkthrough (.pr-review.toml's `walkthrough`
    # wins when set; loop/walkthrough.py).
    review_walkthrough: bool = False
    # specification §§2, 5: the tokens one review may spend over all its conversations (the
    # engine's Tally); none by default. Reaching it stops new provider requests.
    review_max_total_tokens: int | None = Field(default=None, ge=1)
    # US dollars per million prompt (input) and completion (output) tokens: with either set,
    # the document, the reports, the job record and the metrics carry an estimated cost.
    review_price_input_per_mtok: float | None = Field(default=None, ge=0, le=1_000_000)
    review_price_output_per_mtok: float | None = Field(default=None, ge=0, le=1_000_000)
    # specification §2 (loop/batches.py): a change of more files or diff bytes than these is
    # reviewed in batches of related files; 0 files (the default, which keeps the seed's one
    # loop exactly, specification §12) turns batching off; 20 is the advised value. A batch's files
    # fit one inspect_git_diff call (MAX_DIFF_PATHS paths; the default diff size in a result).
    review_batch_max_files: int = Field(default=0, ge=0, le=MAX_DIFF_PATHS)
    review_batch_max_diff_bytes: int = Field(default=48 * 1024, ge=1024, le=64 * 1024 * 1024)
    # Service mode (specification §11; jobs/). The URL may carry a password: a secret.
    pr_review_database_url: SecretStr | None = None
    pr_review_data_dir: Path = Path("~/.local/share/pr-review")
    pr_review_webhook_secret: SecretStr | None = None
    github_app_id: int | None = Field(default=None, ge=1)
    github_app_private_key_file: Path | None = None
    # Not in the contract's table: jobs of one tenant (an installation, or an owner without
    # one; jobs/fairness.py) running at once, all workers together, and how often one job is
    # tried before it ends failed.
    pr_review_installation_max_running: int = Field(default=4, ge=1, le=1024)
    pr_review_job_max_attempts: int = Field(default=3, ge=1, le=20)
    # Not in the contract's table: this worker host's stable id (jobs/affinity.py). A worker
    # takes the jobs of its host's own queue beside the shared one, and a repository's jobs go
    # to the host whose cache holds it; every process of one host (one cache) shares the id.
    # Blank (the default): the host name.
    pr_review_worker_host: str = Field(
        default="",
        validate_default=True,
        min_length=1,
        max_length=200,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
    )
    # Budgets of preparing one head (git/limits.py); the kernel tree (80k entries, a few
    # hundred short links, about 40 MB of index) fits well within them.
    pr_review_max_tree_entries: int = Field(default=1_000_000, ge=1)
    pr_review_max_link_hops_total: int = Field(default=100_000, ge=1)
    pr_review_max_link_target_bytes: int = Field(default=1024**2, ge=4096)
    pr_review_max_index_bytes: int = Field(default=512 * 1024**2, ge=1024**2)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Every construction goes through here, so no caller can read a tracked .env by mistake.
        env_file = trusted_env_file()
        if env_file is None:
            return init_settings, env_settings
        return init_settings, env_settings, DotEnvSettingsSource(settings_cls, env_file=env_file)

    @field_validator(
        "opencode_base_url", "github_server_url", "github_api_url", "gitlab_server_url"
    )
    @classmethod
    def _http_url(cls, value: str, info: object) -> str:
        name = getattr(info, "field_name", "URL") or "URL"
        return _check_http_url(name.upper(), value)

    @field_validator("gitlab_api_url", "gitea_server_url", "gitea_api_url")
    @classmethod
    def _optional_http_url(cls, value: str | None, info: object) -> str | None:
        name = getattr(info, "field_name", "URL") or "URL"
        return None if value is None else _check_http_url(name.upper(), value)

    @model_validator(mode="after")
    def _apply_profile(self) -> Settings:
        if self.review_profile == "local":
            for name, value in LOCAL_PROFILE.items():
                if name not in self.model_fields_set:  # a variable of its own wins
                    setattr(self, name, value)
        return self

    @property
    def gitlab_api_base(self) -> str:
        """`GITLAB_API_URL`, or `<GITLAB_SERVER_URL>/api/v4` when it is not set."""
        return self.gitlab_api_url or f"{self.gitlab_server_url}/api/v4"

    @property
    def gitea_api_base(self) -> str | None:
        """`GITEA_API_URL`, or `<GITEA_SERVER_URL>/api/v1`; None while no Gitea is configured."""
        if self.gitea_server_url is None:
            return None
        return self.gitea_api_url or f"{self.gitea_server_url}/api/v1"

    @field_validator(
        "opencode_api_key", "github_token", "gitlab_token", "gitea_token", mode="before"
    )
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("pr_review_api_keys", mode="before")
    @classmethod
    def _split_keys(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(key.strip() for key in value.split(",") if key.strip())
        return value

    @field_validator("pr_review_allowed_hosts", mode="before")
    @classmethod
    def _split_host_names(cls, value: object) -> object:
        # Names as a browser sends them in `Host`, compared without the port (service/hosts.py).
        if isinstance(value, str):
            value = value.split(",")
        if not isinstance(value, list | tuple):
            return value
        names = tuple(str(name).strip().lower().removesuffix(".") for name in value)
        names = tuple(name for name in names if name)
        if not all(_HOST_NAME.fullmatch(name) for name in names):
            raise ValueError("must list host names such as review.example.com, without a port")
        return names

    @field_validator("pr_review_cache_dir")
    @classmethod
    def _expand_cache_dir(cls, value: Path) -> Path:
        return value.expanduser()

    @field_validator(
        "pr_review_database_url",
        "pr_review_webhook_secret",
        "pr_review_gitlab_webhook_secret",
        "gitlab_api_url",
        "pr_review_gitea_webhook_secret",
        "gitea_server_url",
        "gitea_api_url",
        "github_app_id",
        "github_app_private_key_file",
        "pr_review_fail_on",
        mode="before",
    )
    @classmethod
    def _blank_service_setting_is_unset(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("pr_review_worker_host", mode="before")
    @classmethod
    def _blank_worker_host_is_the_host_name(cls, value: object) -> object:
        if isinstance(value, str) and not value.strip():
            return socket.gethostname() or "localhost"
        return value

    @field_validator("pr_review_data_dir", "github_app_private_key_file")
    @classmethod
    def _expand_service_path(cls, value: Path | None) -> Path | None:
        return None if value is None else value.expanduser()

    @model_validator(mode="after")
    def _gitea_api_needs_its_server(self) -> Self:
        # An API base with no server to check URLs against would route nothing; say so.
        if self.gitea_api_url is not None and self.gitea_server_url is None:
            raise ValueError("GITEA_API_URL is set but GITEA_SERVER_URL is not")
        return self

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
