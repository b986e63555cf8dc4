"""A transport whose read stream says when the server closed its end.

The SDK notices the end (EOF on a stdio server's output, an SSE stream that stopped) only
inside its session; this lets the connection's holder see it too, so a server that died
while idle is known to be gone before the next call, not by that call failing.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio


class WatchedStream:
    """A transport's read stream that calls `on_end` when it has no more messages."""

    def __init__(self, stream: Any, on_end: Callable[[], None]) -> None:
        self._stream = stream
        self._on_end = on_end

    @property
    def last_context(self) -> Any:
        """The sender's context of the last message, where the inner stream keeps one."""
        return getattr(self._stream, "last_context", None)

    async def receive(self) -> Any:
        """The next message; EndOfStream (or ClosedResourceError) once the end came."""
        try:
            return await self._stream.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._on_end()
            raise

    def __aiter__(self) -> WatchedStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        """Close the inner stream."""
        await self._stream.aclose()

    async def __aenter__(self) -> WatchedStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


@contextlib.asynccontextmanager
async def watched(transport: Any, on_end: Callable[[], None]) -> AsyncIterator[tuple[Any, Any]]:
    """`transport` (an SDK client transport) whose read stream calls `on_end` at its end."""
    async with transport as (read, write):
        yield WatchedStream(read, on_end), write
