"""Large blocks of memory kept for reuse, where the C library is glibc.

A flood of process output makes megabytes of short-lived strings and bytes a second: each
batch read, decoded, encoded as JSON, framed and written is a fresh block of a few hundred
KiB, freed a moment later. glibc serves such a block with a new mapping (above its mmap
threshold, 128 KiB until it adapts) or from the top of the heap, which it gives back to the
system once 128 KiB lie free there (until it adapts); either way the next block's pages
fault in and are zeroed again: copying a 256 KiB string took 330 µs where it takes 18 µs
with its pages kept. Raising both thresholds keeps them in the process, for at most
TRIM_BYTES of free memory at a heap's top.
"""

from __future__ import annotations

import ctypes
import logging

log = logging.getLogger(__name__)

M_TRIM_THRESHOLD = -1  # glibc's malloc.h
M_MMAP_THRESHOLD = -3
MMAP_BYTES = 4 * 1024 * 1024  # blocks up to this size come from the heap, not a new mapping
TRIM_BYTES = 8 * 1024 * 1024  # free memory at the heap's top kept before it is given back


def keep_large_blocks() -> bool:
    """Raise glibc's thresholds; whether it was done (not glibc: nothing)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library the interpreter runs on
    except (OSError, AttributeError):  # one without mallopt
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    done = mallopt(M_MMAP_THRESHOLD, MMAP_BYTES) == 1 and mallopt(M_TRIM_THRESHOLD, TRIM_BYTES) == 1
    if not done:
        log.debug("glibc refused the malloc thresholds")
    return done
