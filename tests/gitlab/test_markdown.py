"""Model text on GitLab (specification §§10, 17): no mention, reference, link, embed, HTML or quick
action.

Each form is rendered with markdown-it-py (CommonMark: what GitLab's renderer does before its
own filters) and the rendered text is checked against GitLab's reference patterns (its Banzai
filters run on that text, after the backslash escapes are consumed). Quick actions are checked
on the raw text, as GitLab's extractor reads it: every command GitLab documents, in every place
a line can start (after spaces, a tab, a quote `>`, a list marker, a line break in a title).
"""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from pr_review_api.gitlab.markdown import escape, escape_inline, starts_quick_action
from pr_review_api.output.inert_markdown import WORD_JOINER
from pr_review_api.publishing.markers import Post, finding_marker, head_marker, read_markers
from tests.gitlab.support import (
    GITLAB_RULES,
    QUICK_ACTION_PATTERN,
    SIGILS,
    active_parts,
    rendered,
    visible_text,
)

# GitLab's quick actions, as its documentation lists them (issues, merge requests, epics, work
# items, commits), each with a typical argument. Every one of them must stay inert.
QUICK_ACTIONS = [
    "add_child #123",
    "add_contacts [contact:a@example.com]",
    "add_email a@example.com",
    "approve",
    "assign @alice @bob",
    "assign me",
    "assign_reviewer @alice",
    "award :+1:",
    "blocked_by #12",
    "blocks #12",
    "board_move ~doing",
    "cc @alice",
    "checkin_reminder weekly",
    "child_epic &1",
    "clear_health_status",
    "clear_weight",
    "clone group/project --with_notes",
    "close",
    "confidential",
    "convert_to_ticket a@example.com",
    "copy_metadata !1",
    "copy_metadata #1",
    "create_merge_request a-branch",
    "done",
    "draft",
    "due in 2 days",
    "duplicate #1",
    "epic &1",
    "estimate 1mo 2w 3d 4h 5m",
    "estimate_time 1h",
    "health_status at_risk",
    "invite_email a@example.com",
    'iteration *iteration:"Late in July"',
    'label ~bug ~"two words"',
    "labels ~bug",
    "link https://example.com/x",
    "lock",
    "merge",
    "milestone %v1.0",
    "move group/other",
    "page policy",
    "parent_epic &1",
    "promote",
    "promote_to issue",
    "promote_to_incident",
    "publish",
    "react :thumbsup:",
    "ready",
    "reassign @alice",
    "reassign_reviewer @alice",
    "rebase",
    "relabel ~bug",
    "relate #1 #2",
    "remove_child #1",
    "remove_child_epic &1",
    "remove_contacts [contact:a@example.com]",
    "remove_due_date",
    "remove_email a@example.com",
    "remove_epic",
    "remove_estimate",
    "remove_time_estimate",
    "remove_iteration",
    "remove_label ~bug",
    "remove_milestone",
    "remove_parent",
    "remove_parent_epic",
    "remove_reviewer @alice",
    "remove_time_spent",
    "remove_zoom",
    "reopen",
    "request_review @alice",
    "reviewer @alice",
    "set_parent #1",
    "severity S1",
    "shrug a comment",
    "spend 1h 2018-08-26",
    "spend_time -1h 30m",
    "status done",
    "submit_review",
    "subscribe",
    "tableflip a comment",
    "tag v1.2.3 a message",
    "target_branch main",
    "timeline DB load spiked | 2022-09-07 09:30",
    "title A new title",
    "todo",
    "type issue",
    "unapprove",
    "unassign @alice",
    "unassign",
    "unassign_reviewer me",
    "unlabel ~bug",
    "unlink #1",
    "unlock",
    "unsubscribe",
    "weight 3",
    "wip",
    "zoom https://zoom.us/j/123",
]
COMMAND_NAMES = sorted({action.split()[0] for action in QUICK_ACTIONS}, key=len, reverse=True)
# GitLab's extractor (lib/gitlab/quick_actions/extractor.rb): `^\/<name>`, case-insensitive,
# multi-line, after deleting carriage returns.
GITLAB_EXTRACTOR = re.compile(
    r"^/(?:" + "|".join(COMMAND_NAMES) + r")(?:[ ][^\n]*)?(?:\s*\n|$)",
    re.IGNORECASE | re.MULTILINE,
)
# Where a model could put a command so that a naive escape lets it through.
PLACES = [
    "/{}",
    "  /{}",
    "\t/{}",
    "\u00a0/{}",
    "> /{}",
    ">/{}",
    ">>>\n/{}\n>>>",
    "- /{}",
    "1. /{}",
    "text first\n/{}",
    "text first\r/{}",
    "text first\r\n  /{}",
    "```\n/{}\n```",
]

