"""Evaluation corpora: the source format, the builder, the built format, and their checks.

A corpus *source* is a folder with one TOML file per case under `cases/` (see docs/eval.md):
where the code comes from, the base files, the edits that make the head, and the golden issues
(path, line range, one sentence) they plant; a clean case has none and measures false positives.

`build_corpus()` writes a *built* corpus: a git repository per case under `repos/` (a base and
a head commit) and `corpus.json` (each case's repository, commits and golden issues), which
`pr-review eval` reads, building a source into a temporary folder first. `check_case()` proves
a built case sound: every golden line exists at the head and lies in the diff.

A corpus is someone else's folder, so nothing in it is followed out of it: files are opened
without following links and only when they are regular files, read no further than their cap
(a case file linked to /dev/zero or a FIFO is refused, never read or waited on), and a case's
repository must be a real folder of the corpus whose `.git` is a real folder too, borrowing no
objects from elsewhere (a `.git` file, `commondir` or `objects/info/alternates` would let the
model read another repository's files).
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import subprocess
import tomllib
from pathlib import Path
from typing import Annotated, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from pr_review_api.errors import InvalidRequest
from pr_review_api.evaluation.case_issue import WithLinkedIssue
from pr_review_api.evaluation.expected_checks import ExpectedCheck, expected_checks, none_expected

CORPUS_MANIFEST = "corpus.json"
CASES_FOLDER = "cases"
REPOS_FOLDER = "repos"
CORPUS_FORMAT: Literal[1] = 1
MAX_CORPUS_MANIFEST_BYTES = 16 * 1024 * 1024
MAX_CASE_FILE_BYTES = 1024 * 1024
DefectKind = Literal[
    "off-by-one",
    "inverted-condition",
    "missing-validation",
    "resource-leak",
    "unawaited-coroutine",
    "swallowed-exception",
    "injection",
    "race",
    "wrong-argument-order",
    "api-misuse",
]
CleanKind = Literal["refactor", "rename", "docs", "feature"]
# A case about custom checks (evaluation/expected_checks.py): golden issues are optional.
CaseKind = DefectKind | CleanKind | Literal["check"]
DEFECT_KINDS: tuple[str, ...] = get_args(DefectKind)
CLEAN_KINDS: tuple[str, ...] = get_args(CleanKind)
CASE_ID = r"^[a-z0-9][a-z0-9-]{0,63}$"
_PLAIN_PATH = re.compile(r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*$")
# Fixed identity and dates: the same source always builds the same commit SHAs.
_BUILD_ENV = {
    "PATH": os.environ.get("PATH", os.defpath),
    "HOME": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "pr-review corpus",
    "GIT_AUTHOR_EMAIL": "corpus@example.invalid",
    "GIT_COMMITTER_NAME": "pr-review corpus",
    "GIT_COMMITTER_EMAIL": "corpus@example.invalid",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    "LC_ALL": "C",
}


def _plain_path(value: str) -> str:
    if not _PLAIN_PATH.fullmatch(value) or any(p in (".", "..", ".git") for p in value.split("/")):
        raise ValueError("a path must be a plain relative path")
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CaseSource(_Strict):
    """Where a case's code comes from."""

    project: str
    licence: str
    file: str
    note: str = ""


class GoldenIssue(_Strict):
    """A planted defect: a file at the head, a line range (inclusive), one sentence, and
    optionally the fixed text of those lines."""

    path: Annotated[str, Field(min_length=1)]
    lines: tuple[Annotated[int, Field(ge=1)], Annotated[int, Field(ge=1)]]
    issue: Annotated[str, Field(min_length=1)]
    # The fixed text of `lines` (lines joined by \n; "" deletes them), when the base holds
    # the correct code: a kept suggestion that makes it counts as a fix (specification §14).
    fix: Annotated[str, Field(max_length=8192)] | None = None

    @model_validator(mode="after")
    def _ordered(self) -> GoldenIssue:
        _plain_path(self.path)
        if self.lines[0] > self.lines[1]:
            raise ValueError("a line range must not end before it starts")
        return self

    @property
    def start(self) -> int:
        return self.lines[0]

    @property
    def end(self) -> int:
        return self.lines[1]


class BaseFile(_Strict):
    """A file of the base commit."""

    path: str
    text: str

    @model_validator(mode="after")
    def _path(self) -> BaseFile:
        _plain_path(self.path)
        return self


class Edit(_Strict):
    """One replacement that makes the head: `old` occurs exactly once in the base file.

    An empty `old` on a path the base lacks creates the file with `new` as its text.
    """

    path: str
    old: str
    new: str

    @model_validator(mode="after")
    def _path(self) -> Edit:
        _plain_path(self.path)
        return self


