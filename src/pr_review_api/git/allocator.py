"""Handing the C allocator's free heap pages back to the system after a tree's full load.

Loading a tree in full reads `git ls-tree` in 1 MiB chunks and frees each once parsed. glibc
serves the first such blocks with mappings of their own and, at each free, raises the size it
maps from (up to 32 MiB), so the later chunks come from the heap. The holes they leave there
are not returned, and Python's small objects, which live in pymalloc's own mappings, cannot
fill them. The snapshot's save then allocates beside them: a 1,000,000-entry tree prepared
whole peaked at 282-305 MiB or at 254 MiB, by the order of a few allocations. `malloc_trim`
after the load returns those holes first: 254 MiB either way. Fixing the mapping threshold
instead (`mallopt`) gave 224 MiB but made every search through the index 10-20% slower (its
buffers mapped and unmapped each time), so it is not done. There is no Python interface to
either, hence `ctypes`; on another C library this does nothing.
"""

from __future__ import annotations

import ctypes
import functools
import sys
from collections.abc import Callable

# Trees smaller than this are loaded in a few milliseconds and leave few holes: not worth a
# walk over the heap.
TRIM_MIN_ENTRIES = 50_000


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        trim = ctypes.CDLL(None).malloc_trim  # the C library the interpreter itself uses
    except (OSError, AttributeError):
        return None
    trim.argtypes = (ctypes.c_size_t,)
    trim.restype = ctypes.c_int
    return trim


def release_free_memory(entries: int) -> bool:
    """After loading a tree of `entries` in full, give the heap's free pages back; whether
    the C library did."""
    trim = _malloc_trim() if entries >= TRIM_MIN_ENTRIES else None
    return trim is not None and bool(trim(0))