FORBIDDEN = [
    "@octocat please look",
    "cc @all",
    "ping @group/subgroup and @user.name",
    "fixes #12 and #12+",
    "see group/project#12",
    "group/sub/project!3",
    "!34",
    "~bug and ~scope::label",
    '~"multi word"',
    "%v1.0",
    '%"multi milestone"',
    "$42",
    "&7 and group&7",
    "*iteration:42",
    '*iteration:"Sprint 5"',
    "^alert#3",
    "[[wiki page]]",
    "[[_TOC_]]",
    "[TOC]",
    "[vulnerability:12]",
    "[contact:a@b.example]",
    "{+ added +} and [- removed -]",
    ":smile: :+1:",
    "[click](https://evil.example/x)",
    "[ref]: https://evil.example\n\n[ref]",
    "<https://evil.example>",
    "https://evil.example/path?q=1",
    "ftp://evil.example/file",
    "www.evil.example",
    "mail me: a@evil.example",
    "![pixel](https://evil.example/p.png)",
    '<img src="https://evil.example/p.png">',
    "<script>alert(1)</script>",
    "<details><summary>x</summary>y</details>",
    "<!-- pr-review:head=" + "a" * 40 + " -->",
    "commit 1a2b3c4d5e6f and range 1a2b3c4...5d6e7f8",
    "group/project@1a2b3c4d",
    "JIRA-123 and ABC-9",
    "$`x^2`$ and $$y$$",
    "&lt;b&gt; entity &#64;octocat",
    "`code` and ```fence```",
    "    indented code @octocat",
    "# heading\n> quote\n- list\n1. item\n| a | b |\n|---|---|",
    "**bold** _em_ ~~strike~~",
    "line\\\nbreak \\",
    "\u202eRTL override\u2066",
]


def assert_inert(text: str) -> None:
    """What GitLab would make of `escape(text)`: nothing but paragraphs and plain text."""
    escaped = escape(text)
    out = rendered(escaped)
    assert set(re.findall(r"</?([a-z0-9]+)", out)) <= {"p", "br"}, out
    assert "<!--" not in out
    shown = visible_text(out)
    for rule, pattern in GITLAB_RULES.items():
        assert pattern.search(shown) is None, (rule, shown)
    # Whatever GitLab adds to its filters later, no sigil is ever next to what follows it.
    assert all(shown[i + 1 : i + 2] == WORD_JOINER for i, c in enumerate(shown) if c in SIGILS)
    assert QUICK_ACTION_PATTERN.search(escaped.replace("\r", "")) is None
    assert GITLAB_EXTRACTOR.search(escaped.replace("\r", "")) is None
    assert active_parts(escaped) == []


def test_text_that_needs_no_escaping_is_unchanged() -> None:
    assert escape("plain words 42") == "plain words 42"


# One test a table, each row named in its failure (the suite's size is a figure the README
# states: a row is not a test of its own).


def test_forbidden_forms_render_as_plain_text() -> None:
    for text in FORBIDDEN:
        assert_inert(text)