class CaseFile(_Strict, WithLinkedIssue):
    """One case of a corpus source (`cases/<id>.toml`)."""

    id: Annotated[str, Field(pattern=CASE_ID)]
    kind: CaseKind
    language: str
    title: str
    source: CaseSource
    base: Annotated[list[BaseFile], Field(min_length=1)]
    edit: Annotated[list[Edit], Field(min_length=1)]
    golden: list[GoldenIssue] = []
    checks: list[ExpectedCheck] = []

    @model_validator(mode="after")
    def _golden_matches_kind(self) -> CaseFile:
        if self.kind in CLEAN_KINDS and self.golden:
            raise ValueError("a clean case has no golden issues")
        if self.kind not in (*CLEAN_KINDS, "check") and not self.golden:
            raise ValueError("a defect case needs at least one golden issue")
        expected_checks(self.kind, self.checks)
        return self


class BuiltCase(_Strict, WithLinkedIssue):
    """One case of a built corpus: a repository, two commits and the golden issues."""

    id: Annotated[str, Field(pattern=CASE_ID)]
    kind: str
    language: str
    title: str
    source: CaseSource
    repository: str  # relative to the corpus folder
    base: Annotated[str, Field(pattern=r"^[0-9a-f]{40}$")]
    head: Annotated[str, Field(pattern=r"^[0-9a-f]{40}$")]
    golden: list[GoldenIssue]
    checks: list[ExpectedCheck] = Field(default_factory=list, exclude_if=none_expected)


class BuiltCorpus(_Strict):
    """`corpus.json`."""

    format: Literal[1]
    cases: list[BuiltCase]


# --- Reading a source ---------------------------------------------------------------------


def load_source(source: Path) -> list[CaseFile]:
    """Every case of a corpus source, sorted by id; InvalidRequest names the bad file."""
    folder = source / CASES_FOLDER
    if folder.is_symlink() or not folder.is_dir():
        raise InvalidRequest("The corpus has neither corpus.json nor a cases folder.")
    cases = [_load_case(path) for path in sorted(folder.glob("*.toml"))]
    ids = [case.id for case in cases]
    if len(set(ids)) != len(ids):
        raise InvalidRequest("Two cases of the corpus share an id.")
    if not cases:
        raise InvalidRequest("The corpus has no cases.")
    return sorted(cases, key=lambda case: case.id)


class NotARegularFile(OSError):
    """A corpus file is a link, a device, a FIFO or a folder: it is never read."""


class TooLarge(OSError):
    """A corpus file holds more than its cap."""


def read_regular_file(path: Path, cap: int) -> bytes:
    """The bytes of the regular file at `path`, read without following a link and at most
    `cap` bytes; NotARegularFile or TooLarge otherwise.

    O_NONBLOCK makes opening a FIFO return at once (its type is then refused) instead of
    waiting for a writer; it changes nothing for a regular file.
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        descriptor = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # the last component is a symbolic link
            raise NotARegularFile(path.name) from None
        raise
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise NotARegularFile(path.name)
    with os.fdopen(descriptor, "rb") as file:
        data = file.read(cap + 1)
    if len(data) > cap:
        raise TooLarge(path.name)
    return data


def _load_case(path: Path) -> CaseFile:
    name = path.name
    try:
        data = read_regular_file(path, MAX_CASE_FILE_BYTES)
        return CaseFile.model_validate(tomllib.loads(data.decode("utf-8")))
    except NotARegularFile:
        raise InvalidRequest(f"The case file {name} is not a regular file.") from None
    except TooLarge:
        raise InvalidRequest(f"The case file {name} is larger than 1 MiB.") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        raise InvalidRequest(f"The case file {name} is not readable UTF-8 TOML.") from None
    except ValidationError as exc:
        where = ".".join(str(part) for part in exc.errors()[0]["loc"]) or "the file"
        raise InvalidRequest(f"The case file {name} is invalid at {where}.") from None


def head_files(case: CaseFile) -> dict[str, str]:
    """The head's files: the base with every edit applied, in order."""
    files = {item.path: item.text for item in case.base}
    for edit in case.edit:
        current = files.get(edit.path)
        if current is None:
            if edit.old:
                raise InvalidRequest(f"Case {case.id}: an edit names a file the base lacks.")
            files[edit.path] = edit.new
            continue
        if not edit.old or current.count(edit.old) != 1:
            raise InvalidRequest(f"Case {case.id}: an edit's old text must occur exactly once.")
        files[edit.path] = current.replace(edit.old, edit.new, 1)
    return files


# --- Building -----------------------------------------------------------------------------


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=_BUILD_ENV, capture_output=True, check=False, timeout=120
    )
    if done.returncode != 0:
        raise RuntimeError(f"git {args[0]} failed while building the corpus")
    return done.stdout.decode(errors="replace").strip()


