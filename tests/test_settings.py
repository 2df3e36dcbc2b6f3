"""Configuration (specification §2): where settings come from, and the `.env` that is never read.

The working directory may be a checkout of the pull request under review (a CI job, or a user
running `pr-review review --repo .`): a `.env` committed there is the author's, not the
operator's, and must not redirect the provider key or the GitHub token.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from pr_review_api.cli import commands as cli
from pr_review_api.errors import ConfigurationError
from pr_review_api.settings import LOCAL_PROFILE, Settings, load_settings, trusted_env_file
from tests.builders import final_turn
from tests.conftest import PROVIDER_KEY
from tests.fakes.provider_server import ScriptedProvider
from tests.gitrepo import GitRepo, git

ATTACKER = "http://127.0.0.1:9/v1"
HOSTILE_ENV = (
    f"OPENCODE_BASE_URL={ATTACKER}\n"
    "GITHUB_API_URL=http://127.0.0.1:9/api\n"
    "OPENCODE_MODEL=attacker-model\n"
)
WARNING = "warning: not reading .env in the working directory"


def _settings_in(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.chdir(folder)
    return Settings()


def _assert_not_read(settings: Settings) -> None:
    assert settings.opencode_base_url == "https://opencode.ai/zen/go/v1"
    assert settings.github_api_url == "https://api.github.com"
    assert settings.opencode_model == "deepseek-v4-flash"


def test_env_file_outside_git_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / ".env").write_text("OPENCODE_MODEL=from-dotenv\n")
    assert _settings_in(folder, monkeypatch).opencode_model == "from-dotenv"
    assert capsys.readouterr().err == ""


def test_untracked_env_file_in_a_repository_is_read(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo.commit_files({"a.py": "x = 1\n"})
    repo.write({".env": "OPENCODE_MODEL=operator-model\n"})
    assert _settings_in(repo.path, monkeypatch).opencode_model == "operator-model"
    assert capsys.readouterr().err == ""


def test_committed_env_file_is_never_read_and_the_program_says_so(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo.commit_files({".env": HOSTILE_ENV})
    _assert_not_read(_settings_in(repo.path, monkeypatch))
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(WARNING)
    assert "git tracks it" in err
    assert str(repo.path) not in err


def test_staged_env_file_is_never_read(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo.commit_files({"a.py": "x = 1\n"})
    repo.write({".env": HOSTILE_ENV})
    git(repo.path, "add", ".env")
    _assert_not_read(_settings_in(repo.path, monkeypatch))
    assert WARNING in capsys.readouterr().err


def test_env_file_committed_then_unstaged_is_never_read(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`git rm --cached` leaves HEAD's copy in the folder: still the commit's content."""
    repo.commit_files({".env": HOSTILE_ENV})
    git(repo.path, "rm", "-q", "--cached", ".env")
    _assert_not_read(_settings_in(repo.path, monkeypatch))


