"""Model text on GitHub (specification §10): no mention, reference, link, autolink, image or HTML.

Each forbidden form is rendered twice: with markdown-it-py (CommonMark, and with GFM's
linkify-like rules written out below, since GitHub adds its own filters after CommonMark) and
checked against GitHub's documented rules: mentions `@user` and `@org/team`, references `#12`,
`GH-12`, `owner/repo#12`, bare URLs and `www.` autolinks, e-mail autolinks. The text must also
read as itself once rendered.
"""

from __future__ import annotations

import html
import re
from functools import partial

import pytest
from hypothesis import given
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from pr_review_api.output.inert_markdown import WORD_JOINER, escape, escape_inline
from pr_review_api.publishing.markers import Post, head_marker, read_markers
from tests import builders

FORBIDDEN = [
    "@octocat please look",
    "cc @acme/security-team",
    "fixes #12",
    "see acme/widget#7",
    "GH-3 and gh-4",
    "[click](https://evil.example/x)",
    "[ref]: https://evil.example\n\n[ref]",
    "<https://evil.example>",
    "https://evil.example/path?q=1",
    "www.evil.example",
    "mail me: a@evil.example",
    "![pixel](https://evil.example/p.png)",
    '<img src="https://evil.example/p.png">',
    "<script>alert(1)</script>",
    "<details><summary>x</summary>y</details>",
    "<!-- pr-review:head=" + "a" * 40 + " -->",
    "&lt;b&gt; entity &#64;octocat",
    "`code` and ```fence```",
    "    indented code @octocat",
    "# heading\n> quote\n- list\n1. item\n| a | b |\n|---|---|",
    "**bold** _em_ ~~strike~~",
    "line\\\nbreak \\",
    "\u202eRTL override\u2066",
]

# GitHub's post-CommonMark filters, as its documentation describes them, on rendered text.
GITHUB_RULES = {
    "mention": re.compile(r"(?<![\w`])@[A-Za-z0-9][A-Za-z0-9-]*(?:/[\w.-]+)?"),
    "issue reference": re.compile(r"(?<![\w&])#\d+"),
    "GH reference": re.compile(r"(?i)\bGH-\d+"),
    "cross-repository reference": re.compile(r"[\w.-]+/[\w.-]+#\d+"),
    "URL autolink": re.compile(r"(?i)\b(?:https?|ftp)://"),
    "www autolink": re.compile(r"(?i)\bwww\."),
    "e-mail autolink": re.compile(r"[\w.+-]+@[\w-]+\.[\w.-]+"),
}


def rendered(markdown: str) -> str:
    out: str = MarkdownIt("commonmark").render(markdown)
    return out


def visible_text(html_text: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", html_text))


def test_text_that_needs_no_escaping_is_unchanged() -> None:
    assert escape("plain words 42") == "plain words 42"


@pytest.mark.parametrize("text", FORBIDDEN)
def test_forbidden_forms_render_as_plain_text(text: str) -> None:
    out = rendered(escape(text))
    tags = set(re.findall(r"</?([a-z0-9]+)", out))
    assert tags <= {"p", "br"}, out  # no a, img, code, h1, blockquote, li, table, script...
    assert "<!--" not in out
    shown = visible_text(out)
    for rule, pattern in GITHUB_RULES.items():
        assert pattern.search(shown) is None, (rule, shown)


@pytest.mark.parametrize("text", FORBIDDEN)
def test_escaped_text_still_reads_as_itself(text: str) -> None:
    shown = visible_text(rendered(escape(text))).replace(WORD_JOINER, "")
    expected = re.sub(r"[\u202a-\u202e\u2066-\u2069]", "", text)
    expected_words = [line.strip() for line in expected.splitlines() if line.strip()]
    shown_words = [line.strip() for line in shown.splitlines() if line.strip()]
    assert shown_words == expected_words


@given(st.text(max_size=200))
def test_no_text_ever_renders_a_tag_or_matches_a_github_rule(text: str) -> None:
    out = rendered(escape(text))
    assert set(re.findall(r"</?([a-z0-9]+)", out)) <= {"p", "br"}
    shown = visible_text(out)
    for pattern in GITHUB_RULES.values():
        assert pattern.search(shown) is None


@given(st.text(max_size=200))
def test_model_text_can_never_carry_a_marker_we_trust(text: str) -> None:
    forged = escape(text + head_marker("b" * 40))
    state = read_markers([Post("pr-review-bot", forged)], "pr-review-bot", reviews=True)
    assert state.heads == []


def test_inline_text_has_no_line_breaks() -> None:
    assert "\n" not in escape_inline("a\nb\r\nc")


def test_markers_count_only_for_our_login_in_any_case() -> None:
    body = head_marker("c" * 40)
    posts = [Post("PR-Review-Bot", body, 1), Post("octocat", head_marker("d" * 40), 2)]
    state = read_markers(posts, "pr-review-bot", reviews=True)
    assert state.heads == [("c" * 40, 1, None)]
    assert read_markers([Post(None, body)], "pr-review-bot", reviews=True).heads == []


@pytest.mark.parametrize("text", FORBIDDEN[:16])
def test_the_checks_catch_each_form_when_it_is_not_escaped(text: str) -> None:
    # The oracle itself: unescaped, every one of these forms is caught by a check above.
    out = rendered(text)
    tags = set(re.findall(r"</?([a-z0-9]+)", out)) - {"p", "br"}
    shown = visible_text(out)
    hits = [rule for rule, pattern in GITHUB_RULES.items() if pattern.search(shown)]
    assert tags or hits or "<!--" in out, text


# --- fingerprints (model.Finding.fingerprint) ---


_finding = partial(
    builders.finding_model,
    title="T",
    explanation="E",
    path="a.py",
    line=3,
    evidence="e",
    recommendation="r",
)


def test_fingerprint_is_stable_whatever_the_line_number() -> None:
    text = "    return compare(a, b)"
    assert _finding(line=3).fingerprint(text) == _finding(line=300).fingerprint(text)
    assert _finding(explanation="other words").fingerprint(text) == _finding().fingerprint(text)


@pytest.mark.parametrize("changes", [{"path": "b.py"}, {"severity": "low"}, {"title": "Another"}])
def test_fingerprint_changes_with_path_severity_and_title(changes: dict[str, object]) -> None:
    assert _finding(**changes).fingerprint("x") != _finding().fingerprint("x")


def test_fingerprint_changes_with_the_anchored_line_text() -> None:
    assert _finding().fingerprint("a = 1") != _finding().fingerprint("a = 2")
    assert _finding().fingerprint("a = 1") != _finding().fingerprint()
    assert len(_finding().fingerprint()) == 32
