"""One library internal our code relies on, its check, and what a failed check says."""

from __future__ import annotations

import hashlib
import inspect
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent.parent
PATIENCE = 30.0
PYTHON = "Python"  # the standard library, not pinned
WRITTEN_AGAINST = {  # the version of each library our code and these checks were written against
    "flask-socketio": "5.7.0",
    "python-socketio": "5.18.1",
    "python-engineio": "4.15.1",
    "simple-websocket": "1.1.0",
    "werkzeug": "3.1.9",
    "eventlet": "0.41.3",
    "mcp": "2.3.0",
    "uvicorn": "0.54.0",
    PYTHON: "3.11",
}
QUEUE_CAP = "web/transport/client_queue_cap.py"
BATCHED_WRITES = "web/transport/batched_writes.py"
NODELAY = "web/transport/tcp_nodelay.py"
INSTALL = "web/transport/__init__.py"
MESSAGE_QUEUE = "web/cluster/message_queue.py"
Check = Callable[[], None]  # raises, saying what differs


@dataclass(frozen=True)
class Internal:
    """One internal of one library, what our code relies on of it, and how that is checked."""

    library: str  # as requirements.txt names it
    name: str
    relies: str
    ours: str  # the modules to review when it changes
    check: Check


class Checks:
    """A module's checks, each declared by decorating it: `@internal(library, name, ...)`."""

    def __init__(self) -> None:
        self.internals: list[Internal] = []

    def __call__(self, library: str, name: str, ours: str, relies: str) -> Callable[[Check], Check]:
        def register(check: Check) -> Check:
            self.internals.append(Internal(library, name, relies, ours, check))
            return check

        return register


def pins() -> dict[str, str]:
    """The versions requirements.txt pins exactly, by canonical name."""
    found: dict[str, str] = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        requirement = Requirement(text)
        specifiers = list(requirement.specifier)
        if len(specifiers) == 1 and specifiers[0].operator == "==":
            found[canonicalize_name(requirement.name)] = specifiers[0].version
    return found


def installed(library: str) -> str:
    """The version of `library` this process runs."""
    return platform.python_version() if library == PYTHON else version(library)


def problem_with(item: Internal) -> str | None:
    """What differs of `item`, said for whoever upgraded the library; None when nothing does."""
    try:
        item.check()
    except Exception as exc:
        return (
            f"{item.name} changed in {item.library} {installed(item.library)} (our code was "
            f"written against {WRITTEN_AGAINST[item.library]}): {exc or type(exc).__name__}. "
            f"Our code relies on {item.relies}. Review {item.ours}."
        )
    return None


def fingerprint(code: Any) -> str:
    """A short hash of the source of a function or class."""
    return hashlib.sha256(inspect.getsource(code).encode()).hexdigest()[:16]


def same_code(code: Any, recorded: str) -> None:
    """Hold `code` to the source it had at the version written against."""
    found = fingerprint(code)
    assert found == recorded, (
        f"its code is not the pinned version's (fingerprint {found}, recorded {recorded})"
    )


def parameters(function: Callable[..., Any]) -> list[str]:
    """The names of what `function` takes."""
    return list(inspect.signature(function).parameters)


def wait_for(condition: Callable[[], bool], what: str) -> None:
    """Wait until `condition()` holds, failing with `what` after PATIENCE."""
    deadline = time.monotonic() + PATIENCE
    while not condition():
        assert time.monotonic() < deadline, f"{what}, in {PATIENCE:.0f} s"
        time.sleep(0.01)