def test_committed_env_file_in_a_repository_without_commits_yet(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo.write({".env": HOSTILE_ENV})
    git(repo.path, "add", ".env")
    _assert_not_read(_settings_in(repo.path, monkeypatch))


def test_committed_env_symlink_is_never_read(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere.env"
    elsewhere.write_text(HOSTILE_ENV)
    repo.symlink(".env", str(elsewhere))
    repo.commit_files({"a.py": "x = 1\n"})
    _assert_not_read(_settings_in(repo.path, monkeypatch))


def test_committed_env_file_in_a_subfolder_of_the_checkout(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo.commit_files({"service/.env": HOSTILE_ENV})
    _assert_not_read(_settings_in(repo.path / "service", monkeypatch))


def test_env_file_is_skipped_when_git_cannot_tell(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Inside a work tree whose git data is unreadable, the safe answer is not to read."""
    repo.commit_files({".env": HOSTILE_ENV})
    (repo.path / ".git" / "HEAD").write_text("garbage\n")
    (repo.path / ".git" / "index").write_bytes(b"not an index")
    _assert_not_read(_settings_in(repo.path, monkeypatch))
    assert "could not say" in capsys.readouterr().err


def test_trusted_env_file_without_a_dotenv_says_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert trusted_env_file(tmp_path) is None
    assert capsys.readouterr().err == ""


def test_a_committed_env_file_cannot_redirect_a_review(
    repo: GitRepo,
    scripted_provider: ScriptedProvider,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The documented `pr-review review --repo . ...` inside a hostile checkout.

    The committed `.env` names another model and another host; the review still goes to the
    operator's provider with the operator's settings, and the CLI says why in one line.
    """
    with ScriptedProvider() as attacker:
        hostile = HOSTILE_ENV.replace(ATTACKER, attacker.base_url)
        base = repo.commit_files({"a.py": "x = 1\n"})
        head = repo.commit_files({"a.py": "x = 2\n", ".env": hostile})
        monkeypatch.chdir(repo.path)
        monkeypatch.setenv("OPENCODE_API_KEY", PROVIDER_KEY)
        monkeypatch.setenv("OPENCODE_BASE_URL", scripted_provider.base_url)
        scripted_provider.script(final_turn(summary="ok"))
        result = CliRunner().invoke(
            cli.main,
            ["review", "--repo", ".", "--base", base, "--head", head, "--format", "json"],
        )
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["model"] == "deepseek-v4-flash"
        assert attacker.requests == []
    [request] = scripted_provider.requests
    assert request.json["model"] == "deepseek-v4-flash"
    assert result.stderr.count(WARNING) == 1


@pytest.mark.e2e  # two real `pr-review` processes
def test_the_tracked_env_line_says_what_to_do_and_doing_it_works(repo: GitRepo) -> None:
    """specification §2: one line on stderr that tells the operator how to have their `.env`
    read; following it (ignore it, untrack it, commit), the next run reads it."""
    repo.commit_files({".env": "REVIEW_SUGGESTIONS=true\n"})
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("REVIEW_", "PR_"))}

    def schema() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pr_review_api.cli", "schema", "review"],
            cwd=repo.path,
            env=environment,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )

    refused = schema()
    assert refused.stderr.count("\n") == 1
    assert refused.stderr.startswith(WARNING)
    assert "set these variables in the environment instead" in refused.stderr
    assert "`git rm --cached .env` and commit" in refused.stderr
    assert '"suggestion"' not in refused.stdout
    repo.write({".gitignore": ".env\n"})
    git(repo.path, "rm", "-q", "--cached", ".env")
    git(repo.path, "add", ".gitignore")
    git(repo.path, "commit", "-q", "-m", "untrack .env")
    read = schema()
    assert read.stderr == ""
    assert '"suggestion"' in read.stdout


# --- REVIEW_PROFILE ----------------------------------------------------------------------------


def test_the_default_profile_keeps_the_seeds_protocol_exactly() -> None:
    settings = load_settings()
    assert settings.review_profile == "default"
    for name in LOCAL_PROFILE:
        assert getattr(settings, name) == Settings.model_fields[name].default, name


def test_the_local_profile_sets_tolerant_json_one_repair_the_diff_and_a_longer_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("REVIEW_PROFILE", "local")
    settings = load_settings()
    assert settings.review_tolerant_final_json is True
    assert settings.review_repair_attempts == 1
    assert settings.review_inline_diff_bytes == 16 * 1024
    assert settings.review_timeout_seconds == 1800
    # Nothing else moves: the protocol's limits stay the seed's.
    assert settings.review_max_rounds == Settings.model_fields["review_max_rounds"].default


def test_a_variable_of_its_own_wins_over_the_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REVIEW_PROFILE", "local")
    monkeypatch.setenv("REVIEW_REPAIR_ATTEMPTS", "0")
    monkeypatch.setenv("REVIEW_TOLERANT_FINAL_JSON", "false")
    settings = load_settings(review_timeout_seconds=60)
    assert settings.review_repair_attempts == 0
    assert settings.review_tolerant_final_json is False
    assert settings.review_timeout_seconds == 60
    assert settings.review_inline_diff_bytes == 16 * 1024


def test_an_unknown_profile_is_a_configuration_error_that_names_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("REVIEW_PROFILE", "fast")
    with pytest.raises(ConfigurationError, match=r"^REVIEW_PROFILE is not valid: .*'local'"):
        load_settings()


# --- Gitea and Forgejo (specification §19) --------------------------------------------------------


def test_gitea_is_off_until_its_server_is_set() -> None:
    settings = Settings()
    assert settings.gitea_server_url is None
    assert settings.gitea_api_base is None
    assert settings.gitea_token is None
    assert settings.pr_review_gitea_webhook_secret is None


def test_gitea_api_url_defaults_under_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITEA_SERVER_URL", "http://127.0.0.1:3000/git/")
    settings = Settings()
    assert settings.gitea_server_url == "http://127.0.0.1:3000/git"
    assert settings.gitea_api_base == "http://127.0.0.1:3000/git/api/v1"
    monkeypatch.setenv("GITEA_API_URL", "https://api.example.test/v1/")
    assert Settings().gitea_api_base == "https://api.example.test/v1"


def test_blank_gitea_settings_are_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GITEA_SERVER_URL", "GITEA_API_URL", "GITEA_TOKEN"):
        monkeypatch.setenv(name, "  ")
    monkeypatch.setenv("PR_REVIEW_GITEA_WEBHOOK_SECRET", "")
    settings = Settings()
    assert (settings.gitea_server_url, settings.gitea_api_base, settings.gitea_token) == (
        None,
        None,
        None,
    )
    assert settings.pr_review_gitea_webhook_secret is None


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("GITEA_SERVER_URL", "ftp://gitea.example.test"),
        ("GITEA_SERVER_URL", "https://user:hunter2-secret@gitea.example.test"),
        ("GITEA_SERVER_URL", "https://gitea.example.test/?a=1"),
        ("GITEA_API_URL", "gitea.example.test/api/v1"),
    ],
)
def test_a_bad_gitea_url_is_a_configuration_error_naming_it(
    name: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITEA_SERVER_URL", "https://gitea.example.test")
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigurationError) as caught:
        load_settings()
    assert caught.value.message.startswith(f"{name} is not valid")
    assert "hunter2" not in caught.value.message


