"""A repository's latest snapshot on disk: what a new process derives its first head from.

Whatever the path (the saved head itself, a head derived from it, a full load when the file
is unusable), the snapshot must equal `load_snapshot`. A file that is truncated, corrupt, of
another shape, too large, not a regular file, or writable by anyone but this user is ignored,
never trusted and never a crash; a writer killed before its rename leaves the old file whole.
"""

from __future__ import annotations

import hashlib
import marshal
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pr_review_api.git import snapshot_file
from pr_review_api.git.blobs import BlobReaders
from pr_review_api.git.entries import TreeEntry
from pr_review_api.git.limits import PrepareLimits, RepositoryTooLarge, Work
from pr_review_api.git.repository import PinnedRepository
from pr_review_api.git.snapshots import SnapshotCache
from pr_review_api.git.store import RepositoryStore
from pr_review_api.git.tree import load_snapshot
from pr_review_api.settings import Settings
from tests.git.test_snapshots import count_full_loads, same
from tests.gitrepo import GitRepo
from tests.hostile.world import HostileWorld, build_hostile_world

NO_LIMIT = 1 << 40


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> HostileWorld:
    return build_hostile_world(tmp_path_factory.mktemp("hostile"))


def cache_in(folder: Path, **options: Any) -> SnapshotCache:
    """A snapshot cache as a new process's store makes it, saving into `folder`."""
    return SnapshotCache(4, BlobReaders().source, lambda _: folder, save_delay=0, **options)


def two_heads(repo: GitRepo) -> tuple[str, str]:
    base = repo.commit_files({"a.txt": "a\n", "d/b.txt": "b\n", "link": b"d/b.txt"})
    head = repo.commit_files({"c.txt": "c\n", "d/b.txt": "changed\n"})
    return base, head


def test_a_saved_snapshot_loads_back_equal_to_a_fresh_load(
    world: HostileWorld, tmp_path: Path
) -> None:
    loaded = load_snapshot(world.repo.git_dir, world.head)
    snapshot_file.save(tmp_path, world.head, loaded)
    saved = snapshot_file.load(tmp_path, NO_LIMIT)
    assert saved is not None
    assert saved[0] == world.head
    same(saved[1], loaded)
    assert saved[1].entries == loaded.entries
    assert [type(entry) for entry in saved[1].entries.values()] == [TreeEntry] * len(loaded.entries)


