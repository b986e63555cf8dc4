"""Every library internal the server relies on, checked for the shape our code expects.

requirements.txt pins exactly each library whose internals our code reaches: a new release may
change a private attribute, a method we replace or a class we subclass without a word. Each
internal (tests/internals/) is checked as our code uses it: run where that is cheap (a real
Engine.IO server's queues and upgrade, a real Werkzeug and eventlet server, a real WebSocket
over a socket pair), inspected where it is not (attributes, signatures); a function we rely on
beyond its shape is held to the code it had at the pinned version (a fingerprint of its
source).

A failure says which internal changed, in which installed version, what our code relies on
and which of our modules to review. After the review: the new pin in requirements.txt (then
`make lock`), the version in tests/internals/kit.py's WRITTEN_AGAINST, and the new fingerprint
or a check that says what the code now relies on.
"""

from __future__ import annotations

import queue
from collections.abc import Callable
from importlib.metadata import version
from typing import Any

import engineio
import engineio.socket
import pytest
import simple_websocket
import werkzeug.serving
from packaging.utils import canonicalize_name
from socketio.packet import Packet
from wsproto.events import TextMessage

from tests.internals import connections, sdks, socketio_stack
from tests.internals.kit import PYTHON, WRITTEN_AGAINST, Internal, pins, problem_with

INTERNALS = [
    *socketio_stack.internal.internals,
    *connections.internal.internals,
    *sdks.internal.internals,
]
BY_NAME = {item.name: item for item in INTERNALS}


@pytest.mark.parametrize("item", INTERNALS, ids=[item.name for item in INTERNALS])
def test_the_internal_has_the_shape_our_code_expects(item: Internal) -> None:
    problem = problem_with(item)
    assert problem is None, problem


def test_every_library_reached_is_pinned_at_the_version_checked_and_installed_at_it() -> None:
    assert {item.library for item in INTERNALS} == WRITTEN_AGAINST.keys()
    pinned = pins()
    for library, checked in WRITTEN_AGAINST.items():
        if library == PYTHON:
            continue
        pin = pinned.get(canonicalize_name(library))
        assert pin is not None, (
            f"our code reaches internals of {library}: requirements.txt must pin it exactly (==)"
        )
        assert pin == checked, (
            f"requirements.txt pins {library}=={pin}, and our code was written against "
            f"{checked}: review the modules tests/internals/ names for {library} against {pin}, "
            "then record it in WRITTEN_AGAINST"
        )
        assert version(library) == pin, (
            f"requirements.txt pins {library}=={pin}, but {version(library)} is installed: "
            "make install"
        )


def other_handler(self: Any, ws: Any) -> None:
    """A _websocket_handler of another version: the same parameters, other code."""
    ws.send("hello")


def send_with_sendall(self: Any, data: Any) -> None:
    """simple_websocket's send, had it written with `sendall`."""
    self.sock.sendall(self.ws.send(TextMessage(data=str(data))))


BREAKS: list[tuple[str, Callable[[pytest.MonkeyPatch], None], str]] = [
    (
        "engineio.socket.Socket._websocket_handler",
        lambda patch: patch.delattr(engineio.socket.Socket, "_websocket_handler"),
        "has no attribute '_websocket_handler'",
    ),
    (
        "engineio.socket.Socket._websocket_handler",
        lambda patch: patch.setattr(engineio.socket.Socket, "_websocket_handler", other_handler),
        "its code is not the pinned version's",
    ),
    (
        "engineio.Server._async",
        lambda patch: patch.setattr(
            engineio.base_server.BaseServer, "create_queue", lambda *_, **__: queue.Queue()
        ),
        "create_queue() made a Queue",
    ),
    (
        "socketio.packet.Packet.data_is_binary",
        lambda patch: patch.setattr(Packet, "data_is_binary", staticmethod(lambda data: False)),
        "it is a staticmethod",
    ),
    (
        "simple_websocket.ws.Base.sock, ws and connected",
        lambda patch: patch.setattr(simple_websocket.ws.Base, "send", send_with_sendall),
        "send did not write through `sock.send`",
    ),
    (
        "werkzeug.serving.WSGIRequestHandler.run_wsgi's errors",
        lambda patch: patch.setattr(werkzeug.serving, "connection_dropped_errors", (TimeoutError,)),
        "a ConnectionError was answered: b'HTTP/1.1 500",
    ),
]


@pytest.mark.parametrize(
    ("name", "change", "said"), BREAKS, ids=[f"{n}: {said}" for n, _, said in BREAKS]
)
def test_an_internal_that_changed_fails_naming_it_the_version_and_our_module(
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    change: Callable[[pytest.MonkeyPatch], None],
    said: str,
) -> None:
    item = BY_NAME[name]
    change(monkeypatch)
    problem = problem_with(item)
    assert problem is not None, f"{name} changed, and its check did not see it"
    assert problem.startswith(f"{name} changed in {item.library} {version(item.library)} ")
    assert f"written against {WRITTEN_AGAINST[item.library]}" in problem, problem
    assert said in problem and f"Review {item.ours}." in problem, problem