def test_gitea_api_url_without_its_server_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GITEA_API_URL", "https://gitea.example.test/api/v1")
    with pytest.raises(ConfigurationError, match="GITEA_API_URL is set but GITEA_SERVER_URL"):
        load_settings()


def test_gitea_secrets_are_never_echoed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITEA_SERVER_URL", "https://gitea.example.test")
    monkeypatch.setenv("GITEA_TOKEN", "gitea-token-value")
    monkeypatch.setenv("PR_REVIEW_GITEA_WEBHOOK_SECRET", "gitea-hook-secret")
    settings = Settings()
    assert "gitea-token-value" not in repr(settings)
    assert "gitea-hook-secret" not in repr(settings)
    assert settings.gitea_token is not None
    assert settings.gitea_token.get_secret_value() == "gitea-token-value"


# --- the worker host's id (jobs/affinity.py) --------------------------------------------------


def test_the_worker_host_is_the_host_name_unless_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PR_REVIEW_WORKER_HOST", raising=False)
    assert Settings().pr_review_worker_host == (socket.gethostname() or "localhost")
    monkeypatch.setenv("PR_REVIEW_WORKER_HOST", "  ")
    assert Settings().pr_review_worker_host == (socket.gethostname() or "localhost")
    monkeypatch.setenv("PR_REVIEW_WORKER_HOST", "worker-2.internal")
    assert Settings().pr_review_worker_host == "worker-2.internal"


@pytest.mark.parametrize("value", ["a b", "-lead", "x/y", "h" * 201, "w\u00e9"])
def test_a_bad_worker_host_is_a_configuration_error_that_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("PR_REVIEW_WORKER_HOST", value)
    with pytest.raises(ConfigurationError, match=r"^PR_REVIEW_WORKER_HOST is not valid"):
        load_settings()
