"""Gitea and Forgejo webhook deliveries (gitea/hooks.py, specification §19): the signature checked
before the body is read, strict payloads, what each delivery asks for, and a typed refusal for
anything hostile."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import SecretStr

from pr_review_api.errors import InvalidRequest, InvalidSignature
from pr_review_api.gitea.hooks import (
    Delivery,
    PullRequestComment,
    PullRequestPush,
    read_delivery,
    verify_signature,
)
from pr_review_api.settings import Settings
from tests.gitea.payloads import (
    DELIVERY,
    HEAD,
    SECRET,
    comment_event,
    delivery,
    pull_request_event,
    sign,
)

SERVER = "http://127.0.0.1:3000/git"
ACTIONS_BOT = {"id": -2, "login": "gitea-actions"}  # Gitea's own user for Actions
SETTINGS = Settings(gitea_server_url=SERVER)
KEY = SecretStr(SECRET)


def read(body: bytes, headers: dict[str, str]) -> Delivery:
    return read_delivery(body, headers, KEY, SETTINGS)


def asks(event: dict[str, Any] | bytes, kind: str, family: str) -> Any:
    return read(*delivery(event, kind, family)).asks


# --- the signature ----------------------------------------------------------------------------


def test_a_signed_delivery_is_read_with_its_id_and_kind() -> None:
    result = read(*delivery(pull_request_event(), "pull_request", "pull_request"))
    assert (result.delivery_id, result.kind) == (DELIVERY, "pull_request")
    assert isinstance(result.asks, PullRequestPush)
    assert result.asks.ref.url == f"{SERVER}/acme/widget/pulls/3"
    assert (result.asks.head_sha, result.asks.action) == (HEAD, "opened")


def test_forgejo_headers_alone_are_enough() -> None:
    body, headers = delivery(
        pull_request_event(), "pull_request_sync", "pull_request", forgejo=True
    )
    only_forgejo = {k: v for k, v in headers.items() if k.startswith("x-forgejo-")}
    result = read(body, only_forgejo)
    assert result.kind == "pull_request_sync"
    assert isinstance(result.asks, PullRequestPush)


@pytest.mark.parametrize(
    "change",
    [
        {"x-gitea-signature": None},  # none at all (the GitHub-style header is not ours)
        {"x-gitea-signature": "0" * 64},
        {"x-gitea-signature": "sha256=" + "0" * 64},
        {"x-gitea-signature": ""},
        {"x-gitea-signature": "é"},
        {"x-gitea-signature": None, "x-forgejo-signature": "0" * 64},
    ],
)
def test_a_missing_or_wrong_signature_is_refused_before_the_body_is_read(
    change: dict[str, str | None],
) -> None:
    body, headers = delivery(b"{not json at all", "pull_request", "pull_request")
    for name, value in change.items():
        headers.pop(name, None)
        if value is not None:
            headers[name] = value
    with pytest.raises(InvalidSignature) as caught:
        read(body, headers)
    assert caught.value.status == 401
    assert SECRET not in caught.value.message


def test_one_matching_signature_is_enough() -> None:
    """Forgejo sends both headers; a server that signed one of them otherwise (another scheme)
    still proves the secret with the other."""
    body, headers = delivery(pull_request_event(), "pull_request", "pull_request", forgejo=True)
    headers["x-forgejo-signature"] = "not-an-hmac"
    assert isinstance(read(body, headers).asks, PullRequestPush)
    headers["x-gitea-signature"] = "0" * 64
    with pytest.raises(InvalidSignature):
        read(body, headers)


def test_a_signature_under_another_secret_is_refused() -> None:
    body, headers = delivery(pull_request_event(), "pull_request", "pull_request")
    headers["x-gitea-signature"] = sign(body, "another-secret")
    with pytest.raises(InvalidSignature):
        read(body, headers)


def test_a_signature_in_upper_case_hex_or_with_blanks_is_the_same_value() -> None:
    body, _ = delivery(b"{}", "push", "push")
    verify_signature(body, {"x-gitea-signature": f" {sign(body).upper()}\n"}, KEY)


def test_the_body_is_signed_exactly_as_sent() -> None:
    body, headers = delivery(pull_request_event(), "pull_request", "pull_request")
    with pytest.raises(InvalidSignature):
        read(body + b" ", headers)


# --- pull requests ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("action", "kind"),
    [
        ("opened", "pull_request"),
        ("reopened", "pull_request"),
        ("synchronized", "pull_request_sync"),
    ],
)
def test_opening_and_new_commits_ask_for_a_review(action: str, kind: str) -> None:
    push = asks(pull_request_event(action), kind, "pull_request")
    assert isinstance(push, PullRequestPush)
    assert push.action == action


@pytest.mark.parametrize("changes", [{"title": {"from": "WIP: x"}}, {"ref": {"from": "dev"}}])
def test_an_edit_of_what_the_skip_rules_read_asks_again(changes: dict[str, Any]) -> None:
    event = pull_request_event("edited")
    event["changes"] = changes
    assert isinstance(asks(event, "pull_request", "pull_request"), PullRequestPush)


@pytest.mark.parametrize("action", ["label_updated", "label_cleared"])
def test_a_change_of_labels_asks_again(action: str) -> None:
    push = asks(pull_request_event(action), "pull_request_label", "pull_request")
    assert isinstance(push, PullRequestPush)
    assert push.action == action


@pytest.mark.parametrize(
    "event",
    [
        {**pull_request_event("edited"), "changes": {"body": {"from": "old"}}},
        pull_request_event("edited"),
        pull_request_event("closed"),
        pull_request_event("assigned"),
        pull_request_event("opened", draft=True),
        pull_request_event("synchronized", state="closed"),
    ],
)
def test_other_pull_request_deliveries_ask_for_nothing(event: dict[str, Any]) -> None:
    assert asks(event, "pull_request", "pull_request") is None


@pytest.mark.parametrize("kind", ["push", "issues", "pull_request_review_approved", "release", "x"])
def test_other_kinds_ask_for_nothing_and_are_not_even_parsed(kind: str) -> None:
    assert asks(b"not json", kind, "whatever") is None


def test_a_kind_that_is_no_event_type_is_none() -> None:
    body, headers = delivery(pull_request_event(), "pull_request", "pull_request")
    headers["x-gitea-event-type"] = "Pull Request\n<script>"
    assert read(body, headers) == Delivery(DELIVERY, None, None)


def test_the_precise_kind_wins_over_the_family() -> None:
    body, headers = delivery(comment_event(), "pull_request_comment", "issue_comment")
    assert read(body, headers).kind == "pull_request_comment"
    del headers["x-gitea-event-type"]
    assert read(body, headers).kind == "issue_comment"


def test_the_pull_request_is_named_on_our_server_whatever_the_payload_links() -> None:
    push = asks(pull_request_event(), "pull_request", "pull_request")
    assert push.ref.url.startswith(SERVER)
    assert "elsewhere" not in push.ref.url


@pytest.mark.parametrize(
    "change",
    [
        {"repository": {"full_name": "../etc"}},
        {"repository": {"full_name": "acme/widget/pulls/9"}},
        {"repository": {"full_name": "acme/widget.git"}},
        {"repository": {"full_name": "acme"}},
        {"repository": {"full_name": "acme/wid get"}},
        {"repository": None},
        {"number": 0},
        {"number": "3"},
        {"number": True},
        {"number": 2**63},
        {"pull_request": None},
        {"pull_request": {"head": {"sha": "B" * 40}}},
        {"pull_request": {"head": {"sha": "b" * 39}}},
        {"pull_request": {"draft": "no"}},
        {"action": 5},
        {"action": None},
    ],
)
def test_malformed_pull_request_deliveries_are_refused(change: dict[str, Any]) -> None:
    event = {**pull_request_event(), **change}
    with pytest.raises(InvalidRequest) as caught:
        asks(event, "pull_request", "pull_request")
    assert caught.value.message == "The delivery is not a well-formed pull request event."


# --- comments ---------------------------------------------------------------------------------


def test_a_comment_on_a_pull_request_is_read() -> None:
    comment = asks(comment_event("@bot help"), "pull_request_comment", "issue_comment")
    assert isinstance(comment, PullRequestComment)
    assert (comment.comment_id, comment.body, comment.author, comment.author_id) == (
        901,
        "@bot help",
        "bob",
        8,
    )
    assert comment.pull_request_author == "alice"
    assert comment.ref.url == f"{SERVER}/acme/widget/pulls/3"


def test_an_older_gitea_sends_pull_request_comments_as_issue_comments() -> None:
    event = comment_event()
    del event["is_pull"]
    assert isinstance(asks(event, "issue_comment", "issue_comment"), PullRequestComment)


@pytest.mark.parametrize(
    "event",
    [
        comment_event(action="edited"),
        comment_event(action="deleted"),
        comment_event(is_pull=False),
        {
            **comment_event(),
            "comment": {**comment_event()["comment"], "user": {"id": -2, "login": "gitea-actions"}},
        },
    ],
)
def test_other_comments_ask_for_nothing(event: dict[str, Any]) -> None:
    assert asks(event, "issue_comment", "issue_comment") is None


@pytest.mark.parametrize(
    "change",
    [
        {"comment": None},
        {"comment": {"id": 1, "body": 5, "user": {"id": 8, "login": "bob"}}},
        {"comment": {"id": 0, "body": "x", "user": {"id": 8, "login": "bob"}}},
        {"comment": {"id": 1, "body": "x", "user": {"id": 8, "login": ""}}},
        {"comment": {"id": 1, "body": "x", "user": {"id": 8, "login": "a\nb"}}},
        {"comment": {"id": 1, "body": "x", "user": {"id": "8", "login": "bob"}}},
        {"comment": {"id": 1, "body": "x", "user": None}},
        {"issue": {"number": -1, "pull_request": {}}},
        {"issue": None},
        {"is_pull": "yes"},
    ],
)
def test_malformed_comment_deliveries_are_refused(change: dict[str, Any]) -> None:
    event = {**comment_event(), **change}
    with pytest.raises(InvalidRequest) as caught:
        asks(event, "pull_request_comment", "issue_comment")
    assert caught.value.message == "The delivery is not a well-formed comment event."


def test_a_long_comment_is_cut() -> None:
    comment = asks(comment_event("x" * 100_000), "pull_request_comment", "issue_comment")
    assert len(comment.body) == 65_536


# --- hostile bytes ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"[]",
        b"null",
        b'"x"',
        b"{",
        b'{"a":1,"a":2}',
        b"[" * 100_000,
        b"\xff\xfe",
        b'{"x": NaN}',
    ],
)
def test_a_body_that_is_not_one_object_is_a_typed_refusal(body: bytes) -> None:
    with pytest.raises(InvalidRequest):
        asks(body, "pull_request", "pull_request")


def test_a_delivery_id_that_is_not_safe_to_store_is_refused() -> None:
    body, headers = delivery(pull_request_event(), "pull_request", "pull_request")
    headers["x-gitea-delivery"] = "../../x"
    with pytest.raises(InvalidRequest):
        read(body, headers)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=5)
    ),
    max_leaves=30,
)


def _mutated(base: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    keys = st.sampled_from([*base.keys(), "pull_request", "issue", "comment", "repository"])
    return st.dictionaries(keys, _JSON, max_size=4).map(lambda change: {**base, **change})


@given(
    st.one_of(
        st.binary(max_size=300),
        _mutated(pull_request_event()).map(lambda e: json.dumps(e).encode()),
        _mutated(comment_event()).map(lambda e: json.dumps(e).encode()),
    ),
    st.sampled_from(["pull_request", "pull_request_sync", "pull_request_comment", "issue_comment"]),
)
def test_any_signed_body_is_read_or_refused_with_a_contract_error(body: bytes, kind: str) -> None:
    try:
        read(*delivery(body, kind, kind))
    except InvalidRequest:
        return  # the one refusal a signed body may get; anything else fails the test