def test_a_head_derived_from_a_saved_snapshot_equals_a_fresh_load(
    world: HostileWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    git_dir = world.repo.git_dir
    snapshot_file.save(tmp_path, world.base, load_snapshot(git_dir, world.base))
    loads = count_full_loads(monkeypatch)
    derived = cache_in(tmp_path).get(git_dir, world.head)
    assert loads == []
    same(derived, load_snapshot(git_dir, world.head))


@pytest.mark.e2e
def test_a_new_process_derives_its_first_head_from_the_last_ones_file(
    repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base, head = two_heads(repo)
    settings = Settings(pr_review_cache_dir=tmp_path / "cache")
    with RepositoryStore(settings) as first:
        PinnedRepository.open(repo.git_dir, base, base, store=first)
        first.snapshots.wait_for_saves()
    folder = RepositoryStore(settings).index_dir(repo.git_dir)
    assert folder is not None
    assert (folder / snapshot_file.FILE_NAME).is_file()
    loads = count_full_loads(monkeypatch)
    with RepositoryStore(settings) as second:
        pinned = PinnedRepository.open(repo.git_dir, base, head, store=second)
        again = PinnedRepository.open(repo.git_dir, base, base, store=second)
        second.snapshots.wait_for_saves()
    assert loads == []
    same(pinned.snapshot, load_snapshot(repo.git_dir, head))
    same(again.snapshot, load_snapshot(repo.git_dir, base))
    saved = snapshot_file.load(folder, NO_LIMIT)
    assert saved is not None
    assert saved[0] == head  # the derived head became the repository's latest


def test_a_store_without_a_cache_folder_saves_nothing(repo: GitRepo, tmp_path: Path) -> None:
    base, _ = two_heads(repo)
    with RepositoryStore() as store:
        PinnedRepository.open(repo.git_dir, base, base, store=store)
        store.snapshots.wait_for_saves()
        assert store.index_dir(repo.git_dir) is None
    assert list(tmp_path.rglob(snapshot_file.FILE_NAME)) == []


def saved_file(repo: GitRepo, folder: Path) -> tuple[str, str, Path]:
    base, head = two_heads(repo)
    snapshot_file.save(folder, base, load_snapshot(repo.git_dir, base))
    return base, head, folder / snapshot_file.FILE_NAME


def rewrite(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    path.chmod(0o600)


def with_header(payload: bytes, head: str | None = None) -> bytes:
    """A header that fits `payload` (naming the head the payload names, or `head`)."""
    fields = snapshot_file.decode_payload(payload)
    named = head if head is not None else str(fields[1] if fields else "")
    digest = hashlib.sha256(payload).digest()
    header = snapshot_file._HEADER.pack(snapshot_file._MAGIC, named.encode(), len(payload), digest)
    return header + payload


def replaced(data: bytes, field: int, change: Callable[[Any], Any]) -> bytes:
    """A well-formed file whose payload has one field changed."""
    fields = list(snapshot_file.decode_payload(data[snapshot_file._HEADER.size :]) or ())
    fields[field] = change(fields[field])
    return with_header(snapshot_file.encode_payload(fields))


CORRUPTIONS: dict[str, Callable[[bytes], bytes]] = {
    "truncated in the header": lambda data: data[:20],
    "truncated in the payload": lambda data: data[: len(data) // 2],
    "a flipped payload byte": lambda data: data[:-7] + bytes([data[-7] ^ 1]) + data[-6:],
    "another magic": lambda data: b"X" + data[1:],
    "a longer length in the header": lambda data: data + b"\0",
    "empty": lambda data: b"",
    "another shape": lambda data: with_header(snapshot_file.encode_payload((1, "0" * 40, ["a"]))),
    "a header naming another head": lambda data: with_header(data[88:], "0" * 40),
    "another format": lambda data: replaced(data, 0, lambda number: number + 1),
    "entries of an unknown kind": lambda data: replaced(data, 3, lambda kinds: "x" * len(kinds)),
    "a short blob id": lambda data: replaced(data, 4, lambda oids: [oid[:-1] for oid in oids]),
    "a size that is not a number": lambda data: replaced(data, 5, lambda sizes: [*sizes[1:], "1"]),
    "one listable flag too few": lambda data: replaced(data, 6, lambda flags: flags[1:]),
    "not marshal at all": lambda data: with_header(b"\xff" * 64, "0" * 40),
    "a frame of bytes that are not marshal": lambda data: with_header(
        snapshot_file._FRAME.pack(8) + b"\xff" * 8, "0" * 40
    ),
    "a frame longer than the payload": lambda data: with_header(
        data[88:] + snapshot_file._FRAME.pack(100) + b"\0" * 10
    ),
    "the fields of an older format": lambda data: with_header(
        marshal.dumps(tuple(snapshot_file.decode_payload(data[88:]) or ()))
    ),
}


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_a_damaged_file_is_ignored_and_the_head_loaded_in_full(
    repo: GitRepo, tmp_path: Path, corruption: str
) -> None:
    _, head, path = saved_file(repo, tmp_path)
    rewrite(path, CORRUPTIONS[corruption](path.read_bytes()))
    assert snapshot_file.load(tmp_path, NO_LIMIT) is None
    cache = cache_in(tmp_path)
    same(cache.get(repo.git_dir, head), load_snapshot(repo.git_dir, head))
    cache.wait_for_saves()
    saved = snapshot_file.load(tmp_path, NO_LIMIT)  # the full load replaced the damaged file
    assert saved is not None
    assert saved[0] == head


def test_a_file_another_user_could_have_written_is_ignored(
    repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, _, path = saved_file(repo, tmp_path)
    assert snapshot_file.load(tmp_path, NO_LIMIT) is not None
    for mode in (0o620, 0o602):
        path.chmod(mode)
        assert snapshot_file.load(tmp_path, NO_LIMIT) is None
    path.chmod(0o600)
    other_user = os.geteuid() + 1
    monkeypatch.setattr(os, "geteuid", lambda: other_user)
    assert snapshot_file.load(tmp_path, NO_LIMIT) is None


def test_a_link_or_a_folder_in_place_of_the_file_is_ignored(repo: GitRepo, tmp_path: Path) -> None:
    _, _, path = saved_file(repo, tmp_path)
    real = tmp_path / "elsewhere"
    path.rename(real)
    path.symlink_to(real)
    assert snapshot_file.load(tmp_path, NO_LIMIT) is None
    path.unlink()
    path.mkdir()
    assert snapshot_file.load(tmp_path, NO_LIMIT) is None


def test_a_file_larger_than_the_index_budget_is_not_read(repo: GitRepo, tmp_path: Path) -> None:
    _, _, path = saved_file(repo, tmp_path)
    size = path.stat().st_size
    assert snapshot_file.load(tmp_path, size) is not None
    assert snapshot_file.load(tmp_path, size - 1) is None


def test_a_saved_head_counts_against_the_entry_budget(repo: GitRepo, tmp_path: Path) -> None:
    base, _, _ = saved_file(repo, tmp_path)
    with pytest.raises(RepositoryTooLarge):
        cache_in(tmp_path).get(repo.git_dir, base, Work(PrepareLimits(max_tree_entries=2)))


def test_a_saved_head_this_repository_lacks_is_loaded_in_full(
    repo: GitRepo, tmp_path: Path
) -> None:
    other = GitRepo(tmp_path / "other")
    foreign = other.commit_files({"x.txt": "x\n"})
    snapshot_file.save(tmp_path, foreign, load_snapshot(other.git_dir, foreign))
    head = repo.commit_files({"a.txt": "a\n"})
    same(cache_in(tmp_path).get(repo.git_dir, head), load_snapshot(repo.git_dir, head))


@pytest.mark.e2e
def test_a_writer_killed_before_its_rename_leaves_the_old_file(
    repo: GitRepo, tmp_path: Path
) -> None:
    base, head, _ = saved_file(repo, tmp_path)
    script = textwrap.dedent(
        """
        import os, signal, sys
        from pathlib import Path
        from pr_review_api.git import snapshot_file
        from pr_review_api.git.tree import load_snapshot

        def killed(*args):
            os.kill(os.getpid(), signal.SIGKILL)

        snapshot_file.os.replace = killed
        folder, git_dir, head = sys.argv[1:]
        snapshot_file.save(Path(folder), head, load_snapshot(Path(git_dir), head))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path), str(repo.git_dir), head], check=False
    )
    assert done.returncode == -signal.SIGKILL
    leftovers = list(tmp_path.glob(".head-snapshot-*.tmp"))
    assert len(leftovers) == 1
    assert leftovers[0].stat().st_size > 0  # the whole new file, but never under the name
    saved = snapshot_file.load(tmp_path, NO_LIMIT)
    assert saved is not None
    assert saved[0] == base
    # A later writer removes a temporary file once it is old enough to be a dead writer's.
    os.utime(leftovers[0], (0, 0))
    snapshot_file.save(tmp_path, head, load_snapshot(repo.git_dir, head))
    assert list(tmp_path.glob(".head-snapshot-*.tmp")) == []


def test_a_failed_write_removes_its_temporary_file(
    repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base, head, _ = saved_file(repo, tmp_path)

    def full_disk(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError, match="space"):
        snapshot_file.save(tmp_path, head, load_snapshot(repo.git_dir, head))
    assert list(tmp_path.glob(".head-snapshot-*")) == []
    saved = snapshot_file.load(tmp_path, NO_LIMIT)
    assert saved is not None
    assert saved[0] == base


def test_derived_heads_are_saved_at_most_once_an_interval(repo: GitRepo, tmp_path: Path) -> None:
    base, head = two_heads(repo)
    third = repo.commit_files({"e.txt": "e\n"})
    cache = cache_in(tmp_path, save_interval=3600)
    cache.get(repo.git_dir, base)  # a full load: saved
    cache.get(repo.git_dir, head)  # derived within the interval: not saved
    cache.wait_for_saves()
    saved = snapshot_file.load(tmp_path, NO_LIMIT)
    assert saved is not None
    assert saved[0] == base
    eager = cache_in(tmp_path, save_interval=0)
    eager.get(repo.git_dir, head)  # derived from the file
    eager.get(repo.git_dir, third)  # derived in memory
    eager.wait_for_saves()
    saved = snapshot_file.load(tmp_path, NO_LIMIT)
    assert saved is not None
    assert saved[0] == third  # one saver per repository: the newest head is written last
    same(saved[1], load_snapshot(repo.git_dir, third))
