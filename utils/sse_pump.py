"""One streamed HTTP response read in a worker thread, so a cancel never waits on the network."""

from __future__ import annotations

import contextlib
import queue
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx2

OpenResponse = Callable[[], AbstractContextManager[Any]]  # the SDK's streaming response
YIELD_SECONDS = 0.005  # CPython's own thread switch interval
NOT_A_STREAM_SHOWN = 300

_END = object()
_CLOSED = object()


class ChunkPump:
    """Reads one streamed response in a worker thread, so a cancel never waits on the network.

    It hands over each SSE `data:` payload as received; parsing it with `json` costs a fifth
    of what building the SDK's typed chunk objects does.
    """

    def __init__(self, open_response: OpenResponse) -> None:
        self._queue: queue.Queue[Any] = queue.Queue()
        self._lock = threading.Lock()
        self._response: httpx2.Response | None = None
        self._closed = False
        threading.Thread(
            target=self._run, args=(open_response,), name="model-stream", daemon=True
        ).start()

    def __iter__(self) -> Iterator[str]:
        while (item := self._queue.get()) is not _END and item is not _CLOSED:
            if isinstance(item, Exception):
                raise item
            yield item

    def close(self) -> None:
        """Stop now (safe from any thread): the iteration ends and the connection is cut."""
        with self._lock:
            self._closed = True
            response = self._response
        self._queue.put(_CLOSED)
        if response is not None:
            _abort(response)

    def _run(self, open_response: OpenResponse) -> None:
        try:
            with open_response() as response:
                with self._lock:
                    self._response = response.http_response
                    closed = self._closed
                if closed:
                    _abort(response.http_response)
                    return
                _require_stream(response.http_response)
                yielded = time.monotonic()
                for line in response.iter_lines():
                    if not line.startswith("data:"):
                        continue  # blank separators, `: keep-alive` comments, `event:` lines
                    data = line[5:].strip()
                    if data == "[DONE]":
                        break
                    self._queue.put(data)
                    if time.monotonic() - yielded > YIELD_SECONDS:
                        time.sleep(0)  # under eventlet, the consumer runs while chunks pour in
                        yielded = time.monotonic()
            self._queue.put(_END)
        except Exception as err:
            self._queue.put(err)


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
    """Cut a response still being read: shutting the socket wakes a blocked read at once."""
    if not response.is_closed:
        network = response.extensions.get("network_stream")
        sock = network.get_extra_info("socket") if network is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(Exception):
        response.close()
