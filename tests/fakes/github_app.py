"""The fake GitHub's App endpoints, as GitHub checks them (`FakeGitHub.install_app`).

- `GET /app` and `POST /app/installations/{id}/access_tokens` take only the App's JWT: RS256,
  signed by the App's key, `iss` the App's id, `iat` in the past, `exp` in the future and at
  most ten minutes after `iat` (GitHub refuses a longer one); anything else is 401.
- An unknown installation is 404; a known one gets a fresh `ghs_` token, an hour long.
- An installation token speaks as `<slug>[bot]`, on its own account's repositories only
  (another account's are 404, as a repository the App cannot see); `GET /user` refuses it
  (403) as GitHub does. A JWT is refused (401) everywhere but `/app`.

Every JWT's claims and every exchange are recorded, so a test counts them.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey

if TYPE_CHECKING:
    from pathlib import Path

    from tests.fakes.forge_server import RecordedRequest
    from tests.fakes.github_server import FakeGitHub, _Handler

MAX_JWT_SECONDS = 600  # GitHub: `exp` at most ten minutes after `iat`


def write_key(path: Path, key: Any) -> Path:
    """`key` as the PEM file `GITHUB_APP_PRIVATE_KEY_FILE` names (PKCS#8, unencrypted)."""
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return path


def app_key(folder: Path) -> tuple[rsa.RSAPrivateKey, Path]:
    """A new App key (RSA 2048) and its PEM file in `folder`."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key, write_key(folder / "app.pem", key)


@dataclass
class FakeApp:
    """One GitHub App: its id, slug, public key and installations (id -> account login)."""

    app_id: int
    slug: str
    public_key: RSAPublicKey
    installations: dict[int, str]
    tokens: dict[str, int] = field(default_factory=dict)  # minted token -> installation
    claims: list[dict[str, Any]] = field(default_factory=list)  # every accepted JWT's
    exchanges: list[int] = field(default_factory=list)  # installation of each token issued

    @property
    def login(self) -> str:
        return f"{self.slug}[bot]"

    def verified(self, bearer: str | None) -> dict[str, Any] | None:
        """The claims of a valid App JWT, else None."""
        if bearer is None or bearer.count(".") != 2:
            return None
        try:
            claims: dict[str, Any] = jwt.decode(
                bearer,
                self.public_key,
                algorithms=["RS256"],
                options={"require": ["iat", "exp", "iss"]},
            )
        except jwt.PyJWTError:
            return None
        if str(claims["iss"]) != str(self.app_id) or claims["iat"] > time.time():
            return None
        if claims["exp"] - claims["iat"] > MAX_JWT_SECONDS:
            return None
        self.claims.append(claims)
        return claims

    def is_jwt(self, bearer: str | None) -> bool:
        return bearer is not None and bearer.count(".") == 2

    def account_of(self, token: str | None) -> str | None:
        """The account a minted installation token may read, else None."""
        installation = self.tokens.get(token or "")
        return None if installation is None else self.installations[installation]


def app_endpoint(fake: FakeGitHub, handler: _Handler, record: RecordedRequest, path: str) -> bool:
    """The App's own endpoints and the App's rules for every other; False to route on."""
    app = fake.app
    if app is None:
        return False
    bearer = handler._bearer(record)
    pieces = path.split("/")
    if path == "/app" or path.startswith("/app/"):
        if app.verified(bearer) is None:
            handler.send_json(record, 401, {"message": "A JSON web token could not be decoded"})
        elif path == "/app" and handler.command == "GET":
            handler.send_json(record, 200, {"id": app.app_id, "slug": app.slug, "name": app.slug})
        elif (
            handler.command == "POST"
            and len(pieces) == 5
            and pieces[2] == "installations"
            and pieces[4] == "access_tokens"
        ):
            _exchange(app, handler, record, pieces[3])
        else:
            handler.send_json(record, 404, {"message": "Not Found"})
        return True
    if app.is_jwt(bearer):  # GitHub: a JWT speaks only to /app endpoints
        handler.send_json(record, 401, {"message": "Bad credentials"})
        return True
    owner = pieces[2] if len(pieces) > 2 and pieces[1] == "repos" else None
    account = app.account_of(bearer)
    if owner is not None and account is not None and owner.lower() != account.lower():
        handler.send_json(record, 404, {"message": "Not Found"})
        return True
    return False


def _exchange(app: FakeApp, handler: _Handler, record: RecordedRequest, installation: str) -> None:
    number = int(installation) if installation.isdigit() else -1
    if number not in app.installations:
        handler.send_json(record, 404, {"message": "Not Found"})
        return
    token = "ghs_" + secrets.token_hex(18)
    app.tokens[token] = number
    app.exchanges.append(number)
    expires = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    document = {"token": token, "expires_at": expires, "repository_selection": "all"}
    handler.send_json(record, 201, document)
