"""git/allocator.py: a tree's full load gives the heap's free pages back before its save.

Counted, never timed: the resident memory a fragmented heap holds before and after
`release_free_memory` (Linux with glibc, in a fresh interpreter), and which loads ask for it.
"""

from __future__ import annotations

import ctypes
import subprocess
import sys
from pathlib import Path

import pytest

from pr_review_api.git import allocator
from pr_review_api.git.repository import PinnedRepository
from pr_review_api.git.store import RepositoryStore
from tests.gitrepo import GitRepo

# Holes in the heap, as a wide tree's parse leaves them: 1 MiB blocks, every second one
# freed, after glibc has raised its mapping threshold past their size.
_PROBE = """
import sys
from pathlib import Path
from pr_review_api.git.allocator import TRIM_MIN_ENTRIES, release_free_memory

def resident_kb():
    status = Path("/proc/self/status").read_text().splitlines()
    return int(next(line.split()[1] for line in status if line.startswith("VmRSS:")))

raised = bytearray(2 * 1024 * 1024)
del raised  # freed: glibc now serves blocks of this size from the heap
blocks = [bytearray(b"x" * (1024 * 1024)) for _ in range(120)]
del blocks[::2]  # 60 MiB of holes between live blocks
before = resident_kb()
released = release_free_memory(TRIM_MIN_ENTRIES)
print(released, (before - resident_kb()) // 1024)
"""


def glibc() -> bool:
    try:
        ctypes.CDLL(None).malloc_trim  # noqa: B018  (a lookup: present or AttributeError)
    except (OSError, AttributeError):
        return False
    return sys.platform.startswith("linux")


@pytest.mark.skipif(not glibc(), reason="glibc's malloc_trim")
def test_the_holes_a_freed_buffer_leaves_go_back_to_the_system() -> None:
    probe = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, check=False
    )
    assert probe.returncode == 0, probe.stderr
    released, mib = probe.stdout.split()
    assert released == "True"
    assert int(mib) >= 50  # of the 60 MiB of holes


def test_only_a_full_load_of_a_large_tree_asks_for_it(
    repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trims: list[int] = []

    def counted(pad: int) -> int:
        trims.append(pad)
        return 1

    monkeypatch.setattr(allocator, "_malloc_trim", lambda: counted)
    monkeypatch.setattr(allocator, "TRIM_MIN_ENTRIES", 3)
    small = repo.commit_files({"a.txt": "a\n"})
    large = repo.commit_files({f"f{n}.txt": f"{n}\n" for n in range(3)})
    derived = repo.commit_files({"f0.txt": "changed\n"})
    with RepositoryStore(cache_dir=tmp_path / "small") as store:
        PinnedRepository.open(repo.git_dir, small, small, store=store)
    assert trims == []  # one entry: below the bound
    with RepositoryStore(cache_dir=tmp_path / "large") as store:
        PinnedRepository.open(repo.git_dir, large, large, store=store)
        assert trims == [0]
        PinnedRepository.open(repo.git_dir, large, derived, store=store)
        assert trims == [0]  # derived from the cached head, not loaded in full
    assert not allocator.release_free_memory(1)  # real: on a tree this small, no walk at all
