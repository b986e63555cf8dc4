"""The unified diffs approvals, held changes and proposals show (modules/workspace/text_files.py):
right whatever the texts, and made in time bounded by their size, never by its square."""

from __future__ import annotations

import random
import re
import time

import pytest

from modules.workspace.text_files import CONTEXT, DIFF_PAIRS, split_keep_ends, unified_diff

HUNK = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def applied(old: str, diff: str) -> str:
    """`old` patched by `diff` (as `patch` would), each hunk checked against it."""
    lines, out, at = split_keep_ends(old), [], 0
    for hunk in re.split(r"(?m)^(?=@@ )", "".join(diff.splitlines(True)[2:])):
        if not hunk:
            continue
        header, *body = hunk.splitlines(True)
        match = HUNK.match(header)
        assert match is not None, header
        start = int(match[1]) - (match[2] != "0")
        out += lines[at:start]
        at = start
        for line in body:
            kind, text = line[0], line[1:]
            if kind in " -":
                assert lines[at] == text, (at, lines[at], text)
                at += 1
            if kind in " +":
                out.append(text)
    return "".join(out + lines[at:])


def alternating(count: int) -> tuple[str, str]:
    """Every other line changed: difflib's worst shape (20,000 lines took a minute)."""
    old = "".join(f"line {i}\n" for i in range(count))
    new = "".join(f"line {i}\n" if i % 2 else f"changed {i}\n" for i in range(count))
    return old, new


@pytest.mark.parametrize("seed", range(5))
def test_the_diff_patches_the_old_text_into_the_new(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(400):
        old = [rng.choice("abcdefg") + "\n" for _ in range(rng.randint(0, 40))]
        new = old[:]
        for _ in range(rng.randint(1, 5)):
            where = rng.randint(0, len(new))
            if rng.random() < 0.5 and where < len(new):
                del new[where]
            else:
                new.insert(where, rng.choice("abxyz") + "\n")
        before, after = "".join(old), "".join(new)
        diff = unified_diff(before, after, "f")
        assert diff == "" if before == after else applied(before, diff) == after, diff


def test_a_change_far_into_a_file_is_numbered_where_it_is() -> None:
    old = "".join(f"{i}\n" for i in range(1, 10_001))
    diff = unified_diff(old, old.replace("\n5000\n", "\nfive thousand\n"), "f")
    assert diff.splitlines()[2:5] == ["@@ -4997,7 +4997,7 @@", " 4997", " 4998"]
    assert applied(old, diff) == old.replace("\n5000\n", "\nfive thousand\n")


def test_a_worst_case_is_one_hunk_made_in_linear_time() -> None:
    old, new = alternating(200_000)  # 2.3 MB a side
    started = time.monotonic()
    diff = unified_diff(old, new, "f")
    took = time.monotonic() - started
    assert took < 10, f"the diff took {took:.1f} s"
    header = diff.splitlines()[2]
    assert header.startswith("@@ -1,200000 +1,200000 @@ too long to compare line by line")
    assert applied(old, diff) == new
    edited_ends = old.replace("line 1\n", "LINE 1\n", 1) + "one more\n"  # two changes far apart
    assert applied(old, unified_diff(old, edited_ends, "f")) == edited_ends


def test_a_change_within_the_bound_is_still_compared_line_by_line() -> None:
    side = int(DIFF_PAIRS**0.5)
    old, new = alternating(side)
    started = time.monotonic()
    diff = unified_diff(old, new, "f")
    assert time.monotonic() - started < 10
    assert "too long" not in diff and diff.count("\n line ") >= side // 2 - CONTEXT
    assert applied(old, diff) == new
