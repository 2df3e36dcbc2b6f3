"""A token client of a forge whose token may reach only its own origins (GitLab, Gitea).

`OriginClient` adds to `ApiClient` what such forges share: the token sent in the forge's own
header and only to the origins the forge names (its API and its server); a request for any
other origin, or a URL with credentials in it, is refused before it is sent, and a redirect is
answered as a failure, never followed. `refusal` turns a non-2xx answer into a contract error
in fixed sentences, with the forge's own words (`RefusalWords`) where they differ. Every name,
sentence and value here is the forge's (its class variables); this module names no forge.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Generic, TypeVar, cast

import httpx
from pydantic import BaseModel, SecretStr, ValidationError

from pr_review_api.errors import PullRequestNotFound, ReviewError
from pr_review_api.http.api_client import (
    MAX_WAIT_HEADER_SECONDS,
    ApiClient,
    same_origin,
    try_again_when,
)
from pr_review_api.http.body import bounded_decimal
from pr_review_api.jsonutil import dumps_compact, loads_strict
from pr_review_api.settings import Settings

R = TypeVar("R", bound="ApiResponse")
U = TypeVar("U", bound=BaseModel)


class Unset:
    """The default of a client's `token=`: the token of the settings."""


UNSET: Final = Unset()


@dataclass(frozen=True)
class Endpoints:
    """A forge's token setting and the two origins it may reach: its API and its server."""

    token: SecretStr | None
    api_base: str
    server_url: str


@dataclass(frozen=True)
class RefusalWords:
    """The sentences of a refusal that are a forge's own (its variables, its objects)."""

    not_found: str
    token_needed: str
    token_refused: str
    forbidden: str


@dataclass(frozen=True)
class ApiResponse:
    """One answer: status, headers and the capped decoded body (a 3xx's is empty). A forge's
    subclass names the forge, its error and its refusal words."""

    forge: ClassVar[str]
    unavailable: ClassVar[type[ReviewError]]
    words: ClassVar[RefusalWords]

    status: int
    headers: httpx.Headers
    body: bytes

    def refusal(self, *, anonymous: bool, hidden: bool = False) -> ReviewError:
        """This non-2xx answer's contract error (`refusal`)."""
        return refusal(self, anonymous=anonymous, hidden=hidden)

    def json(self) -> Any:
        """The body as strict JSON; a body that is not JSON is the forge's error."""
        try:
            return loads_strict(self.body)
        except ValueError:
            raise self.unavailable(f"{self.forge} returned data that is not valid JSON.") from None


def refusal(  # noqa: PLR0911  (one return per kind of answer)
    response: ApiResponse, *, anonymous: bool, hidden: bool = False
) -> ReviewError:
    """The contract error of a non-2xx answer. `hidden`: this 403 means what a 404 does (the
    object is not visible to this token)."""
    status, forge, error, words = (
        response.status,
        response.forge,
        response.unavailable,
        response.words,
    )
    if status in (404, 410) or (status == 403 and hidden):
        return PullRequestNotFound(words.not_found)
    if status == 401:
        return error(words.token_needed if anonymous else words.token_refused)
    if status == 429:
        when = try_again_when(
            bounded_decimal(response.headers.get("retry-after", ""), MAX_WAIT_HEADER_SECONDS)
        )
        return error(f"{forge}'s API rate limit was reached; try again {when}.")
    if 300 <= status < 400:
        return error(f"{forge} redirected the request; it was not followed.")
    if status == 403:
        return error(words.forbidden)
    if status >= 500:
        return error(f"{forge} answered with a server error (status {status}).")
    return error(f"{forge} answered with an unexpected status ({status}).")


