"""Signing in to `/ui` (specification §18): the signed session, where a browser is
sent, and the same-origin check of every `/ui` form. The routes are tested through the real
application (its job routes need PostgreSQL); a real browser is in test_ui_browser.py."""

from __future__ import annotations

import asyncio
import time
from http.cookies import SimpleCookie

import httpx
import pytest
from pydantic import SecretStr
from starlette.requests import Request

from pr_review_api.service.ui_session import (
    SESSION_COOKIE,
    UI_SESSION_SECONDS,
    new_session,
    next_page,
    same_origin,
    session_secret,
    valid_session,
)
from tests.jobs.conftest import database_url, embedded_postgres
from tests.jobs.test_jobs import service, settings_for
from tests.service.support import SERVICE_KEY

__all__ = ["database_url", "embedded_postgres"]  # the job suite's fixtures, used here too

KEYS = (SERVICE_KEY.encode(), b"another-key")
SELF = "http://service"  # the in-process client's origin (tests.jobs.test_jobs.service)


def _request(headers: dict[str, str], root_path: str = "") -> Request:
    raw = [(name.lower().encode(), value.encode()) for name, value in headers.items()]
    return Request(
        {"type": "http", "method": "POST", "path": "/", "headers": raw, "root_path": root_path}
    )


# --- the signed session ------------------------------------------------------------------------


def test_a_session_is_valid_until_it_expires_and_never_holds_the_key() -> None:
    secret = session_secret(KEYS)
    now = time.time()
    value = new_session(secret, now)
    assert SERVICE_KEY not in value
    assert valid_session(value, secret, now)
    assert valid_session(value, secret, now + UI_SESSION_SECONDS - 5)
    assert not valid_session(value, secret, now + UI_SESSION_SECONDS + 5)
    assert new_session(secret, now) != value  # each sign-in its own


def test_changing_the_keys_ends_every_session_and_their_order_does_not() -> None:
    value = new_session(session_secret(KEYS), time.time())
    assert valid_session(value, session_secret(tuple(reversed(KEYS))), time.time())
    for keys in ((KEYS[0],), (*KEYS, b"third"), (b"rotated", KEYS[1])):
        assert not valid_session(value, session_secret(keys), time.time())
    # Length-prefixed: two keys are not the same secret as their concatenation.
    assert session_secret((b"ab", b"c")) != session_secret((b"a", b"bc"))


def test_a_forged_or_altered_session_is_refused() -> None:
    secret = session_secret(KEYS)
    value = new_session(secret, time.time())
    expiry, nonce, signature = value.split(".")
    later = str(int(expiry) + 10**6)
    for forged in (
        f"{later}.{nonce}.{signature}",  # a longer life
        f"{expiry}.{nonce}x.{signature}",
        f"{expiry}.{nonce}.{signature[:-1]}{'1' if signature.endswith('0') else '0'}",
        f"{expiry}.{nonce}",
        SERVICE_KEY,
        "",
        "...",
        f"-1.{nonce}.{signature}",
        value + "." + "a" * 300,
        "١٢٣." + nonce + "." + signature,  # digits, but not ASCII ones
    ):
        assert not valid_session(forged, secret, time.time()), forged


@pytest.mark.parametrize(
    ("then", "opened"),
    [
        ("/ui", "/ui"),
        ("/ui/jobs/abc", "/ui/jobs/abc"),
        ("/ui?status=failed", "/ui?status=failed"),
        (None, "/ui"),
        ("", "/ui"),
        ("https://evil.example/ui", "/ui"),
        ("//evil.example/ui", "/ui"),
        ("/\\evil.example", "/ui"),
        ("/uix", "/ui"),
        ("/v1/review-jobs", "/ui"),
        ("javascript:alert(1)", "/ui"),
        ("/ui/\nSet-Cookie: x", "/ui"),
    ],
)
def test_after_signing_in_only_our_own_pages_are_opened(then: str | None, opened: str) -> None:
    assert next_page(_request({}), then) == opened


def test_the_pages_under_a_root_path() -> None:
    assert next_page(_request({}, root_path="/review"), "/review/ui/jobs/1") == "/review/ui/jobs/1"
    assert next_page(_request({}, root_path="/review"), "/ui/jobs/1") == "/review/ui"


@pytest.mark.parametrize(
    ("headers", "ours"),
    [
        ({"Host": "127.0.0.1:8000", "Origin": "http://127.0.0.1:8000"}, True),
        ({"Host": "review.example.com", "Origin": "https://review.example.com"}, True),
        # A proxy that does not pass the Host on: the listed name is ours.
        ({"Host": "127.0.0.1:8000", "Origin": "https://review.example.com"}, True),
        ({"Host": "127.0.0.1:8000", "Origin": "http://evil.example"}, False),
        ({"Host": "127.0.0.1:8000", "Origin": "http://127.0.0.1:9999"}, False),
        ({"Host": "127.0.0.1:8000", "Origin": "null"}, False),
        ({"Host": "127.0.0.1:8000", "Origin": "null", "Sec-Fetch-Site": "same-origin"}, True),
        ({"Host": "127.0.0.1:8000", "Sec-Fetch-Site": "same-origin"}, True),
        ({"Host": "127.0.0.1:8000", "Sec-Fetch-Site": "cross-site"}, False),
        ({"Host": "127.0.0.1:8000"}, False),
        ({"Host": "127.0.0.1:8000", "Origin": "file://"}, False),
        ({"Host": "127.0.0.1:8000", "Origin": "http://[::1"}, False),
    ],
)
def test_which_forms_come_from_our_own_pages(headers: dict[str, str], ours: bool) -> None:
    assert same_origin(_request(headers), ("review.example.com",)) is ours


