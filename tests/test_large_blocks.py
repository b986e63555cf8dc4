"""utils/large_blocks.py: with glibc's thresholds raised, a large block freed and made again
reuses its pages instead of faulting fresh, zeroed ones in. Each variant runs in an
interpreter of its own (the thresholds are per process), counting its minor page faults."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.kit.server import REPO

# What a flood does to the heap: a 256 KiB string made and freed, again and again.
CHURN = """
import resource, sys
from utils.large_blocks import keep_large_blocks
if sys.argv[1] == "keep" and not keep_large_blocks():
    sys.exit(3)
text = "x" * (256 * 1024)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(200):
    quoted = '"' + text + '"'
    del quoted
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def page_faults(variant: str) -> int:
    done = subprocess.run([sys.executable, "-c", CHURN, variant], cwd=REPO, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    if done.returncode == 3:
        pytest.skip("the C library here is not glibc: its malloc has no such thresholds")
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


def test_large_blocks_freed_and_made_again_reuse_their_pages() -> None:
    kept, default = page_faults("keep"), page_faults("default")
    print(f"minor page faults over 200 blocks of 256 KiB: {kept} kept, {default} by default")
    assert kept * 10 < default
