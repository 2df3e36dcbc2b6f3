"""`POST /v1/webhooks/gitea` (specification §19) on the real application, a real PostgreSQL and the
fake Gitea: the signature (Gitea's and Forgejo's headers), every delivery kind, drafts, edits,
repeated deliveries, comment commands with Gitea's collaborator-permission lookup (which
answers 403 to a token that is not a repository admin), and hostile payloads refused or
ignored, never a 500.
"""

from __future__ import annotations

import asyncio
import hmac
import json
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from tests.fakes.gitea_server import FakeGitea
from tests.fakes.provider_server import ScriptedProvider
from tests.gitea.payloads import HEAD, SECRET, comment_event, pull_request_event
from tests.jobs.gitea_service import BOT, PATH, GiteaService, deliver
from tests.jobs.test_jobs import rows, service
from tests.scrape import label_values, value

BODY_EDIT = {"body": {"from": "x"}}  # the description changed: nothing the review reads
WRITER, READER, AUTHOR = "wendy", "rita", "alice"  # alice opened the payloads' pull request


def count(database_url: str, table: str = "review_jobs") -> int:
    return int(rows(database_url, f"SELECT count(*) FROM {table}")[0][0])


def comment(body: str, author: str = WRITER, **fields: Any) -> dict[str, Any]:
    event = comment_event(body, **fields)
    event["comment"]["user"] = {"id": 300 + len(author), "login": author}
    event["sender"] = event["comment"]["user"]
    return event


def permission_lookups(fake: FakeGitea) -> list[str]:
    return [r.path for r in fake.api_requests() if r.path.endswith("/permission")]


@pytest.fixture
def settings(
    gitea_service: GiteaService, fake_gitea: FakeGitea, scripted_provider: ScriptedProvider
) -> Any:
    fake_gitea.grant(PATH, WRITER, "write")
    fake_gitea.grant(PATH, READER, "read")
    return gitea_service.settings(scripted_provider, bot_access="admin")


def test_a_signature_that_is_not_the_bodys_is_invalid_signature(
    database_url: str, settings: Any, fake_gitea_writes: Any
) -> None:
    event = pull_request_event("opened")
    body = json.dumps(event).encode()

    async def scenario() -> None:
        async with service(settings) as client:
            wrong = ["", "0" * 64, "sha256=" + "0" * 64, "x" * 4096]
            for signature in wrong:
                answer = await deliver(client, body, signature=signature)
                assert answer.status_code == 401
                assert answer.json()["error"]["code"] == "invalid_signature"
                assert SECRET not in answer.text
            other_secret = await deliver(
                client, body, signature=hmac.new(b"x", body, "sha256").hexdigest()
            )
            assert other_secret.status_code == 401
            unsigned = await client.post(
                "/v1/webhooks/gitea",
                content=body,
                headers={"X-Gitea-Event": "pull_request", "X-Gitea-Event-Type": "pull_request"},
            )
            assert unsigned.status_code == 401
            for garbage in (b"not json", b"[1]"):  # not parsed without a valid signature
                refused = await deliver(client, garbage, signature="0" * 64)
                assert refused.status_code == 401
            assert count(database_url) == 0
            good = await deliver(client, body)
            assert good.status_code == 202, good.text
            forgejo = await deliver(client, body, forgejo=True)
            assert forgejo.status_code == 202, forgejo.text

    asyncio.run(scenario())
    assert count(database_url) == 1  # the same head twice: one waiting job


