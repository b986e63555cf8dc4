"""requirements.lock is requirements.txt resolved (`make lock`), and `make install` installs it
with --require-hashes: every package that requirements.txt, pyproject.toml's dependencies and
its build requirements ask for is locked at a version they allow; every locked package is
pinned exactly with the hashes of its files; nothing in the lock names a file, a URL or an
index (it installs from PyPI, or whatever index a machine's pip is set to, anywhere). The
libraries whose internals the server reaches are pinned exactly in both files."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
REQUIREMENTS = ROOT / "requirements.txt"
LOCK = ROOT / "requirements.lock"
PYPROJECT = ROOT / "pyproject.toml"
# requirements.txt says, for each, which of its internals the code reaches.
EXACT = (
    "flask-socketio",
    "python-socketio",
    "python-engineio",
    "simple-websocket",
    "werkzeug",
    "eventlet",
)
HASH = re.compile(r"\s--hash=(\S*)")
SHA256 = re.compile(r"sha256:[0-9a-f]{64}")
PINNED = re.compile(r"==\d+(\.\d+)*([a-z]+\d+)?(\.post\d+)?(\.dev\d+)?")  # no `*`, no local part


@dataclass(frozen=True)
class Entry:
    """One package of the lock: its line and the hashes that follow it."""

    line: str
    hashes: tuple[str, ...]


def requirement_lines(text: str) -> list[str]:
    """The lines of a requirements file that say something: comments and blank lines aside."""
    lines = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return [line for line in lines if line]


def lock_entries(text: str) -> list[Entry]:
    """Each entry of a lock, its `\\`-continued lines joined."""
    joined = re.sub(r"\\\n", " ", text)
    return [
        Entry(HASH.sub("", line).strip(), tuple(HASH.findall(line)))
        for line in requirement_lines(joined)
    ]


def entry_problems(entry: Entry) -> tuple[Requirement | None, list[str]]:
    """The entry as a requirement, and what is wrong with it as a line of a hashed lock."""
    try:
        requirement = Requirement(entry.line)
    except InvalidRequirement:
        return None, [f"the lock has a line that is no package pinned by name: {entry.line!r}"]
    problems = []
    if requirement.url or not PINNED.fullmatch(str(requirement.specifier)):
        problems.append(f"{requirement.name} is not pinned to one version: {entry.line!r}")
    if not entry.hashes:
        problems.append(f"{requirement.name} has no hash in the lock")
    problems += [
        f"{requirement.name} has a hash that is not a sha256 one: {h}"
        for h in entry.hashes
        if not SHA256.fullmatch(h)
    ]
    return requirement, problems


def lock_problems(wanted: list[str], lock_text: str) -> list[str]:
    """What keeps the lock from being `wanted` (requirement strings) resolved and hashed."""
    problems = []
    locked: dict[str, list[Requirement]] = {}
    for entry in lock_entries(lock_text):
        requirement, found = entry_problems(entry)
        problems += found
        if requirement is not None:
            locked.setdefault(canonicalize_name(requirement.name), []).append(requirement)
    for line in wanted:
        want = Requirement(line)
        versions = [
            next(iter(r.specifier)).version
            for r in locked.get(canonicalize_name(want.name), [])
            if r.specifier
        ]
        if not versions:
            problems.append(f"{want.name} is asked for ({line}) but not in the lock")
        problems += [
            f"{want.name} is asked for as {line} but the lock holds {version}"
            for version in versions
            if not want.specifier.contains(version, prereleases=True)
        ]
    return problems


def wanted() -> list[str]:
    """What requirements.txt asks for, and pyproject.toml's dependencies and build needs."""
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))
    return [
        *requirement_lines(REQUIREMENTS.read_text(encoding="utf-8")),
        *project["project"]["dependencies"],
        *project["build-system"]["requires"],
    ]


def test_the_lock_is_the_requirements_resolved_and_hashed() -> None:
    lock_text = LOCK.read_text(encoding="utf-8")
    problems = lock_problems(wanted(), lock_text)
    assert not problems, "\n".join([*problems, "run `make lock` and commit requirements.lock"])
    assert "make lock" in "".join(lock_text.splitlines(keepends=True)[:3]), "its header"
    assert len(lock_entries(lock_text)) > len(requirement_lines(REQUIREMENTS.read_text())), (
        "every package the requirements need is locked, not only those they name"
    )


def test_the_libraries_whose_internals_we_reach_are_pinned_exactly() -> None:
    named = {
        canonicalize_name(r.name): r
        for r in map(Requirement, requirement_lines(REQUIREMENTS.read_text(encoding="utf-8")))
    }
    for name in map(canonicalize_name, EXACT):
        assert name in named, f"requirements.txt does not name {name}"
        assert PINNED.fullmatch(str(named[name].specifier)), f"{name} is not pinned exactly"


GOOD_HASH = "--hash=sha256:" + "0" * 64


@pytest.mark.parametrize(
    ("lock_text", "problem"),
    [
        (f"flask==4.0.0 \\\n    {GOOD_HASH}\n", "asked for as flask~=3.1 but the lock holds 4.0.0"),
        ("flask==3.1.3\n    # via -r requirements.txt\n", "flask has no hash"),
        (f"flask>=3.1 \\\n    {GOOD_HASH}\n", "flask is not pinned to one version"),
        (f"flask==3.1.* \\\n    {GOOD_HASH}\n", "flask is not pinned to one version"),
        (f"flask==3.1.3 \\\n    --hash=md5:{'0' * 32}\n", "not a sha256 one"),
        (f"flask @ file:///opt/wheels/flask.whl \\\n    {GOOD_HASH}\n", "not pinned"),
        (f"--find-links /opt/wheels\nflask==3.1.3 \\\n    {GOOD_HASH}\n", "no package"),
        (f"jinja2==3.1.6 \\\n    {GOOD_HASH}\n", "flask is asked for (flask~=3.1) but not in"),
    ],
)
def test_a_lock_that_disagrees_is_found_out(lock_text: str, problem: str) -> None:
    problems = lock_problems(["flask~=3.1"], lock_text)
    assert any(problem in p for p in problems), problems


def test_a_lock_that_agrees_passes() -> None:
    lock_text = (
        "# This file was autogenerated by uv via the following command:\n#    make lock\n"
        f"flask==3.1.3 \\\n    {GOOD_HASH} \\\n    {GOOD_HASH}\n    # via -r requirements.txt\n"
        f"colorama==0.4.6 ; sys_platform == 'win32' \\\n    {GOOD_HASH}\n"
    )
    assert lock_problems(["flask~=3.1", "colorama"], lock_text) == []