def test_escaped_text_still_reads_as_itself() -> None:
    for text in FORBIDDEN:
        shown = visible_text(rendered(escape(text))).replace(WORD_JOINER, "")
        expected = re.sub(r"[\u202a-\u202e\u2066-\u2069]", "", text)
        expected_lines = [line.strip() for line in expected.splitlines() if line.strip()]
        shown_lines = [line.strip() for line in shown.splitlines() if line.strip()]
        assert shown_lines == expected_lines, text


def test_the_checks_catch_each_form_when_it_is_not_escaped() -> None:
    # The oracle itself: unescaped, every one of these forms is caught by a check above (the
    # last two are inert as they are).
    for text in FORBIDDEN[:-2]:
        out = rendered(text)
        tags = set(re.findall(r"</?([a-z0-9]+)", out)) - {"p", "br"}
        shown = visible_text(out)
        hits = [rule for rule, pattern in GITLAB_RULES.items() if pattern.search(shown)]
        assert tags or hits or "<!--" in out, text


def test_no_documented_quick_action_survives_in_any_place() -> None:
    for action in QUICK_ACTIONS:
        for place in PLACES:
            for command in (action, action.upper()):
                text = place.format(command)
                assert_inert(text)
                assert_inert("**Title** " + text)
                assert "\n" not in escape_inline(text)
                assert QUICK_ACTION_PATTERN.search(escape_inline(text)) is None, text


def test_the_extractor_oracle_finds_each_action_when_it_is_not_escaped() -> None:
    for action in QUICK_ACTIONS:
        assert GITLAB_EXTRACTOR.search(f"text\n/{action}\nmore") is not None, action
        assert GITLAB_EXTRACTOR.search(f"/{action.upper()}") is not None, action
        assert starts_quick_action(f"code\n  /{action}"), action


def test_raw_text_that_could_start_a_quick_action_is_recognised() -> None:
    assert starts_quick_action("/merge")
    assert starts_quick_action("x = 1\n\t/close")
    assert starts_quick_action("x = 1\r/close")  # GitLab deletes carriage returns first
    assert starts_quick_action("a\n/usr/bin/env")  # not a command, refused all the same
    # A comment line (`//`, `/*`) is no command name: a suggestion may hold one.
    assert not starts_quick_action("x = 1\n  // a comment\n/* block */")
    assert not starts_quick_action("x = a / b")
    assert not starts_quick_action("path/to/file")


@given(st.text(max_size=200))
def test_no_text_ever_renders_a_tag_or_matches_a_gitlab_rule(text: str) -> None:
    assert_inert(text)


_FRAGMENTS = st.sampled_from(
    [
        *(f"/{name}" for name in COMMAND_NAMES),
        *"@#!&~%$*^[]{}:<>/\\`\"'()-+_=|\n\r\t ",
        "all",
        "12",
        "group/project",
        "iteration:",
        "https://",
        "www.",
        "1a2b3c4d",
        "ABC-1",
        "<!--",
        " -->",
        "pr-review:head=",
        "a" * 40,
        "\u00a0",
        "\u2028",
    ]
)


@given(st.lists(_FRAGMENTS, max_size=40).map("".join))
def test_hostile_fragments_never_render_anything_active(text: str) -> None:
    assert_inert(text)
    assert QUICK_ACTION_PATTERN.search(escape_inline(text)) is None


@given(st.lists(_FRAGMENTS, max_size=30).map("".join))
def test_model_text_can_never_carry_a_marker_we_trust(text: str) -> None:
    forged = escape(text + head_marker("b" * 40) + finding_marker("c" * 16))
    state = read_markers([Post("pr-review-bot", forged)], "pr-review-bot", reviews=True)
    assert state.heads == []
    assert state.fingerprints == set()


def test_inline_text_has_no_line_breaks() -> None:
    assert "\n" not in escape_inline("a\nb\r\nc\u2028d")