def test_opened_reopened_synchronized_and_a_title_edit_queue_a_published_review(
    database_url: str, settings: Any
) -> None:
    async def scenario() -> list[dict[str, Any]]:
        async with service(settings) as client:
            events = [
                ("pull_request", pull_request_event("opened", number=1)),
                ("pull_request", pull_request_event("reopened", number=2)),
                ("pull_request_sync", pull_request_event("synchronized", number=3)),
                (
                    "pull_request",
                    {**pull_request_event("edited", number=4), "changes": {"title": {"from": "x"}}},
                ),
            ]
            answers = []
            for kind, event in events:
                answer = await deliver(client, event, kind=kind)
                assert answer.status_code == 202, answer.text
                assert set(answer.json()) == {"job_id", "status"}
                answers.append(answer.json())
            return answers

    answers = asyncio.run(scenario())
    assert all(a["status"] == "queued" for a in answers)
    found = rows(
        database_url,
        "SELECT number, pr_key, tenant, source, post, kind, head_sha FROM review_jobs "
        "ORDER BY number",
    )
    assert [row[0] for row in found] == [1, 2, 3, 4]
    for number, pr_key, tenant, source, post, kind, head in found:
        assert pr_key == f"gitea:acme/widget#{number}"
        assert tenant == "gitea:acme"
        assert (source, post, kind, head) == ("webhook", True, "review", HEAD)


def test_drafts_closed_description_edits_and_other_kinds_are_ignored(
    database_url: str, settings: Any
) -> None:
    async def scenario() -> None:
        async with service(settings) as client:
            ignored = [
                ("pull_request", pull_request_event("opened", draft=True)),
                ("pull_request", pull_request_event("opened", state="closed")),
                ("pull_request", pull_request_event("closed")),
                (
                    "pull_request",
                    {**pull_request_event("edited"), "changes": {"body": {"from": ""}}},
                ),
                ("pull_request_assign", pull_request_event("assigned")),
                ("push", {"ref": "refs/heads/main"}),
                ("pull_request_review_approved", pull_request_event("reviewed")),
                ("issue_comment", comment("/pr-review review", is_pull=False)),
                ("pull_request_comment", comment("/pr-review review", action="edited")),
            ]
            for kind, event in ignored:
                answer = await deliver(client, event, kind=kind)
                assert answer.status_code == 202, (kind, answer.text)
                assert answer.json() == {"status": "ignored"}, kind

    asyncio.run(scenario())
    assert count(database_url) == 0


def test_a_repeated_delivery_id_answers_the_same_job(database_url: str, settings: Any) -> None:
    async def scenario() -> tuple[str, str, str]:
        async with service(settings) as client:
            first = await deliver(client, pull_request_event("opened"), delivery="d-1")
            again = await deliver(
                client, pull_request_event("synchronized"), kind="pull_request_sync", delivery="d-1"
            )
            forgejo = await deliver(
                client, pull_request_event("opened"), delivery="d-1", forgejo=True
            )
            return first.json()["job_id"], again.json()["job_id"], forgejo.json()["job_id"]

    first, again, forgejo = asyncio.run(scenario())
    assert first == again == forgejo
    assert count(database_url) == 1


def test_a_writers_commands_are_queued_as_their_kinds(
    database_url: str, settings: Any, fake_gitea: FakeGitea, fake_gitea_writes: Any
) -> None:
    async def scenario() -> list[dict[str, Any]]:
        async with service(settings) as client:
            answers = []
            for number, body in enumerate(
                [
                    "/pr-review review",
                    f"@{BOT} help",
                    "/pr-review ignore",
                    "/pr-review why does this matter?",
                    "/pr-review remember we validate in the model layer",
                    "/pr-review forget 12",
                ],
                start=1,
            ):
                event = comment(body)
                event["comment"]["id"] = 900 + number
                answer = await deliver(client, event, kind="pull_request_comment")
                assert answer.status_code == 202, answer.text
                answers.append(answer.json())
            return answers

    answers = asyncio.run(scenario())
    assert all(a["status"] == "queued" for a in answers)
    found = rows(database_url, "SELECT kind, command FROM review_jobs ORDER BY created_at")
    assert [kind for kind, _ in found] == [
        "review",
        "help",
        "dismiss",
        "answer",
        "remember",
        "forget",
    ]
    for _, command in found:
        assert command["forge"] == "gitea"
        assert command["author"] == WRITER
    assert found[3][1]["text"] == "why does this matter?"
    # Gitea asked once who the writer is (the answer is kept a while).
    assert permission_lookups(fake_gitea) == [
        f"/git/api/v1/repos/{PATH}/collaborators/{WRITER}/permission"
    ]


