"""Path globs, matched in time linear in the path: O(len(path) * total glob length / word size).

Every glob the program accepts from a repository (`.pr-review.toml`'s `exclude` today) is
matched here. The semantics are those of docs/configuration-file.md, as in `.gitignore`:

- `*` matches any run of characters except `/` (the empty run too); `?` one character but `/`;
- `**/` matches any number (zero included) of whole folders, each a non-empty name and its `/`;
- any other `**` matches any run of characters, `/` included (`docs/**`, `a**b`);
- every other character is literal: there are no character classes and no escapes;
- a glob without a `/` except a trailing one matches at any depth (`*.md`, `docs/`); a leading or
  inner `/` anchors it at the repository root (`/vendor/`, `src/**/*_pb2.py`);
- a glob ending in `/` matches everything under that folder (`docs/` is `docs/**`).

A path matches when the whole path does (as `re.fullmatch` would); a newline is a character
like any other.

Why by hand: a repository's globs are hostile input, and a backtracking matcher takes time
exponential in the number of wildcards (`"**a" * 40 + "**b"` against a path of a's never ends).
Python's `re`, and the libraries built on it (`fnmatch`, `wcmatch`, `pathspec`), all backtrack;
the maintained linear-time engine (`google-re2`) is a native extension that would still need the
translation to a regular expression written here. This matcher is a Thompson simulation: each
glob is a small automaton whose states are bits of one integer, every glob's automaton side by
side, so one step per character of the path moves every state of every glob at once, whatever
the globs hold. Nothing here backtracks, recurses or allocates per state.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum, auto
from functools import cache

MAX_GLOBS = 100
MAX_GLOB_CHARS = 256


class _Kind(Enum):
    LITERAL = auto()  # one given character
    ONE = auto()  # `?`: one character but `/`
    STAR = auto()  # `*`: any run without `/`
    ANY = auto()  # `**` not before `/`: any run
    FOLDERS = auto()  # `**/`: any number of `name/`


@dataclass(frozen=True)
class _Token:
    kind: _Kind
    char: str = ""


_ONE = _Token(_Kind.ONE)
_STAR = _Token(_Kind.STAR)
_ANY = _Token(_Kind.ANY)
_FOLDERS = _Token(_Kind.FOLDERS)
_RUNS = (_Kind.STAR, _Kind.ANY, _Kind.FOLDERS)  # the tokens that may match nothing


def glob_parts(glob: str) -> tuple[bool, str]:
    """Whether `glob` is anchored at the root, and the body its tokens are read from."""
    anchored = "/" in glob.rstrip("/")
    body = glob.strip("/") + ("/**" if glob.endswith("/") else "")
    return anchored, body


def _tokens(body: str) -> list[_Token]:
    """The glob's tokens, read left to right (`**/` before `**` before `*`)."""
    out: list[_Token] = []
    index = 0
    while index < len(body):
        if body.startswith("**/", index):
            out.append(_FOLDERS)
            index += 3
        elif body.startswith("**", index):
            out.append(_ANY)
            index += 2
        else:
            out.append(_single(body[index]))
            index += 1
    return _simplified(out)


def _single(char: str) -> _Token:
    return _STAR if char == "*" else _ONE if char == "?" else _Token(_Kind.LITERAL, char)


def _simplified(tokens: list[_Token]) -> list[_Token]:
    """The same language with fewer runs side by side: `**` swallows a run beside it, and two
    `**/` are one. This keeps every chain of tokens that may match nothing at most two long,
    so closing a set of states over them takes a fixed number of steps."""
    out: list[_Token] = []
    for token in tokens:
        last = out[-1] if out else None
        if last is not None and last.kind in _RUNS and token.kind in _RUNS:
            if last.kind is _Kind.ANY or token.kind is _Kind.ANY:
                out[-1] = _ANY
                continue
            if last.kind is token.kind:  # `**/**/`; `**` then `*` cannot be two STARs
                continue
        out.append(token)
    # `**` also swallows a run before the run it replaced (`**/` then `*` then `**`).
    return out if out == tokens else _simplified(out)


