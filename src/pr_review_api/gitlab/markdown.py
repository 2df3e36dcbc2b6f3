"""Model text as GitLab Markdown that renders as itself and does nothing (specification §§10, 17).

GitLab renders more than GitHub does, and part of it after Markdown, on the rendered text (its
reference filters), where a backslash escape has already been consumed. So every piece of
model text (and every path) gets both defences `output/inert_markdown.py` uses for GitHub:

- every ASCII punctuation character is backslash-escaped (CommonMark allows it for all of
  them): no emphasis, heading, list, table, code span, link `[x](url)`, image, autolink
  `<url>`, raw HTML, HTML comment (our markers among them), entity, math `$x$` or quote
  `>>>` can start in model text;
- a WORD JOINER (U+2060, invisible) follows each character that opens one of GitLab's
  references, so no reference pattern can match on the rendered text whether or not the
  renderer honours the escape: `@user`, `@group/sub`, `@all` (mentions); `#12`, `!34`, `&5`
  (issues, merge requests, epics, and their cross-project forms `group/project#12`);
  `~label`, `~"two words"`, `%milestone`, `%"two words"`, `$snippet`, `*iteration:`,
  `^alert#1`; `[[wiki]]`, `[[_TOC_]]`, `[contact:x]`, `[vulnerability:1]`; `{+ inline diff +}`;
  `:emoji:`; and `scheme://` (autolinks);
- `www.` (autolinks), `ABC-123` (an external issue tracker's keys) and runs of seven or more
  hex digits (commit references, which GitLab links when the commit exists) are broken with a
  joiner too.

GitLab also runs **quick actions**: a line of a note or a discussion that starts with `/` and a
command name (`/merge`, `/approve`, `/close`, ...) is executed with our token's rights before
the note is saved. Every line `escape` returns starts with a character other than `/`, `\\s`
or a control (leading blanks are dropped, `/` is written `\\/`), so no line of model text can be
one, whatever it holds. Text we show raw (a suggestion's replacement in a code block) is
checked with `starts_quick_action` by the caller, which then does not show it raw.
"""

from __future__ import annotations

import re

from pr_review_api.output.inert_markdown import WORD_JOINER

# CommonMark: "Any ASCII punctuation character may be backslash-escaped."
_PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
# The characters that open a GitLab reference, a filter-made link or a wiki/TOC tag.
_SIGILS = frozenset("@#!&~%$*^[{:")
_CONTROL = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)
_WWW = re.compile(r"(?i)\b(www)\.")
# Jira's and other external trackers' keys (`ABC-123`): the joiner goes before the hyphen.
_TRACKER_KEY = re.compile(r"(?<=[A-Za-z0-9_])-(?=[0-9])")
# A commit reference is 7 to 40 hex digits; no run of 7 survives unbroken.
_HEX_RUN = re.compile(r"[0-9A-Fa-f]{7,}")
_HEX_CHUNK = 6
# GitLab's quick-action extractor (lib/gitlab/quick_actions/extractor.rb) matches
# `^\/<command>` case-insensitively after deleting every carriage return; we refuse more:
# any line whose first non-blank characters are `/` and a letter or `_` (whatever the word:
# GitLab adds commands), while `//` and `/*` (comments in code) start no command.
_QUICK_ACTION_LINE = re.compile(r"^\s*/[a-z_]", re.MULTILINE | re.IGNORECASE)


def starts_quick_action(text: str) -> bool:
    """Whether a line of raw `text` (shown as is, in a code block) starts with `/` and a
    word, after blanks: GitLab could take it for a quick action, so it is never posted raw."""
    # GitLab deletes carriage returns before it looks; a renderer may break lines at them.
    return any(_QUICK_ACTION_LINE.search(text.replace("\r", cut)) is not None for cut in ("", "\n"))


def _break_hex(match: re.Match[str]) -> str:
    run = match[0]
    chunks = [run[i : i + _HEX_CHUNK] for i in range(0, len(run), _HEX_CHUNK)]
    return WORD_JOINER.join(chunks)


def _escape_line(line: str) -> str:
    line = _WWW.sub(lambda m: m[1] + WORD_JOINER + ".", line)
    line = _TRACKER_KEY.sub(WORD_JOINER + "-", line)
    line = _HEX_RUN.sub(_break_hex, line)
    out: list[str] = []
    for char in line:
        if char in _PUNCTUATION:
            out.append("\\" + char)
            if char in _SIGILS:
                out.append(WORD_JOINER)
        else:
            out.append(char)
    return "".join(out)


def escape(text: str) -> str:
    """`text` as inert GitLab Markdown: it renders as itself, references, links, embeds and
    runs nothing, and none of its lines can start a quick action."""
    text = _CONTROL.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))
    # Blanks dropped at a line's start: no indented code block, no `  /close`.
    lines = [_escape_line(line.lstrip()) for line in text.split("\n")]
    # A backslash at the end of a line is a hard break; blank lines stay paragraph breaks.
    return "\n".join(
        line + ("\\" if line and nxt else "")
        for line, nxt in zip(lines, [*lines[1:], ""], strict=True)
    )


def escape_inline(text: str) -> str:
    """`text` on one line (a title, a path): line breaks become spaces."""
    return escape(" ".join(text.split()))
