"""compose.yaml (specification §18): PostgreSQL, `serve` and scalable workers, secrets from .env.

No container runtime can start containers where the suite runs, so this reads the file as
compose would: the services, their commands parsed by pr-review's own CLI, the variables
substituted from an env file, and checks that nothing secret is written in it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import click
import pytest
import yaml

from pr_review_api.cli import main
from pr_review_api.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "compose.yaml"
ENV_EXAMPLE = ROOT / ".env.example"
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|DATABASE_URL", re.IGNORECASE)
# compose's ${NAME}, ${NAME:-default} and ${NAME:?message}.
VARIABLE = re.compile(r"\$\{(?P<name>\w+)(?::(?P<op>[-?])(?P<arg>[^}]*))?\}")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return loaded


def substitute(value: str, env: dict[str, str]) -> str:
    """`value` with its variables replaced as compose does (a missing required one fails)."""

    def one(match: re.Match[str]) -> str:
        found = env.get(match["name"], "")
        if found:
            return found
        if match["op"] == "?":
            raise LookupError(match["arg"])
        return match["arg"] or ""

    return VARIABLE.sub(one, value)


def environment(service: dict[str, Any]) -> dict[str, str]:
    return {name: str(value) for name, value in service.get("environment", {}).items()}


def parse_cli(argv: list[str]) -> click.Context:
    """`pr-review argv` parsed by the real command (raises on an unknown command or option)."""
    [name, *rest] = argv
    # The group's context settings (`-h`) reach the command through its parent, as when the
    # program runs; without them click would cache a `--help`-only option on the command.
    parent = click.Context(main, **main.context_settings)
    command = main.get_command(parent, name)
    assert command is not None, f"pr-review has no command {name}"
    return command.make_context(name, rest, parent=parent)


def test_the_services_are_postgres_serve_and_worker(compose: dict[str, Any]) -> None:
    assert set(compose["services"]) == {"postgres", "serve", "worker"}
    assert "version" not in compose  # obsolete in the compose specification


def test_postgres_is_the_official_image_with_a_volume_a_health_check_and_no_port(
    compose: dict[str, Any],
) -> None:
    postgres = compose["services"]["postgres"]
    assert re.fullmatch(r"docker\.io/library/postgres:\d+", postgres["image"])
    volume, _, target = postgres["volumes"][0].partition(":")
    assert volume in compose["volumes"]
    assert target == "/var/lib/postgresql/data"
    assert "pg_isready" in " ".join(postgres["healthcheck"]["test"])
    assert "ports" not in postgres


def test_pr_review_services_build_the_containerfile_and_wait_for_a_healthy_database(
    compose: dict[str, Any],
) -> None:
    for name in ("serve", "worker"):
        service = compose["services"][name]
        assert service["build"] == {"context": ".", "dockerfile": "Containerfile"}
        assert (ROOT / service["build"]["dockerfile"]).is_file()
        assert service["depends_on"]["postgres"]["condition"] == "service_healthy"
        assert service["env_file"] == ".env"
        assert service["init"] is True


def test_the_commands_are_pr_reviews_own(compose: dict[str, Any]) -> None:
    serve = parse_cli(compose["services"]["serve"]["command"])
    assert serve.params["host"] == "0.0.0.0"
    published = compose["services"]["serve"]["ports"][0]
    assert published.endswith(f":{serve.params['port']}")
    worker = parse_cli(compose["services"]["worker"]["command"])
    assert worker.params["concurrency"] >= 1


def test_workers_scale_no_port_no_name_no_health_check(compose: dict[str, Any]) -> None:
    worker = compose["services"]["worker"]
    assert "ports" not in worker  # a second replica would collide on a published port
    assert "container_name" not in worker  # so would a fixed name
    assert worker["healthcheck"] == {
        "disable": True
    }  # the image's checks /healthz; workers serve none


def test_the_cache_is_one_volume_at_the_images_cache_folder(compose: dict[str, Any]) -> None:
    containerfile = (ROOT / "Containerfile").read_text()
    cache = re.search(r"PR_REVIEW_CACHE_DIR=(\S+)", containerfile)
    assert cache is not None
    for name in ("serve", "worker"):
        [mount] = compose["services"][name]["volumes"]
        volume, _, target = mount.partition(":")
        assert volume in compose["volumes"]
        assert target == cache[1]


def test_stopping_leaves_reviews_in_flight_their_whole_timeout(compose: dict[str, Any]) -> None:
    timeout = Settings.model_fields["review_timeout_seconds"].default
    for name in ("serve", "worker"):
        grace = compose["services"][name]["stop_grace_period"]
        assert int(grace.removesuffix("s")) > timeout


def test_no_secret_is_written_in_the_file(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        for variable, value in environment(service).items():
            if SECRET_NAME.search(variable):
                # Every secret is substituted from .env, and required (${NAME:?...}).
                used = list(VARIABLE.finditer(value))
                assert used, f"{name}: {variable} is written in compose.yaml"
                assert any(match["op"] == "?" for match in used), f"{name}: {variable}"


def test_the_database_url_names_the_postgres_service_user_and_database(
    compose: dict[str, Any],
) -> None:
    env = {"POSTGRES_PASSWORD": "0123abcd"}
    postgres = environment(compose["services"]["postgres"])
    for name in ("serve", "worker"):
        url = urlsplit(
            substitute(environment(compose["services"][name])["PR_REVIEW_DATABASE_URL"], env)
        )
        assert url.scheme == "postgresql"
        assert url.hostname == "postgres"
        assert url.username == postgres["POSTGRES_USER"]
        assert url.password == substitute(postgres["POSTGRES_PASSWORD"], env)
        assert url.path == f"/{postgres['POSTGRES_DB']}"


def test_a_missing_database_password_stops_compose(compose: dict[str, Any]) -> None:
    url = environment(compose["services"]["serve"])["PR_REVIEW_DATABASE_URL"]
    with pytest.raises(LookupError, match="POSTGRES_PASSWORD"):
        substitute(url, {})


def test_the_env_example_names_every_required_secret_with_no_value() -> None:
    lines = [line for line in ENV_EXAMPLE.read_text().splitlines() if line and line[0] != "#"]
    example = dict(line.split("=", 1) for line in lines)
    assert set(example) >= {"OPENCODE_API_KEY", "PR_REVIEW_API_KEYS", "POSTGRES_PASSWORD"}
    assert all(value == "" for value in example.values())
    assert ".env" in (ROOT / ".gitignore").read_text().splitlines()


# A line of .env.example that sets a variable, commented out or not.
EXAMPLE_LINE = re.compile(r"^(?:# )?(?P<name>[A-Z][A-Z0-9_]*)=(?P<value>.*)$")
# What compose itself reads, and the Gitea names the contract fixes for the coming release.
COMPOSE_ONLY = {"POSTGRES_PASSWORD", "PR_REVIEW_PUBLISH", "GITHUB_APP_KEY_PATH"}
GITEA = {"GITEA_SERVER_URL", "GITEA_API_URL", "GITEA_TOKEN", "PR_REVIEW_GITEA_WEBHOOK_SECRET"}


def example_settings() -> dict[str, str]:
    found = [EXAMPLE_LINE.match(line) for line in ENV_EXAMPLE.read_text().splitlines()]
    return {match["name"]: match["value"] for match in found if match}


def shown(default: object) -> str:
    """A setting's default as .env writes it."""
    if isinstance(default, bool):
        return str(default).lower()
    if isinstance(default, float) and default.is_integer():
        return str(int(default))
    return "" if default is None or default == () else str(default)


