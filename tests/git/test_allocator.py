"""git/allocator.py: once a store is made, a large buffer freed leaves no heap behind.

Counted in a fresh interpreter through glibc's own `mallinfo2` (the blocks it serves with a
mapping of their own): a 1 MiB buffer allocated after another was freed is mapped again with
the threshold fixed; without it, glibc raised its threshold at the first free and serves the
second from the heap. Linux with glibc only.
"""

from __future__ import annotations

import ctypes
import subprocess
import sys

import pytest

_PROBE = """
import ctypes, sys

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]

mallinfo2 = ctypes.CDLL(None).mallinfo2
mallinfo2.restype = MallInfo2
if sys.argv[1] == "store":
    from pr_review_api.git.store import RepositoryStore
    RepositoryStore().close()
first = bytearray(1024 * 1024)
del first  # freed: glibc raises its threshold to 1 MiB unless it is fixed
before = mallinfo2().hblks
second = bytearray(1024 * 1024)
print(mallinfo2().hblks - before)
"""


def glibc_with_mallinfo2() -> bool:
    try:
        ctypes.CDLL(None).mallinfo2  # noqa: B018  (a lookup: present or AttributeError)
    except (OSError, AttributeError):
        return False
    return sys.platform.startswith("linux")


@pytest.mark.skipif(not glibc_with_mallinfo2(), reason="glibc's mallinfo2 is needed to count")
@pytest.mark.parametrize(("made", "mapped"), [("store", "1"), ("nothing", "0")])
def test_a_large_buffer_is_mapped_again_once_a_store_is_made(made: str, mapped: str) -> None:
    probe = subprocess.run(
        [sys.executable, "-c", _PROBE, made], capture_output=True, text=True, check=False
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip() == mapped