def test_comments_not_for_us_or_from_bots_ask_gitea_nothing(
    database_url: str, settings: Any, fake_gitea: FakeGitea
) -> None:
    async def scenario() -> None:
        async with service(settings) as client:
            for event in [
                comment("looks good to me"),
                comment("/pr-review review", author="renovate[bot]"),
                comment(""),
            ]:
                answer = await deliver(client, event, kind="pull_request_comment")
                assert answer.json() == {"status": "ignored"}

    asyncio.run(scenario())
    assert fake_gitea.api_requests() == []
    assert count(database_url) == 0


def test_our_own_a_readers_and_unknown_words_are_ignored(
    database_url: str, settings: Any, fake_gitea: FakeGitea, fake_gitea_writes: Any
) -> None:
    async def scenario() -> None:
        async with service(settings) as client:
            for event in [
                comment("/pr-review review", author=BOT),
                comment("/pr-review review", author=READER),
                comment("/pr-review ignore", author=READER),
                comment("@someone-else review"),
                comment("/pr-review remember"),  # no text: no learning, never a question
            ]:
                answer = await deliver(client, event, kind="pull_request_comment")
                assert answer.json() == {"status": "ignored"}

    asyncio.run(scenario())
    assert count(database_url) == 0


def test_with_a_token_gitea_refuses_the_lookup_only_the_authors_questions_count(
    database_url: str,
    gitea_service: GiteaService,
    fake_gitea: FakeGitea,
    fake_gitea_writes: Any,
    scripted_provider: ScriptedProvider,
) -> None:
    """A bot account with write access but not admin: Gitea answers the permission lookup 403,
    so a writer's command is ignored; the pull request author's question still counts."""
    fake_gitea.grant(PATH, WRITER, "write")
    settings = gitea_service.settings(scripted_provider, bot_access="write")

    async def scenario() -> list[dict[str, Any]]:
        async with service(settings) as client:
            answers = []
            for event in [
                comment("/pr-review review"),
                comment("/pr-review why?"),
                comment("/pr-review review", author=AUTHOR),
                comment("/pr-review why is this wrong?", author=AUTHOR),
            ]:
                answer = await deliver(client, event, kind="pull_request_comment")
                answers.append(answer.json())
            return answers

    answers = asyncio.run(scenario())
    assert [a.get("status") for a in answers] == ["ignored", "ignored", "ignored", "queued"]
    assert rows(database_url, "SELECT kind FROM review_jobs") == [("answer",)]
    lookups = [r for r in fake_gitea.api_requests() if r.path.endswith("/permission")]
    assert lookups
    assert all(r.status == 403 for r in lookups)


def test_hostile_payloads_are_refused_or_ignored_never_a_500(
    database_url: str, settings: Any, fake_gitea_writes: Any
) -> None:
    hostile: list[tuple[str, dict[str, Any] | bytes]] = [
        ("pull_request", b"{"),
        ("pull_request", b'{"action": "opened", "action": "closed"}'),
        ("pull_request", {"action": "opened", "number": 3, "pull_request": "x"}),
        ("pull_request", {**pull_request_event(), "repository": {"full_name": "../etc/passwd"}}),
        ("pull_request", {**pull_request_event(), "repository": {"full_name": "acme/widget?x"}}),
        ("pull_request", {**pull_request_event(), "number": 2**70}),
        ("pull_request", {**pull_request_event(), "number": -1}),
        ("pull_request", pull_request_event(head={"sha": "not-a-sha"})),
        ("pull_request_comment", {**comment("/pr-review review"), "comment": None}),
        ("pull_request_comment", {**comment("/pr-review review"), "issue": {"number": "3"}}),
    ]

    async def scenario() -> None:
        async with service(settings) as client:
            for kind, event in hostile:
                answer = await deliver(client, event, kind=kind)
                assert answer.status_code in (202, 422), (event, answer.text)
                if answer.status_code == 422:
                    assert answer.json()["error"]["code"] == "invalid_request"
            bad_id = await deliver(client, pull_request_event(), delivery="../../x y")
            assert bad_id.status_code == 422

    asyncio.run(scenario())
    assert count(database_url) == 0


