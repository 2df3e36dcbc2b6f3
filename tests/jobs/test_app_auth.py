"""GitHub App credentials: an RS256 JWT exchanged for cached installation tokens
(specification §11).

A loopback server plays GitHub's `POST /app/installations/{id}/access_tokens` and `GET /app`,
checking each JWT with the App's public key.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from pr_review_api.errors import ConfigurationError, GitHubUnavailable
from pr_review_api.github.app_auth import AppCredentials
from pr_review_api.github.credentials import (
    Credentials,
    InstallationCredentials,
    credentials_for,
)
from pr_review_api.jobs.records import JobRecord
from pr_review_api.settings import Settings
from tests.fakes.github_app import write_key

APP_ID = 4242


class FakeAppApi:
    """`/app/installations/{id}/access_tokens` and `/app` on 127.0.0.1."""

    def __init__(self, public_key: Any) -> None:
        self.public_key = public_key
        self.claims: list[dict[str, Any]] = []
        self.lifetime = timedelta(hours=1)
        self.status = 201
        self.issued = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _claims(self) -> dict[str, Any] | None:
                header = self.headers.get("Authorization", "")
                try:
                    claims: dict[str, Any] = jwt.decode(
                        header.removeprefix("Bearer "),
                        fake.public_key,
                        algorithms=["RS256"],
                        options={"verify_iat": False},
                    )
                except jwt.PyJWTError:
                    return None
                fake.claims.append(claims)
                return claims

            def _send(self, status: int, document: dict[str, Any]) -> None:
                body = json.dumps(document).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                if self._claims() is None:
                    self._send(401, {"message": "Bad credentials"})
                    return
                installation = self.path.split("/")[-2]
                fake.issued += 1
                expires = datetime.now(UTC) + fake.lifetime
                self._send(
                    fake.status,
                    {
                        "token": f"ghs_installation-{installation}-{fake.issued}",
                        "expires_at": expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    },
                )

            def do_GET(self) -> None:
                if self._claims() is None:
                    self._send(401, {"message": "Bad credentials"})
                    return
                self._send(200, {"id": APP_ID, "slug": "pr-review-test"})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/api/v3"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def app_api(rsa_key: rsa.RSAPrivateKey) -> Iterator[FakeAppApi]:
    api = FakeAppApi(rsa_key.public_key())
    try:
        yield api
    finally:
        api.close()


def key_file(tmp_path: Path, key: Any) -> Path:
    return write_key(tmp_path / "app.pem", key)


def credentials(tmp_path: Path, key: Any, api_url: str) -> AppCredentials:
    settings = Settings(
        github_app_id=APP_ID,
        github_app_private_key_file=key_file(tmp_path, key),
        github_api_url=api_url,
    )
    found = AppCredentials.from_settings(settings)
    assert found is not None
    return found


def test_app_jwt_is_rs256_issued_60_seconds_ago_and_short_lived(
    tmp_path: Path, rsa_key: rsa.RSAPrivateKey
) -> None:
    app = credentials(tmp_path, rsa_key, "http://127.0.0.1:9/api/v3")
    now = time.time()
    token = app.app_jwt(now)
    assert jwt.get_unverified_header(token)["alg"] == "RS256"
    claims = jwt.decode(
        token, rsa_key.public_key(), algorithms=["RS256"], options={"verify_exp": False}
    )
    assert claims["iss"] == str(APP_ID)
    assert claims["iat"] == int(now) - 60
    assert 0 < claims["exp"] - claims["iat"] <= 600


def test_installation_tokens_are_cached_per_installation_until_shortly_before_expiry(
    tmp_path: Path, rsa_key: rsa.RSAPrivateKey, app_api: FakeAppApi
) -> None:
    app = credentials(tmp_path, rsa_key, app_api.url)
    assert isinstance(InstallationCredentials(app, 1), Credentials)

    async def scenario() -> list[str]:
        tokens = [
            await app.token(1),
            await app.token(1),
            await app.token(2),
            await app.token(None),
        ]
        return [t.get_secret_value() if t is not None else "none" for t in tokens]

    assert asyncio.run(scenario()) == [
        "ghs_installation-1-1",
        "ghs_installation-1-1",
        "ghs_installation-2-2",
        "none",
    ]
    assert app.exchanges == 2
    assert all(claims["iss"] == str(APP_ID) for claims in app_api.claims)
    # A token that expires within the refresh margin is not reused.
    app_api.lifetime = timedelta(minutes=2)

    async def near_expiry() -> list[str]:
        first = await app.token(3)
        second = await app.token(3)
        assert first is not None
        assert second is not None
        return [first.get_secret_value(), second.get_secret_value()]

    first, second = asyncio.run(near_expiry())
    assert first != second
    assert "ghs_" not in repr(app.__dict__.get("_cache"))


def test_app_login_is_the_slug_bot(
    tmp_path: Path, rsa_key: rsa.RSAPrivateKey, app_api: FakeAppApi
) -> None:
    app = credentials(tmp_path, rsa_key, app_api.url)
    assert asyncio.run(app.app_login()) == "pr-review-test[bot]"


def test_refused_token_exchange_is_github_unavailable_without_the_token(
    tmp_path: Path, rsa_key: rsa.RSAPrivateKey, app_api: FakeAppApi
) -> None:
    app_api.status = 403
    app = credentials(tmp_path, rsa_key, app_api.url)
    with pytest.raises(GitHubUnavailable) as raised:
        asyncio.run(app.token(1))
    assert "ghs_" not in raised.value.message


def test_app_settings_must_come_together_and_name_a_readable_rsa_key(
    tmp_path: Path, rsa_key: rsa.RSAPrivateKey
) -> None:
    assert AppCredentials.from_settings(Settings()) is None
    with pytest.raises(ConfigurationError, match="GITHUB_APP_PRIVATE_KEY_FILE"):
        AppCredentials.from_settings(Settings(github_app_id=APP_ID))
    with pytest.raises(ConfigurationError, match="GITHUB_APP_ID"):
        AppCredentials.from_settings(Settings(github_app_private_key_file=tmp_path / "k.pem"))
    with pytest.raises(ConfigurationError, match="cannot be read"):
        AppCredentials.from_settings(
            Settings(github_app_id=APP_ID, github_app_private_key_file=tmp_path / "none.pem")
        )
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n")
    with pytest.raises(ConfigurationError, match="not a PEM private key") as raised:
        AppCredentials.from_settings(
            Settings(github_app_id=APP_ID, github_app_private_key_file=garbage)
        )
    assert "not a key" not in raised.value.message
    ec_key = key_file(tmp_path, ec.generate_private_key(ec.SECP256R1()))
    with pytest.raises(ConfigurationError, match="not an RSA private key"):
        AppCredentials.from_settings(
            Settings(github_app_id=APP_ID, github_app_private_key_file=ec_key)
        )


def test_each_job_uses_its_installations_token_and_never_stores_it(
    tmp_path: Path, rsa_key: rsa.RSAPrivateKey, app_api: FakeAppApi, database_url: str
) -> None:
    from tests.jobs.test_jobs import pull, review_document, rows, settings_for, wait_for, worker

    settings = settings_for(
        database_url,
        github_app_id=APP_ID,
        github_app_private_key_file=key_file(tmp_path, rsa_key),
        github_api_url=app_api.url,
    )
    seen: dict[str, str | None] = {}
    apps: list[AppCredentials | None] = []

    async def runner(record: JobRecord, job_settings: Settings) -> dict[str, Any]:
        # As the default runner's clients (forge/clients.py) are bound to the job's identity.
        url = record.pull_request_url
        installation_id = record.installation_id
        token = await credentials_for(job_settings, installation_id, app=apps[0]).token()
        seen[url] = None if token is None else token.get_secret_value()
        return review_document(url)

    async def scenario() -> None:
        async with worker(settings, runner) as queue:
            apps.append(queue.identities.app)
            jobs = [
                await queue.enqueue(pull(1, installation_id=11), source="webhook"),
                await queue.enqueue(pull(2, installation_id=22), source="webhook"),
            ]

            async def done() -> bool:
                records = [await queue.get(job.job_id) for job in jobs]
                return all(r is not None and r.status == "succeeded" for r in records)

            await wait_for(done, what="both jobs")

    asyncio.run(scenario())
    tokens = {url.rsplit("/", 1)[1]: token or "" for url, token in seen.items()}
    assert tokens["1"].startswith("ghs_installation-11-")
    assert tokens["2"].startswith("ghs_installation-22-")
    dump = json.dumps(rows(database_url, "SELECT row_to_json(r)::text FROM review_jobs r"))
    assert "ghs_" not in dump