@dataclass
class _Masks:
    """The automaton of every glob, one bit per state, built one glob after another."""

    width: int = 0
    starts: int = 0
    restarts: int = 0  # starts of the unanchored globs: they start again after each `/`
    accepts: int = 0
    literals: dict[str, int] = field(default_factory=dict)
    one: int = 0  # states left on one character but `/` (`?`, and a `**/` entering a name)
    stay: int = 0  # states kept on a character but `/` (`*`, a name inside `**/`)
    any: int = 0  # states kept on every character (`**`)
    name_end: int = 0  # names inside `**/`, that `/` ends (back to the state before them)
    skip_one: int = 0  # states that match nothing to go one state on (`*`, `**`)
    skip_two: int = 0  # `**/` matching no folder: past its name state
    longest_skip: int = 0  # the most tokens in a row that may match nothing
    _skips: int = 0

    @property
    def stay_or_any(self) -> int:
        return self.stay | self.any

    def add(self, glob: str) -> None:
        anchored, body = glob_parts(glob)
        start = 1 << self.width
        self.starts |= start
        if not anchored:
            self.restarts |= start
        self._skips = 0
        for token in _tokens(body):
            self._add_token(token)
        self.accepts |= 1 << self.width
        self.width += 1  # the accepting state, which nothing leaves

    def _add_token(self, token: _Token) -> None:
        bit = 1 << self.width
        self.width += 1
        self._skips = self._skips + 1 if token.kind in _RUNS else 0
        self.longest_skip = max(self.longest_skip, self._skips)
        if token.kind is _Kind.LITERAL:
            self.literals[token.char] = self.literals.get(token.char, 0) | bit
        elif token.kind is _Kind.ONE:
            self.one |= bit
        elif token.kind is _Kind.STAR:
            self.stay |= bit
            self.skip_one |= bit
        elif token.kind is _Kind.ANY:
            self.any |= bit
            self.skip_one |= bit
        else:  # FOLDERS: this state, then a name state, then `/` back to this state
            name = bit << 1
            self.width += 1
            self.one |= bit
            self.skip_two |= bit
            self.stay |= name
            self.name_end |= name


class GlobSet:
    """Several globs compiled once; `matches(path)` says whether any of them matches."""

    def __init__(self, globs: Sequence[str]) -> None:
        if len(globs) > MAX_GLOBS:
            raise ValueError(f"more than {MAX_GLOBS} globs")
        if any(len(glob) > MAX_GLOB_CHARS for glob in globs):
            raise ValueError(f"a glob longer than {MAX_GLOB_CHARS} characters")
        masks = _Masks()
        for glob in dict.fromkeys(globs):  # a glob given twice is matched once
            masks.add(glob)
        self._masks = masks
        self._stay_or_any = masks.stay_or_any
        self._initial = self._closed(masks.starts) if globs else 0

    def matches(self, path: str) -> bool:
        """Whether `path` (repository-relative, no leading `/`) matches any of the globs."""
        m = self._masks
        states = self._initial
        index, end = 0, len(path)
        while index < end:
            if not states:
                if not m.restarts:
                    return False
                # Only an unanchored glob can start again, and only after the next `/`.
                index = path.find("/", index)
                if index < 0:
                    return False
            states = self._step(states, path[index])
            index += 1
        return bool(states & m.accepts)

    def _step(self, states: int, char: str) -> int:
        m = self._masks
        moved = (states & m.literals.get(char, 0)) << 1
        if char == "/":
            moved |= ((states & m.name_end) >> 1) | (states & m.any) | m.restarts
        else:
            moved |= ((states & m.one) << 1) | (states & self._stay_or_any)
        return self._closed(moved)

    def _closed(self, states: int) -> int:
        """`states` and every state reachable from them by matching nothing: one pass per
        token of the longest run of tokens that may (at most two, once simplified)."""
        m = self._masks
        for _ in range(m.longest_skip):
            states |= ((states & m.skip_one) << 1) | ((states & m.skip_two) << 2)
        return states


@cache
def compiled_globs(globs: tuple[str, ...]) -> GlobSet:
    """The GlobSet of `globs`, compiled once per distinct tuple."""
    return GlobSet(globs)


def matches_any(path: str, globs: Iterable[str]) -> bool:
    """Whether `path` matches any of `globs`."""
    return compiled_globs(tuple(globs)).matches(path)
