"""The index folder of a repository: its generations, and the locks between processes.

A folder holds the generations of one repository's index (`search-<n>.sqlite`) and three
lock files, each an flock that dies with its holder:

- `build.lock`: held by the one builder of the folder, over every process;
- `write.lock`: held by whoever writes the current generation (one transaction of a build,
  an inline add, marking a head complete), and while older generations are removed;
- `searching.lock`: held, shared, by each search that runs `git grep` for want of a complete
  head; background work (a build between its transactions, a snapshot's save) waits for it.

The vocabulary is the package's (search_index/__init__.py).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

# A generation is `search-<n>.sqlite`; the highest is the current one.
_GENERATION = re.compile(r"search-([1-9][0-9]{0,8})\.sqlite")


def generations(folder: Path) -> list[tuple[int, Path]]:
    """The index files of a folder, oldest first."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    found = [
        (int(match[1]), folder / name) for name in names if (match := _GENERATION.fullmatch(name))
    ]
    return sorted(found)


def current_generation(folder: Path) -> Path:
    """The file searches read: the newest generation (the first, if there is none yet)."""
    found = generations(folder)
    return found[-1][1] if found else folder / "search-1.sqlite"


def next_generation(folder: Path) -> Path:
    """A new generation's file. A remade index never reuses a name: a connection to the old
    file that closes late deletes its write-ahead log by name, which would be the new one's."""
    found = generations(folder)
    return folder / f"search-{(found[-1][0] if found else 0) + 1}.sqlite"


def remove_older_generations(path: Path) -> None:
    """Delete the generations older than `path` (readers keep what they have open)."""
    for _, older in generations(path.parent):
        if older == path:
            return
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{older}{suffix}")


def build_lock(folder: Path) -> contextlib.AbstractContextManager[bool]:
    """Whether this process may build the folder's index now: one build at a time, over every
    process. A build writes its transactions under `write_lock`, between which others write."""
    return _flock(folder, "build.lock", 0.0)


def write_lock(folder: Path, wait: float) -> contextlib.AbstractContextManager[bool]:
    """Whether this process may write the folder's index now, waiting up to `wait` seconds:
    one writer at a time, and no generation removed while one writes."""
    return _flock(folder, "write.lock", wait)


@contextlib.contextmanager
def searching(folder: Path | None) -> Iterator[None]:
    """Held, shared, while a search of the folder's repository runs `git grep` for want of a
    complete index: background work (a build between its transactions, a snapshot's save)
    pauses meanwhile (`yield_to_searches`), so on a small machine the search has the cores."""
    if folder is None:
        yield  # a repository without an index: no build to pause
        return
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        # Made here if need be: the build this search has just started may not have made it
        # yet, and would otherwise find no search to wait for.
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(folder / "searching.lock", flags, 0o600)
    except OSError:
        yield  # an unwritable folder: the search goes on regardless
        return
    try:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_SH)  # a build holds it exclusively only to look
        yield
    finally:
        os.close(fd)


def yield_to_searches(folder: Path, stop: threading.Event, most: float) -> None:
    """Wait, at most `most` seconds, while a search of the repository runs `git grep` (the
    background work of a build or a snapshot's save)."""
    try:
        fd = os.open(folder / "searching.lock", os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return  # no search has made the lock: none runs (or the folder is gone)
    deadline = time.monotonic() + most
    try:
        while not stop.is_set():
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    return
                time.sleep(0.05)
                continue
            fcntl.flock(fd, fcntl.LOCK_UN)
            return
    finally:
        os.close(fd)


@contextlib.contextmanager
def _flock(folder: Path, name: str, wait: float) -> Iterator[bool]:
    """An exclusive flock (it dies with its holder) on a lock file of `folder`."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
    fd = os.open(folder / name, flags, 0o600)
    deadline = time.monotonic() + wait
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    yield False
                    return
                time.sleep(0.01)
        yield True
    finally:
        os.close(fd)
