"""GitHub App credentials: an App JWT exchanged for installation tokens (specification §11).

With `GITHUB_APP_ID` and `GITHUB_APP_PRIVATE_KEY_FILE`, each review job uses the token of the
installation its delivery came from:

    JWT (RS256, iss = app id, iat 60 s in the past for clock drift, exp 9 minutes later)
      -> POST {GITHUB_API_URL}/app/installations/{id}/access_tokens
      -> {"token": ..., "expires_at": ...}   cached per installation until 5 minutes before

Tokens and the key live only in this process's memory: they are never logged, never put in
an error message and never written to the database.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import httpx
import jwt
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from pydantic import SecretStr

from pr_review_api.errors import ConfigurationError, GitHubUnavailable
from pr_review_api.settings import Settings

JWT_BACKDATE_SECONDS = 60
JWT_LIFETIME_SECONDS = 9 * 60  # GitHub accepts at most 10 minutes
REFRESH_MARGIN_SECONDS = 5 * 60
MAX_KEY_FILE_BYTES = 64 * 1024
MAX_RESPONSE_BYTES = 64 * 1024
REQUEST_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class _CachedToken:
    token: SecretStr
    refresh_at: float  # monotonic seconds


def load_private_key(path: Path) -> RSAPrivateKey:
    """The App's RSA key from its PEM file, or a configuration error naming the variable."""
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_KEY_FILE_BYTES + 1)
    except OSError:
        raise ConfigurationError("GITHUB_APP_PRIVATE_KEY_FILE cannot be read.") from None
    if len(data) > MAX_KEY_FILE_BYTES:
        raise ConfigurationError("GITHUB_APP_PRIVATE_KEY_FILE is not a PEM private key.")
    try:
        key = load_pem_private_key(data, password=None)
    except (ValueError, TypeError):
        raise ConfigurationError("GITHUB_APP_PRIVATE_KEY_FILE is not a PEM private key.") from None
    if not isinstance(key, RSAPrivateKey):
        raise ConfigurationError("GITHUB_APP_PRIVATE_KEY_FILE is not an RSA private key.")
    return key


class AppCredentials:
    """Installation tokens of one GitHub App, cached per installation, for the whole process;
    `github.credentials.credentials_for` binds one installation of it to a client."""

    def __init__(
        self,
        app_id: int,
        private_key: RSAPrivateKey,
        api_url: str,
        *,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.app_id = app_id
        self._key = private_key
        self._api_url = api_url.rstrip("/")
        self._client = client
        self._cache: dict[int, _CachedToken] = {}
        self._locks: dict[int, asyncio.Lock] = {}
        self.exchanges = 0  # token requests made: tests assert the cache works
        self._login: str | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> AppCredentials | None:
        """The App's credentials when both settings are given; None when neither is."""
        app_id, key_file = settings.github_app_id, settings.github_app_private_key_file
        if app_id is None and key_file is None:
            return None
        if app_id is None or key_file is None:
            missing = "GITHUB_APP_ID" if app_id is None else "GITHUB_APP_PRIVATE_KEY_FILE"
            raise ConfigurationError(f"{missing} is not set: a GitHub App needs both settings.")
        return cls(app_id, load_private_key(key_file), settings.github_api_url)

    def app_jwt(self, now: float | None = None) -> str:
        """A fresh App JWT (RS256), valid for at most ten minutes."""
        issued = int(now if now is not None else time.time()) - JWT_BACKDATE_SECONDS
        claims = {"iat": issued, "exp": issued + JWT_LIFETIME_SECONDS, "iss": str(self.app_id)}
        return jwt.encode(claims, self._key, algorithm="RS256")

    async def token(self, installation_id: int | None) -> SecretStr | None:
        """The installation's token (cached until shortly before it expires); None without
        an installation (the caller falls back to GITHUB_TOKEN)."""
        if installation_id is None:
            return None
        lock = self._locks.setdefault(installation_id, asyncio.Lock())
        async with lock:
            cached = self._cache.get(installation_id)
            if cached is not None and time.monotonic() < cached.refresh_at:
                return cached.token
            fresh = await self._exchange(installation_id)
            self._cache[installation_id] = fresh
            return fresh.token

    async def app_login(self) -> str | None:
        """`<slug>[bot]`, the App's publishing identity (specification §10), from `GET /app`."""
        if self._login is None:
            response = await self._request("GET", f"{self._api_url}/app")
            if response.status_code != 200 or len(response.content) > MAX_RESPONSE_BYTES:
                raise GitHubUnavailable("GitHub did not describe the App.")
            try:
                slug = response.json()["slug"]
            except (ValueError, KeyError, TypeError):
                raise GitHubUnavailable("GitHub did not describe the App.") from None
            if not isinstance(slug, str) or not slug:
                raise GitHubUnavailable("GitHub did not describe the App.")
            self._login = f"{slug}[bot]"
        return self._login

    async def _request(self, method: str, url: str) -> httpx.Response:
        headers = {
            "Accept": "application/vnd.github+json",
            "Authorization": f"Bearer {self.app_jwt()}",
            "X-GitHub-Api-Version": "2022-11-28",
            "User-Agent": "pr-review",
        }
        try:
            if self._client is not None:
                return await self._client.request(method, url, headers=headers)
            async with httpx.AsyncClient(
                trust_env=False, follow_redirects=False, timeout=REQUEST_TIMEOUT_SECONDS
            ) as client:
                return await client.request(method, url, headers=headers)
        except httpx.HTTPError:
            raise GitHubUnavailable("GitHub could not be reached for an App token.") from None

    async def _exchange(self, installation_id: int) -> _CachedToken:
        url = f"{self._api_url}/app/installations/{installation_id}/access_tokens"
        self.exchanges += 1
        response = await self._request("POST", url)
        if response.status_code != 201 or len(response.content) > MAX_RESPONSE_BYTES:
            raise GitHubUnavailable("GitHub refused to issue an App installation token.")
        return _parse_token(response.content)


def _parse_token(body: bytes) -> _CachedToken:
    try:
        document = httpx.Response(200, content=body).json()
        token = document["token"]
        expires_at = datetime.fromisoformat(str(document["expires_at"]).replace("Z", "+00:00"))
    except (ValueError, KeyError, TypeError):
        raise GitHubUnavailable("GitHub answered an App token request unexpectedly.") from None
    if not isinstance(token, str) or not token:
        raise GitHubUnavailable("GitHub answered an App token request unexpectedly.")
    lifetime = expires_at.timestamp() - time.time()
    refresh_at = time.monotonic() + max(0.0, lifetime - REFRESH_MARGIN_SECONDS)
    return _CachedToken(SecretStr(token), refresh_at)
