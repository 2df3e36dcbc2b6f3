"""Reading `remember` and `forget` (jobs/commands.py, specification §20), as every forge's webhook
route does: what stores a learning and what is ignored."""

from __future__ import annotations

import pytest

from pr_review_api.jobs.commands import (
    Comment,
    addressed_command,
    forgotten_id,
    kind_of,
    knowledge_kind,
    learning_text,
)
from pr_review_api.jobs.records import JobKind
from pr_review_api.service.gitlab_webhooks import kind_of as gitlab_kind_of


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("remember Money is Decimal.", "remember"),
        ("REMEMBER  Money is Decimal.", "remember"),
        ("remember a\nsecond line", "remember"),
        ("remember", None),
        ("remember   ", None),
        ("remember " + "x" * 500, "remember"),
        ("remember " + "x" * 501, None),
        ("remember see\n> quoted words", None),
        ("remember > quoted", None),
        ("remember bell\x07", None),
        ("forget 12", "forget"),
        ("forget #12", "forget"),
        ("forget 0", None),
        ("forget -1", None),
        ("forget 12 13", None),
        ("forget twelve", None),
        ("forget ١٢", None),  # digits, but not ASCII ones
        ("forget " + "9" * 19, None),
        ("remembered this", None),
    ],
)
def test_knowledge_commands(text: str, kind: str | None) -> None:
    assert knowledge_kind(text) == kind


def test_a_learning_is_what_follows_the_word_and_forget_names_one_id() -> None:
    assert learning_text("remember   Money is Decimal.  ") == "Money is Decimal."
    assert forgotten_id(" 42 ") == 42
    assert forgotten_id("#42") == 42


def test_both_forges_read_them_anywhere_on_a_change() -> None:
    on_the_change = Comment(1, "", "alice", "bob", review_comment=False, in_reply_to_id=None)
    assert kind_of("remember Money is Decimal.", on_the_change) == "remember"
    assert kind_of("forget 3", on_the_change) == "forget"

    class Note:
        in_discussion = False

    assert gitlab_kind_of("remember Money is Decimal.", Note()) == "remember"  # type: ignore[arg-type]
    assert gitlab_kind_of("forget 3", Note()) == "forget"  # type: ignore[arg-type]


def test_a_bad_remember_in_a_findings_thread_is_no_question() -> None:
    in_thread = Comment(1, "", "alice", "bob", review_comment=True, in_reply_to_id=9)
    assert kind_of("remember " + "x" * 501, in_thread) is None
    assert kind_of("forget everything", in_thread) is None
    assert kind_of("why remember this?", in_thread) == "answer"

    class Note:
        in_discussion = True

    assert gitlab_kind_of("remember > quoted", Note()) is None  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("body", "author", "asked"),
    [
        ("@pr-review[bot] review", "alice", ("review", "review")),
        (
            "/pr-review  remember Money is Decimal.",
            "alice",
            ("remember Money is Decimal.", "remember"),
        ),
        ("@PR-REVIEW help", "alice", ("help", "help")),
        ("@pr-review[bot] review", "PR-Review[bot]", None),  # our own comment
        ("@someone review", "alice", None),  # addressed to someone else
        ("/pr-review remember", "alice", None),  # asks for nothing we do
        ("", "alice", None),
    ],
)
def test_addressed_command_reads_what_a_comment_asks_of_us(
    body: str, author: str, asked: tuple[str, str] | None
) -> None:
    words: dict[str, JobKind] = {"review": "review", "help": "help"}

    def kind(text: str) -> JobKind | None:
        return knowledge_kind(text) if text.startswith("remember") else words.get(text)

    assert addressed_command(body, author, "pr-review[bot]", kind) == asked
