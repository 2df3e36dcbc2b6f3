"""Model text rendered as Markdown that cannot misbehave on GitHub (specification §10).

Everything the model wrote (titles, explanations, evidence, recommendations, the summary and
notes) and every path goes through `escape()` before it reaches a review body or comment:

- every ASCII punctuation character is backslash-escaped (CommonMark allows that for all of
  them), so no emphasis, heading, list, table, code span, link, image, autolink, HTML tag,
  HTML comment (our markers among them) or entity can start in model text;
- GitHub's own text filters, which run on the rendered text, are broken with a WORD JOINER
  (U+2060, invisible): after `@` (mentions, team mentions, e-mail autolinks), after `#` and
  before `-` of `GH-` (issue and pull-request references, `owner/repo#7` included), inside
  `://` and `www.` (extended URL autolinks);
- line breaks are kept as hard breaks, and leading spaces are dropped, so no line becomes an
  indented code block; carriage returns and other control characters are removed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection

WORD_JOINER = "\u2060"
# CommonMark: "Any ASCII punctuation character may be backslash-escaped."
_PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_GH_REFERENCE = re.compile(r"(?i)\b(gh)-")
_URL_SCHEME = re.compile(r":(?=//)")
_WWW = re.compile(r"(?i)\b(www)\.")
# Control characters and bidirectional marks and overrides: removed from model text on the
# forges whose renderers show none of them (GitLab, Gitea).
CONTROL_AND_BIDI = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)
# An external tracker's key (`ABC-123`): the joiner goes before the hyphen.
_TRACKER_KEY = re.compile(r"(?<=[A-Za-z0-9_])-(?=[0-9])")
# A commit reference is 7 or more hex digits; no run of 7 survives unbroken.
_HEX_RUN = re.compile(r"[0-9A-Fa-f]{7,}")
_HEX_CHUNK = 6


def _break_autolinks(line: str) -> str:
    line = _GH_REFERENCE.sub(lambda m: m[1] + WORD_JOINER + "-", line)
    line = _URL_SCHEME.sub(":" + WORD_JOINER, line)
    return _WWW.sub(lambda m: m[1] + WORD_JOINER + ".", line)


def break_references(line: str) -> str:
    """GitHub's text filters defeated on one line of otherwise-escaped Markdown: no mention,
    issue or pull-request reference, or extended autolink can be recognised in it."""
    line = _break_autolinks(line)
    return line.replace("@", "@" + WORD_JOINER).replace("#", "#" + WORD_JOINER)


def _escape_line(line: str) -> str:
    return escaped_punctuation(_break_autolinks(line), backslashed, "@#")


def backslashed(char: str) -> str:
    """A punctuation character backslash-escaped (CommonMark allows it for all of them)."""
    return "\\" + char


def escaped_punctuation(line: str, written: Callable[[str], str], sigils: Collection[str]) -> str:
    """Each ASCII punctuation character of `line` as `written` gives it (a backslash escape, a
    character reference), and a WORD JOINER after each of the forge's `sigils` (the characters
    that open its references)."""
    out: list[str] = []
    for char in line:
        if char in _PUNCTUATION:
            out.append(written(char))
            if char in sigils:
                out.append(WORD_JOINER)
        else:
            out.append(char)
    return "".join(out)


def break_keys_and_hashes(line: str) -> str:
    """A WORD JOINER before the `-` of an external tracker's key (`ABC-123`) and between every
    six hex digits of a longer run, so that no commit reference of seven or more is linked."""
    line = _TRACKER_KEY.sub(WORD_JOINER + "-", line)
    return _HEX_RUN.sub(_break_hex, line)


def _break_hex(match: re.Match[str]) -> str:
    run = match[0]
    return WORD_JOINER.join(run[i : i + _HEX_CHUNK] for i in range(0, len(run), _HEX_CHUNK))


def escape(text: str) -> str:
    """`text` as inert Markdown: it renders as itself and links, mentions or embeds nothing."""
    text = _CONTROL.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))
    return hard_breaks([_escape_line(line.lstrip(" \t")) for line in text.split("\n")])


def hard_breaks(lines: list[str]) -> str:
    """Escaped lines joined so that each break shows: a backslash at the end of a line is a
    hard break; blank lines stay paragraph breaks."""
    return "\n".join(
        line + ("\\" if line and nxt else "")
        for line, nxt in zip(lines, [*lines[1:], ""], strict=True)
    )


def escape_inline(text: str) -> str:
    """`text` on one line (a title, a path): line breaks become spaces."""
    return escape(" ".join(text.split()))


_BACKTICK_RUN = re.compile(r"`+")


def code_block(info: str, text: str, indent: str = "") -> str:
    """`text` exactly, in a fenced code block (specification §14): fenced with more backticks than
    any run inside it (three at least), so no line of it can close the block; inside a block
    Markdown and GitHub's mentions and references are not read. `indent` prefixes every line,
    fence and blank lines included, so that a block inside a list item stays inside it."""
    longest = max((len(run) for run in _BACKTICK_RUN.findall(text)), default=0)
    fence = "`" * max(3, longest + 1)
    lines = [fence + info, *text.split("\n"), fence]
    return "\n".join(indent + line for line in lines)