def test_the_endpoint_exists_only_with_its_secret_and_a_gitea_server(
    database_url: str, gitea_service: GiteaService, scripted_provider: ScriptedProvider
) -> None:
    without_secret = gitea_service.settings(scripted_provider, pr_review_gitea_webhook_secret=None)
    without_server = without_secret.model_copy(
        update={"gitea_server_url": None, "pr_review_gitea_webhook_secret": SecretStr(SECRET)}
    )

    async def scenario() -> None:
        for settings in (without_secret, without_server):
            async with service(settings) as client:
                answer = await deliver(client, pull_request_event())
                assert answer.status_code == 404

    asyncio.run(scenario())


def test_the_webhook_needs_no_service_key(database_url: str, settings: Any) -> None:
    keyed = settings.model_copy(update={"pr_review_api_keys": (SecretStr("svc-key"),)})

    async def scenario() -> None:
        async with service(keyed) as client:
            answer = await deliver(client, pull_request_event())
            assert answer.status_code == 202
            refused = await client.get(f"/v1/review-jobs/{answer.json()['job_id']}")
            assert refused.status_code == 401

    asyncio.run(scenario())


def test_deliveries_are_counted_by_event_and_outcome(database_url: str, settings: Any) -> None:
    async def scenario() -> str:
        async with service(settings) as client:
            assert (await deliver(client, pull_request_event())).status_code == 202
            assert (await deliver(client, pull_request_event("closed"))).status_code == 202
            answer = await deliver(client, pull_request_event(), signature="0" * 64)
            assert answer.status_code == 401
            assert (await deliver(client, b"[1]")).status_code == 422
            comment_answer = await deliver(client, comment("hi"), kind="pull_request_comment")
            assert comment_answer.status_code == 202
            assert (await deliver(client, b"{}", kind="push<b>")).status_code == 202
            return (await client.get("/metrics")).text

    text = asyncio.run(scenario())
    name = "pr_review_webhook_deliveries_total"
    assert value(text, name, event="pull_request", outcome="queued") == 1
    assert value(text, name, event="pull_request", outcome="ignored") == 1
    assert value(text, name, event="pull_request", outcome="invalid_signature") == 1
    assert value(text, name, event="pull_request", outcome="invalid_request") == 1
    assert value(text, name, event="issue_comment", outcome="ignored") == 1
    assert value(text, name, event="other", outcome="ignored") == 1
    assert {"pull_request", "issue_comment", "other"} <= label_values(text, "event")
    assert SECRET not in text


def test_a_body_over_the_cap_is_refused_unread(database_url: str, settings: Any) -> None:
    """The signature is over the whole body, so a body is read before it is checked: one over
    the cap is refused as it streams (413), never parsed, whatever its signature."""
    body = b"{" + b" " * (5 * 1024 * 1024) + b"}"

    async def scenario() -> httpx.Response:
        async with service(settings) as client:
            return await deliver(client, body)

    answer = asyncio.run(scenario())
    assert answer.status_code == 413
    assert answer.json()["error"]["code"] == "invalid_request"
    assert count(database_url) == 0


def test_a_gitea_that_cannot_say_who_may_ask_makes_the_answer_server_busy(
    database_url: str, settings: Any, fake_gitea: FakeGitea, fake_gitea_writes: Any
) -> None:
    """Gitea redelivers a failed delivery: nothing is queued, and no command is ignored for a
    failure that is Gitea's."""
    fake_gitea.api_redirect = "http://127.0.0.1:9/elsewhere"

    async def scenario() -> httpx.Response:
        async with service(settings) as client:
            return await deliver(client, comment("/pr-review review"), kind="pull_request_comment")

    answer = asyncio.run(scenario())
    assert answer.status_code == 503
    assert answer.json()["error"]["code"] == "server_busy"
    assert count(database_url) == 0