def _write_tree(worktree: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        target = worktree / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8", newline="")


def build_case(case: CaseFile, repos: Path) -> BuiltCase:
    """A git repository for one case: a base commit, then a head commit with the edits."""
    worktree = repos / case.id
    worktree.mkdir(parents=True)
    _git(worktree, "init", "-q", "-b", "main")
    _write_tree(worktree, {item.path: item.text for item in case.base})
    _git(worktree, "add", "-A")
    _git(worktree, "commit", "-q", "-m", f"{case.source.project}: {case.source.file}")
    base = _git(worktree, "rev-parse", "HEAD")
    _write_tree(worktree, head_files(case))
    _git(worktree, "add", "-A")
    _git(worktree, "commit", "-q", "-m", case.title)
    head = _git(worktree, "rev-parse", "HEAD")
    return BuiltCase(
        id=case.id,
        kind=case.kind,
        language=case.language,
        title=case.title,
        source=case.source,
        repository=f"{REPOS_FOLDER}/{case.id}",
        base=base,
        head=head,
        golden=case.golden,
        checks=case.checks,
        linked_issue=case.linked_issue,
    )


def build_corpus(source: Path, target: Path) -> BuiltCorpus:
    """Build every case of `source` into the empty (or new) folder `target`."""
    cases = load_source(source)
    if target.exists() and any(target.iterdir()):
        raise InvalidRequest("The target folder for the built corpus is not empty.")
    (target / REPOS_FOLDER).mkdir(parents=True, exist_ok=True)
    built = BuiltCorpus(
        format=CORPUS_FORMAT, cases=[build_case(c, target / REPOS_FOLDER) for c in cases]
    )
    (target / CORPUS_MANIFEST).write_text(built.model_dump_json(indent=1) + "\n", encoding="utf-8")
    return built


# --- Reading a built corpus -----------------------------------------------------------------


def is_built(folder: Path) -> bool:
    """Whether `folder` holds a built corpus (a corpus.json)."""
    return (folder / CORPUS_MANIFEST).is_file()


def load_built(folder: Path) -> BuiltCorpus:
    """A built corpus's manifest; each case's repository must be its own, inside the folder."""
    try:
        data = read_regular_file(folder / CORPUS_MANIFEST, MAX_CORPUS_MANIFEST_BYTES)
        corpus = BuiltCorpus.model_validate(json.loads(data))
    except TooLarge:
        raise InvalidRequest("The corpus manifest is larger than 16 MiB.") from None
    except (OSError, ValueError):
        # ValidationError is a ValueError; neither the path nor the content is echoed.
        raise InvalidRequest("The corpus manifest corpus.json is invalid.") from None
    for case in corpus.cases:
        if not _own_repository(folder, case.repository):
            raise InvalidRequest(
                f"Case {case.id}: its repository is missing from the corpus or not its own."
            )
    if len({case.id for case in corpus.cases}) != len(corpus.cases):
        raise InvalidRequest("Two cases of the corpus share an id.")
    return corpus


def _own_repository(folder: Path, repository: str) -> bool:
    """Whether `repository` is a plain path to real folders under `folder` (no link on the
    way) holding a real `.git` folder that borrows nothing from another repository: no link
    inside it (an `objects` or pack linked elsewhere), no `commondir`, no alternates."""
    try:
        _plain_path(repository)
    except ValueError:
        return False
    where = folder
    for part in (*repository.split("/"), ".git"):
        where = where / part
        if not _is_real_dir(where):
            return False
    borrowed = (where / "commondir", where / "objects" / "info" / "alternates")
    if any(os.path.lexists(path) for path in borrowed):
        return False
    for parent, folders, files in os.walk(where):
        for name in (*folders, *files):
            if os.path.islink(os.path.join(parent, name)):
                return False
    return True


def _is_real_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


# --- Checking a built case ------------------------------------------------------------------

_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")


def _hunks(worktree: Path, base: str, head: str, path: str, context: int) -> list[tuple[int, int]]:
    """(first head line, line count) of each hunk of `path`'s diff with `context` lines."""
    diff = _git(
        worktree, "diff", "--no-color", "--no-ext-diff", f"-U{context}", base, head, "--", path
    )
    found = []
    for line in diff.splitlines():
        match = _HUNK.match(line)
        if match:
            found.append((int(match.group(1)), int(match.group(2) or "1")))
    return found


def check_case(folder: Path, case: BuiltCase) -> list[str]:
    """What is wrong with a built case (empty when sound).

    Each golden range must lie within the head file and within the diff the model sees
    (three lines of context), and touch a changed line: an added line, or the place where
    lines were removed.
    """
    worktree = folder / case.repository
    problems = []
    for issue in case.golden:
        shown = f"{issue.path}:{issue.start}-{issue.end}"
        try:
            text = _git(worktree, "show", f"{case.head}:{issue.path}")
        except RuntimeError:
            problems.append(f"{case.id}: {shown} names no file at the head")
            continue
        if issue.end > len(text.splitlines()):
            problems.append(f"{case.id}: {shown} runs past the end of the file")
            continue
        wanted = set(range(issue.start, issue.end + 1))
        shown_lines = {
            n
            for start, count in _hunks(worktree, case.base, case.head, issue.path, 3)
            for n in range(start, start + count)
        }
        changed: set[int] = set()
        for start, count in _hunks(worktree, case.base, case.head, issue.path, 0):
            changed.update(range(start, start + count) if count else (start, start + 1))
        if not wanted <= shown_lines:
            problems.append(f"{case.id}: {shown} is not inside the diff")
        elif not wanted & changed:
            problems.append(f"{case.id}: {shown} touches no changed line")
        lines = text.split("\n")
        if issue.fix is not None and issue.fix == "\n".join(lines[issue.start - 1 : issue.end]):
            problems.append(f"{case.id}: {shown} has a fix that changes nothing")
    return problems