class OriginClient(ApiClient, Generic[R]):
    """A forge's token client confined to its origins (see the module docstring).

    The subclass names its token setting and its two origins (`_endpoints`), says how the
    token is sent (`_token_header`), which answers it makes (`response_type`, whose forge and
    error become the client's), how long one request may take and whether its 403 to a read
    hides the object (`forbidden_hides`).
    """

    response_type: ClassVar[type[ApiResponse]]
    error_body_bytes: ClassVar[int] = 64 * 1024  # a refusal's `message`, read for the caller
    forbidden_hides: ClassVar[bool]
    max_response_bytes: ClassVar[int]
    request_timeout_seconds: ClassVar[float]  # one request, its answer read

    def __init__(
        self,
        settings: Settings,
        *,
        token: SecretStr | Unset | None = UNSET,
        transport: httpx.AsyncBaseTransport | None = None,
        max_connections: int | None = None,
    ) -> None:
        """`token` defaults to the forge's token setting; `None` asks anonymously.
        `transport` is a test's."""
        where = self._endpoints(settings)
        super().__init__(settings, transport=transport, max_connections=max_connections)
        self._token = where.token if isinstance(token, Unset) else token
        self._api_base = where.api_base
        self._origins = (httpx.URL(where.api_base), httpx.URL(where.server_url))

    def _endpoints(self, settings: Settings) -> Endpoints:
        """The forge's token setting and origins, from `settings` (a configuration error
        when they are not set)."""
        raise NotImplementedError

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "response_type" in vars(cls):
            cls.forge, cls.unavailable = cls.response_type.forge, cls.response_type.unavailable

    @property
    def anonymous(self) -> bool:
        """Whether requests go without a token."""
        return self._token is None

    @property
    def token(self) -> SecretStr | None:
        """The client's token: git fetches the same change with the same identity."""
        return self._token

    def _on_origins(self, url: httpx.URL) -> bool:
        """Whether `url` is on one of the origins the token may reach."""
        return any(same_origin(url, origin) for origin in self._origins)

    def api_url(self, path: str) -> str:
        """The forge's API base + `path` (which starts with `/`)."""
        return self._api_base + path

    def _token_header(self, token: str) -> tuple[str, str]:
        """The header that carries the token: (name, value)."""
        raise NotImplementedError

    def _headers(self, has_body: bool) -> dict[str, str]:
        headers = self._plain_headers("application/json", has_body)
        if self._token is not None:
            name, value = self._token_header(self._token.get_secret_value())
            headers[name] = value
        return headers

    def _refusal(self, response: R) -> ReviewError:
        """The contract error of a non-2xx answer to a read (see `refusal`)."""
        return refusal(response, anonymous=self.anonymous, hidden=self.forbidden_hides)

    async def request(
        self,
        method: str,
        url: str,
        *,
        json: object | None = None,
        params: Mapping[str, str] | None = None,
        limit: int | None = None,
    ) -> R:
        """One API request, never redirected; any status is returned (see `refusal`).

        Raises the forge's error for a URL off its origins, a network failure, a timeout, an
        oversized or corrupt 2xx body. `limit` defaults to `max_response_bytes`.
        """
        forge, error = self.forge, self.unavailable
        try:
            target = httpx.URL(url)
            if params:
                target = target.copy_merge_params(dict(params))
        except (httpx.InvalidURL, TypeError, ValueError):
            raise error(f"The {forge} request's URL is not valid.") from None
        if not self._on_origins(target) or target.userinfo:
            raise error(f"The request was for a host other than {forge}; not sent.")
        content = None if json is None else dumps_compact(json).encode("utf-8")
        cap = self.max_response_bytes if limit is None else limit
        with self._failures():
            async with asyncio.timeout(self.request_timeout_seconds):
                client = await self._pool()
                headers = self._headers(content is not None)
                response, body = await self._send(client, method, target, headers, content, cap)
                answer = self.response_type(response.status_code, response.headers, body)
        return cast("R", answer)  # response_type is R's class (a class variable is not generic)

    async def get_json(self, url: str, *, params: Mapping[str, str] | None = None) -> Any:
        """The JSON of a GET answered 2xx; any other status is its refusal."""
        response = await self.request("GET", url, params=params)
        if not 200 <= response.status < 300:
            raise self._refusal(response)
        return response.json()

    async def get_body(self, url: str, *, limit: int | None = None) -> bytes:
        """The body of a GET answered 200; any other status is its refusal."""
        response = await self.request("GET", url, limit=limit)
        if response.status != 200:
            raise self._refusal(response)
        return response.body

    async def _listing_page(self, url: str, params: Mapping[str, str]) -> tuple[list[Any], R]:
        """One page of a listing, and its response (for the paging headers)."""
        response = await self.request("GET", url, params=params)
        if not 200 <= response.status < 300:
            raise self._refusal(response)
        chunk = response.json()
        if not isinstance(chunk, list):
            raise self.unavailable(f"{self.forge} returned a listing that is not a list.")
        return chunk, response

    async def _user(self, wire: type[U]) -> U:
        """`GET /user` read as `wire`: who the token is."""
        document = await self.get_json(self.api_url("/user"))
        try:
            return wire.model_validate(document)
        except ValidationError:
            raise self.unavailable(f"{self.forge} returned user data that is not valid.") from None