def test_the_env_example_lists_every_setting_a_deployment_uses() -> None:
    fields = {name.upper() for name in Settings.model_fields}
    assert set(example_settings()) == fields | COMPOSE_ONLY | GITEA


def test_the_env_example_shows_each_settings_own_default() -> None:
    example = example_settings()
    for name, field in Settings.model_fields.items():
        if field.default is not None and name.upper() in example:
            assert example[name.upper()] == shown(field.default), name.upper()


def test_the_app_override_mounts_the_key_file_where_the_setting_points() -> None:
    override = yaml.safe_load((ROOT / "compose.app.yaml").read_text())
    base = yaml.safe_load(COMPOSE.read_text())
    assert set(override["services"]) == {"serve", "worker"} <= set(base["services"])
    [(name, secret)] = override["secrets"].items()
    assert substitute(secret["file"], {}) == "./github-app.pem"  # a file, not a value
    for service in override["services"].values():
        [mount] = service["secrets"]
        assert mount["source"] == name
        path = environment(service)["GITHUB_APP_PRIVATE_KEY_FILE"]
        assert path == f"/run/secrets/{mount['target']}"
        # The merge keeps compose.yaml's database URL: an override's environment adds to it.
        assert set(environment(service)) == {"GITHUB_APP_PRIVATE_KEY_FILE"}
