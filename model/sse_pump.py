"""One streamed HTTP response's SSE payloads, read so that a cancel never waits on the network."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx2

OpenResponse = Callable[[], AbstractContextManager[Any]]  # the SDK's streaming response
NOT_A_STREAM_SHOWN = 300


class ChunkPump:
    """Yields each SSE `data:` payload of one streamed response as received.

    The request is sent and its headers awaited in a helper thread, so a cancel before the
    first byte ends the iteration at once; the body is then read in the consumer's own thread,
    as a thread hand-off per delta would cost more than everything else a delta does. A
    `close` from any thread shuts the socket, which wakes a blocked read, and the iteration
    ends quietly. Parsing each payload with `json` costs a fifth of what building the SDK's
    typed chunk objects does, so the payloads are handed over as text.

    `ended` says the stream's own end, `data: [DONE]`, arrived (a connection closed before it
    is a stream cut short); `payloads` counts the payloads before it.
    """

    def __init__(self, open_response: OpenResponse) -> None:
        self._lock = threading.Lock()
        self._opened = threading.Event()  # the response or an error arrived, or close()
        self._manager: AbstractContextManager[Any] | None = None
        self._response: Any = None
        self._error: Exception | None = None
        self._closed = False
        self._finished = False  # the consumer is done: a late response is the opener's to end
        self.ended = False
        self.payloads = 0
        threading.Thread(
            target=self._open, args=(open_response,), name="model-request", daemon=True
        ).start()

    def __iter__(self) -> Iterator[str]:
        try:
            self._opened.wait()
            if self._closed:
                return
            if self._error is not None:
                raise self._error
            try:
                for data in _payloads(self._response):
                    if data == "[DONE]":
                        self.ended = True
                        return
                    self.payloads += 1
                    yield data
            except Exception:
                if not self._closed:  # a read cut by close() is how a cancel ends it
                    raise
        finally:
            self._finish()

    def close(self) -> None:
        """Stop now (safe from any thread): the iteration ends and the connection is cut."""
        with self._lock:
            self._closed = True
            response = self._response
        self._opened.set()
        if response is not None:
            _abort(response.http_response)

    def _open(self, open_response: OpenResponse) -> None:
        try:
            manager = open_response()
            response = manager.__enter__()
        except Exception as err:
            self._error = err
            self._opened.set()
            return
        with self._lock:
            late = self._finished or self._closed
            if not late:
                self._manager, self._response = manager, response
        if late:
            _end(manager, response)
        self._opened.set()

    def _finish(self) -> None:
        with self._lock:
            self._finished = True
            manager, response = self._manager, self._response
            self._manager = None
        if manager is not None:
            _end(manager, response)


def _payloads(response: Any) -> Iterator[str]:
    _require_stream(response.http_response)
    for line in response.iter_lines():
        if not line.startswith("data:"):
            continue  # blank separators, `: keep-alive` comments, `event:` lines
        yield line[5:].strip()


def _end(manager: AbstractContextManager[Any], response: Any) -> None:
    _abort(response.http_response)
    with contextlib.suppress(Exception):
        manager.__exit__(None, None, None)


class NotAStream(ValueError):
    """The API answered 200 with something other than an event stream."""


def _require_stream(response: httpx2.Response) -> None:
    """Refuse a whole JSON reply or a page (a proxy's login page, say), showing its start."""
    kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind not in ("application/json", "text/html", "text/plain"):
        return  # text/event-stream, or a server that does not say: read it as a stream
    head = response.read()[:NOT_A_STREAM_SHOWN].decode("utf-8", "replace")
    what = "a whole JSON reply" if kind == "application/json" else f"a {kind} page"
    raise NotAStream(
        f"the model API answered with {what} instead of an event stream (is the base URL "
        f"right, and does the server support streaming?): {' '.join(head.split())}"
    )


def _abort(response: httpx2.Response) -> None:
    """Cut a response still being read: shutting the socket wakes a blocked read at once.

    The socket is not closed here: under eventlet a close from another green thread leaves
    the reader waiting forever, so the reader closes it when it wakes (`_end`)."""
    if response.is_closed:
        return
    network = response.extensions.get("network_stream")
    sock = network.get_extra_info("socket") if network is not None else None
    if sock is None:
        with contextlib.suppress(Exception):
            response.close()
        return
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
