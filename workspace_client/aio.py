"""`AsyncClient`: the asyncio form of `Client`, a thin layer over it.

    async with await AsyncClient.connect("http://127.0.0.1:5000", token="...") as client:
        async for event in client.run("List the files"):
            ...

How it works: the sync `Client` keeps its own reader thread. Each op runs in a worker thread
(`asyncio.to_thread`), so the event loop never blocks on an answer. `events()` subscribes a
handler that hands each event to an `asyncio.Queue` through `loop.call_soon_threadsafe`, so
events arrive in the loop in the order the reader delivered them. `on_approval` may be a
coroutine function: it then runs on the loop, and the reader's approvals thread waits for it.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from protocol.events import Done, Event, ToolEvent
from protocol.processes import BackgroundProcess, ProcessOutput
from workspace_client.client import ApprovalAnswer, Client, Started
from workspace_client.connection import Disconnected

AsyncApprovalCallback = Callable[[ToolEvent], ApprovalAnswer | Awaitable[ApprovalAnswer]]


class AsyncClient:
    """The asyncio form of `Client` (see the module); make one with `await AsyncClient.connect`."""

    def __init__(self, client: Client) -> None:
        self.sync = client

    @classmethod
    async def connect(
        cls,
        url: str,
        token: str | None = None,
        *,
        on_approval: AsyncApprovalCallback | None = None,
        **options: Any,
    ) -> AsyncClient:
        """Connect as `Client(url, token, on_approval=..., batch_deltas=..., timeout=...)`."""
        loop = asyncio.get_running_loop()
        answer = None if on_approval is None else _on_loop(loop, on_approval)
        client = await asyncio.to_thread(
            functools.partial(Client, url, token, on_approval=answer, **options)
        )
        return cls(client)

    async def send(self, text: str, conversation_id: str | None = None, **options: Any) -> Started:
        return await asyncio.to_thread(self.sync.send, text, conversation_id, **options)

    async def events(self, conversation_id: str) -> AsyncIterator[Event]:
        """As `Client.events`: the conversation's events up to its task's top-level `Done`."""
        loop = asyncio.get_running_loop()
        arrived: asyncio.Queue[Event | BaseException] = asyncio.Queue()
        iterator = self.sync.events(conversation_id)

        def pump() -> None:
            try:
                for event in iterator:
                    loop.call_soon_threadsafe(arrived.put_nowait, event)
            except (Disconnected, ConnectionError) as exc:
                loop.call_soon_threadsafe(arrived.put_nowait, exc)

        pumping = asyncio.ensure_future(asyncio.to_thread(pump))
        try:
            while True:
                item = await arrived.get()
                if isinstance(item, BaseException):
                    raise item
                yield item
                if isinstance(item, Done) and item.depth is None:
                    return
        finally:
            if not pumping.done():
                pumping.cancel()

    async def run(
        self, text: str, conversation_id: str | None = None, **options: Any
    ) -> AsyncIterator[Event]:
        started = await self.send(text, conversation_id, **options)
        async for event in self.events(started.conversation_id):
            yield event

    async def cancel(self, conversation_id: str) -> None:
        await asyncio.to_thread(self.sync.cancel, conversation_id)

    async def approve(
        self, conversation_id: str, call_id: str, approved: bool, *, always: bool = False
    ) -> list[str]:
        return await asyncio.to_thread(
            functools.partial(self.sync.approve, conversation_id, call_id, approved, always=always)
        )

    async def conversations(self, query: str | None = None) -> list[dict[str, Any]]:
        return await asyncio.to_thread(self.sync.conversations, query)

    async def get_conversation(self, conversation_id: str) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync.get_conversation, conversation_id)

    async def rename_conversation(self, conversation_id: str, title: str) -> str:
        return await asyncio.to_thread(self.sync.rename_conversation, conversation_id, title)

    async def delete_conversation(self, conversation_id: str) -> None:
        await asyncio.to_thread(self.sync.delete_conversation, conversation_id)

    async def undo(self, conversation_id: str, message_id: str | None = None) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync.undo, conversation_id, message_id)

    async def status(self, conversation_id: str | None = None) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync.status, conversation_id)

    async def settings(self) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync.settings)

    async def set_settings(self, **changes: Any) -> dict[str, Any]:
        return await asyncio.to_thread(lambda: self.sync.set_settings(**changes))

    async def list_files(self, path: str = "") -> list[dict[str, Any]]:
        return await asyncio.to_thread(self.sync.list_files, path)

    async def read_file(self, path: str) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync.read_file, path)

    async def upload(self, source: str | Path, name: str | None = None) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync.upload, source, name)

    async def export_conversation(self, conversation_id: str, fmt: str = "md") -> str:
        return await asyncio.to_thread(self.sync.export_conversation, conversation_id, fmt)

    async def open_file(self, path: str) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync.open_file, path)

    async def save_file(
        self, path: str, content: str, base_version: str | None, *, confirmed: bool = False
    ) -> dict[str, Any]:
        return await asyncio.to_thread(
            functools.partial(self.sync.save_file, confirmed=confirmed), path, content, base_version
        )

    async def list_processes(self, conversation_id: str) -> list[BackgroundProcess]:
        return await asyncio.to_thread(self.sync.list_processes, conversation_id)

    async def process_output(
        self, conversation_id: str, process_id: str, offset: int = 0
    ) -> ProcessOutput:
        return await asyncio.to_thread(
            self.sync.process_output, conversation_id, process_id, offset
        )

    async def stop_process(self, conversation_id: str, process_id: str) -> BackgroundProcess:
        return await asyncio.to_thread(self.sync.stop_process, conversation_id, process_id)

    async def restart_process(self, conversation_id: str, process_id: str) -> BackgroundProcess:
        return await asyncio.to_thread(self.sync.restart_process, conversation_id, process_id)

    async def open_app(
        self, conversation_id: str, process_id: str | None = None, port: int | None = None
    ) -> str:
        return await asyncio.to_thread(self.sync.open_app, conversation_id, process_id, port)

    async def open_terminal(self, conversation_id: str, rows: int = 24, cols: int = 80) -> str:
        return await asyncio.to_thread(self.sync.open_terminal, conversation_id, rows, cols)

    async def terminal_input(self, conversation_id: str, terminal_id: str, data: str) -> int:
        return await asyncio.to_thread(self.sync.terminal_input, conversation_id, terminal_id, data)

    async def resize_terminal(
        self, conversation_id: str, terminal_id: str, rows: int, cols: int
    ) -> None:
        await asyncio.to_thread(self.sync.resize_terminal, conversation_id, terminal_id, rows, cols)

    async def terminal_scrollback(self, conversation_id: str, terminal_id: str) -> str:
        return await asyncio.to_thread(self.sync.terminal_scrollback, conversation_id, terminal_id)

    async def close_terminal(self, conversation_id: str, terminal_id: str) -> None:
        await asyncio.to_thread(self.sync.close_terminal, conversation_id, terminal_id)

    async def list_terminals(self, conversation_id: str) -> list[str]:
        return await asyncio.to_thread(self.sync.list_terminals, conversation_id)

    async def call(self, op: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync.call, op, payload)

    async def close(self) -> None:
        await asyncio.to_thread(self.sync.close)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


def _on_loop(
    loop: asyncio.AbstractEventLoop, callback: AsyncApprovalCallback
) -> Callable[[ToolEvent], ApprovalAnswer]:
    """The approvals thread's callback: a coroutine's answer awaited on `loop`."""

    def answer(event: ToolEvent) -> ApprovalAnswer:
        if inspect.iscoroutinefunction(callback):
            return asyncio.run_coroutine_threadsafe(callback(event), loop).result()
        result = callback(event)
        assert not inspect.isawaitable(result)
        return result

    return answer
