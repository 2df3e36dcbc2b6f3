"""Model text on Gitea (gitea/markdown.py, specification §§10 and 19): no mention, reference, emoji,
link, math or raw HTML, whatever the model writes.

Each form is rendered with markdown-it-py (CommonMark, as Gitea's goldmark renders it) and the
rendered text nodes, outside code, are checked against Gitea's own post-processor patterns
(tests/gitea/support.py copies them from modules/references/references.go and
modules/markup/html.go); the raw text is checked too, as Gitea's stripped-text readers and its
math parser read it.
"""

from __future__ import annotations

import pytest
from hypothesis import given

from pr_review_api.gitea.markdown import code_span, escape, escape_inline
from pr_review_api.output.inert_markdown import WORD_JOINER, code_block
from tests.gitea.support import (
    GITEA_PATTERNS,
    MODEL_TEXT,
    active_parts,
    rendered,
    visible_text,
)

HOSTILE = [
    "@admin please look",
    "cc @org/team, @all and @here.",
    "Fixes #12, closes !3 and see acme/widget#7 or acme/widget!8",
    "JIRA-1234 is the ticket",
    "see acme/widget@d8a994ef243349f321568f9e36d5c3f444b99cae",
    "commit d8a994ef2 broke it (deadbeef12)",
    "mail admin@example.com now",
    ":smile: :+1: :custom_emoji:",
    "[[Home]] and [[Page|link|arg=1]]",
    "https://evil.example/x http://a.b ftp://c.d mailto:x@y.z ssh+git://h/r",
    "www.example.com and WWW.example.org",
    "[click](https://evil.example) ![img](https://evil.example/i.png) <https://evil.example>",
    "<script>alert(1)</script> <img src=x onerror=alert(1)> <!-- pr-review:head=abc -->",
    "&lt;b&gt; &#64;admin &#x40;admin",
    "$x^2$ and $$y$$ and \\(z\\) and \\[w\\]",
    "# heading\n> quote\n- list\n1. item\n    indented code\n```\nfence\n```",
    "| a | b |\n|---|---|\n| c | d |",
    "**bold** _em_ ~~strike~~ `code` [^1]\n\n[^1]: footnote",
    "line one\r\nline two\rline three\u2028four",
    "https://gitea.example/acme/widget/pulls/27/files#hash",
    "> [!NOTE]\n> admonition",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_text_is_inert(text: str) -> None:
    escaped = escape(text)
    assert active_parts(escaped) == [], escaped
    assert active_parts(escape_inline(text)) == []


@pytest.mark.parametrize("text", HOSTILE)
def test_the_oracle_sees_what_unescaped_text_would_do(text: str) -> None:
    """The oracle is not blind: every hostile form but pure layout is active without escaping."""
    layout_only = text.startswith(("# heading", "| a |", "**bold**", "line one", "> [!NOTE]"))
    assert bool(active_parts(text)) or layout_only


def test_every_pattern_of_the_oracle_can_fire() -> None:
    samples = {
        "mention": "hi @admin",
        "issue or pull reference": "see #12",
        "external tracker key": "JIRA-12 done",
        "cross-repository reference": "acme/widget#7",
        "commit cross reference": "acme/widget@d8a994ef",
        "commit": "d8a994ef2",
        "e-mail": "admin@example.com",
        "emoji shortcode": ":smile:",
        "wiki short link": "[[Home]]",
        "URL": "https://x",
        "www autolink": "www.example.com",
    }
    assert samples.keys() == GITEA_PATTERNS.keys()
    for rule, sample in samples.items():
        assert GITEA_PATTERNS[rule].search(sample), rule


@pytest.mark.parametrize("text", HOSTILE)
def test_text_renders_as_itself(text: str) -> None:
    assert words_of(visible_text(escape(text))) == words_of(text.replace("\u2028", ""))


def test_a_hex_run_is_broken_every_six_digits() -> None:
    sha = "d8a994ef243349f321568f9e36d5c3f444b99cae"
    escaped = escape(sha)
    assert all(len(chunk) <= 6 for chunk in escaped.split(WORD_JOINER))
    assert escaped.replace(WORD_JOINER, "") == sha
    assert escape("abcdef") == "abcdef"  # six digits: no commit


def test_no_line_starts_with_a_blank_and_breaks_are_hard() -> None:
    escaped = escape("  first\n\tsecond\n\nthird")
    assert escaped == "first\\\nsecond\n\nthird"
    assert "<br />" in rendered(escaped)


def test_inline_text_is_one_line() -> None:
    assert "\n" not in escape_inline("a\nb\r\nc\u2028d")


def test_control_and_bidirectional_characters_are_removed() -> None:
    assert escape("a\x00b\x1bc\u202ed\u2066e") == "abcde"


@pytest.mark.parametrize(
    "path", ["src/@admin/#12.py", "a`b``c.py", "`start.py", "end `", "", "x\ny.py"]
)
def test_a_code_span_shows_a_path_verbatim_and_inert(path: str) -> None:
    span = code_span(path)
    assert active_parts(span, code=True) == []
    html = rendered(span)
    assert html.startswith("<p><code>")
    shown = " ".join(path.split("\n"))
    assert html.count("<code>") == 1
    assert shown.replace("&", "&amp;").replace("<", "&lt;") in html or not path


def test_a_fenced_block_holds_a_diff_whatever_it_contains() -> None:
    body = "-old @admin #1\n+new ```\n````\n+:smile: https://x"
    block = code_block("diff", body)
    assert block.startswith("`````diff\n")
    html = rendered(block)
    assert html.count("<pre>") == 1
    assert active_parts(block, code=True) == []


def words_of(text: str) -> str:
    """The words a reader sees, whatever the blanks and invisible characters between them."""
    kept = "".join(c for c in text if c.isprintable() or c.isspace())
    return " ".join(kept.replace(WORD_JOINER, "").split())


@given(MODEL_TEXT)
def test_any_model_text_is_inert(text: str) -> None:
    escaped = escape(text)
    assert active_parts(escaped) == []
    assert active_parts(escape_inline(text)) == []


@given(MODEL_TEXT)
def test_any_model_text_renders_as_itself(text: str) -> None:
    cleaned = "".join(c for c in text if c not in "\u202e")
    assert words_of(visible_text(escape_inline(text))) == words_of(cleaned)
