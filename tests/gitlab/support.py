"""What the GitLab tests share: an oracle of what GitLab would make active in a text we post.

GitLab renders CommonMark, then runs its reference and link filters (lib/banzai/filter/*) on
the rendered text, where backslash escapes are already consumed; before any of that, its
quick-action extractor reads the raw text. `GITLAB_RULES` are those filters' patterns,
simplified to what starts each one; `QUICK_ACTION_PATTERN` is stricter than the extractor.
"""

from __future__ import annotations

import html
import re

from markdown_it import MarkdownIt

GITLAB_RULES = {
    "user or group mention": re.compile(r"(?<!\w)@[A-Za-z0-9_]"),
    "issue or work item": re.compile(r"#\d"),
    "merge request": re.compile(r"!\d"),
    "epic": re.compile(r"&\d"),
    "label": re.compile(r'~[\w"?.&-]'),
    "milestone": re.compile(r'%[\w"]'),
    "snippet": re.compile(r"\$\d"),
    "math": re.compile(r"\$[`$]"),
    "iteration": re.compile(r"\*iteration:"),
    "alert": re.compile(r"\^alert#"),
    "wiki or TOC tag": re.compile(r"\[\[|\[TOC\]"),
    "bracket reference": re.compile(r"\[(?:vulnerability|contact|feature_flag|work_item):"),
    "inline diff": re.compile(r"\{[+-]|\[[+-]"),
    "emoji": re.compile(r":[a-z0-9_+-]+:"),
    "URL autolink": re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://"),
    "www autolink": re.compile(r"(?i)\bwww\."),
    "e-mail autolink": re.compile(r"[\w.+-]+@[\w-]+\.[\w.-]+"),
    "commit": re.compile(r"[0-9a-fA-F]{7}"),
    "external tracker key": re.compile(r"\b[A-Z][A-Z0-9_]+-\d"),
}
SIGILS = "@#!&~%$*^[{:"
# No line we post may match this (carriage returns deleted, as GitLab deletes them).
QUICK_ACTION_PATTERN = re.compile(r"^\s*/[a-z_]+", re.IGNORECASE | re.MULTILINE)
# What our own templates render: headings, bold, lists, code blocks, `<sub>`.
OUR_TAGS = frozenset({"p", "br", "h3", "h4", "strong", "ul", "li", "sub", "pre", "code"})


def rendered(markdown: str) -> str:
    out: str = MarkdownIt("commonmark").render(markdown)
    return out


def visible_text(html_text: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", html_text))


def active_parts(markdown: str) -> list[str]:
    """What GitLab would make of a text we post, beyond our own layout: tags we never write,
    references, links and quick actions. Empty for an inert text."""
    out = rendered(markdown)
    found = [f"tag {tag}" for tag in set(re.findall(r"<([a-z0-9]+)", out)) - OUR_TAGS]
    # Code blocks are shown as they are: GitLab reads no reference in them.
    prose = re.sub(r"<pre>.*?</pre>", "", out, flags=re.DOTALL)
    shown = visible_text(prose)
    found += [rule for rule, pattern in GITLAB_RULES.items() if pattern.search(shown)]
    for cut in ("", "\n"):
        found += QUICK_ACTION_PATTERN.findall(markdown.replace("\r", cut))
    return found