# --- through the application -------------------------------------------------------------------


def _cookie(answer: httpx.Response) -> SimpleCookie:
    jar: SimpleCookie = SimpleCookie()
    jar.load(answer.headers["set-cookie"])
    return jar


@pytest.mark.e2e  # a real PostgreSQL: the default run's, not --fast
def test_signing_in_sets_a_session_cookie_that_opens_the_pages(database_url: str) -> None:
    settings = settings_for(database_url, pr_review_api_keys=[SecretStr(SERVICE_KEY)])
    ours = {"Origin": SELF}

    async def scenario() -> None:
        async with service(settings) as client:
            page = await client.get("/ui/jobs/1", headers={"Accept": "text/html"})
            assert page.status_code == 303
            assert page.headers["location"] == "/ui/sign-in?next=%2Fui%2Fjobs%2F1"
            form = await client.get("/ui/sign-in?next=/ui")
            assert 'type="password" name="key"' in form.text
            wrong = await client.post("/ui/sign-in", data={"key": "nope"}, headers=ours)
            assert wrong.status_code == 401
            assert "set-cookie" not in wrong.headers
            signed_in = await client.post(
                "/ui/sign-in", data={"key": SERVICE_KEY, "next": "/ui?status=failed"}, headers=ours
            )
            assert signed_in.status_code == 303
            assert signed_in.headers["location"] == "/ui?status=failed"
            morsel = _cookie(signed_in)[SESSION_COOKIE]
            assert morsel["httponly"]
            assert morsel["samesite"] == "strict"
            assert not morsel["secure"]  # plain HTTP
            assert morsel["path"] == "/ui"
            assert int(morsel["max-age"]) == UI_SESSION_SECONDS
            assert SERVICE_KEY not in morsel.value
            client.cookies.clear()
            cookie = {"Cookie": f"{SESSION_COOKIE}={morsel.value}"}
            assert (await client.get("/ui", headers=cookie)).status_code == 200
            # The cookie opens the pages, not the API: /v1 still wants the header.
            assert (await client.get("/v1/review-jobs", headers=cookie)).status_code == 401
            out = await client.post("/ui/sign-out", headers={**cookie, **ours})
            assert out.status_code == 303
            assert _cookie(out)[SESSION_COOKIE]["max-age"] == "0"  # deleted
            # Over TLS (a proxy in front ends it: the browser's Origin says so) it is Secure.
            tls = await client.post(
                "/ui/sign-in", data={"key": SERVICE_KEY}, headers={"Origin": "https://service"}
            )
            assert tls.status_code == 303
            assert _cookie(tls)[SESSION_COOKIE]["secure"]
        listed = settings_for(
            database_url,
            pr_review_api_keys=[SecretStr(SERVICE_KEY)],
            pr_review_allowed_hosts=("review.example.com",),
        )
        async with service(listed) as client:
            # A proxy that does not pass the Host on: the listed name is ours.
            proxied = await client.post(
                "/ui/sign-in",
                data={"key": SERVICE_KEY},
                headers={"Origin": "https://review.example.com"},
            )
            assert proxied.status_code == 303

    asyncio.run(scenario())


@pytest.mark.e2e  # a real PostgreSQL: the default run's, not --fast
def test_a_form_from_another_site_is_refused_with_or_without_keys(database_url: str) -> None:
    keyed = settings_for(database_url, pr_review_api_keys=[SecretStr(SERVICE_KEY)])

    async def scenario() -> None:
        for settings in (keyed, settings_for(database_url)):
            async with service(settings) as client:
                for headers in ({"Origin": "http://evil.example"}, {"Origin": "null"}, {}):
                    for path in ("/ui/sign-in", "/ui/sign-out"):
                        refused = await client.post(
                            path, data={"key": SERVICE_KEY}, headers=headers
                        )
                        assert refused.status_code == 403, (path, headers)
                        assert refused.json()["error"]["code"] == "invalid_request"
                        assert "set-cookie" not in refused.headers
        async with service(keyed) as client:
            # A script with the key is not a browser: no Origin needed.
            bearer = {"Authorization": f"Bearer {SERVICE_KEY}"}
            assert (await client.post("/ui/sign-out", headers=bearer)).status_code == 303
            # An API client without a session gets the contract's 401, not a redirect.
            refused = await client.get("/ui")
            assert refused.status_code == 401
            assert "Authorization: Bearer <key>" in refused.json()["error"]["message"]

    asyncio.run(scenario())
