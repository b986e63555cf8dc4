"""A2A tasks as conversations of ours: the a2a SDK's AgentExecutor over the TerminalHub.

Each A2A task is a task in one of our conversations, started through the same
`WebTerminal.start` as the page's `send_message`, so page clients in the room see it live and
it lands in the history. An A2A context is one conversation: a later message in the same
context continues it. The task's events reach the A2A side through the server's event taps.

The A2A server runs on an asyncio loop in its own OS thread; the terminals live in the web
server's world (its threads, or eventlet's green threads). `WebWorld` carries calls across.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from a2a.helpers import new_task
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import Part, TaskState
from google.protobuf.json_format import MessageToDict

from core.main_terminal import TaskBusy
from history.store import ConversationNotFound
from protocol.events import Done, Error, Event, Token, ToolEvent
from utils.errors import AgentError, Invalid
from web.refusals import refusal
from web.state import WebState

T = TypeVar("T")
INBOX_POLL_SECONDS = 0.02
MAX_TEXT_CHARS = 200_000  # as the page's send_message


class WebWorld:
    """Runs calls where the web server's tasks run, on behalf of the A2A loop's thread.

    Threading mode: a thread per call. Eventlet mode: the terminals' locks are green and a
    foreign OS thread must not wait on them, so calls go into an inbox that a green
    background task empties every INBOX_POLL_SECONDS.
    """

    def __init__(self, state: WebState) -> None:
        socketio = state.socketio
        self._start = socketio.start_background_task
        if state.async_mode == "eventlet":
            self._inbox: deque[Callable[[], None]] = deque()
            self._submit: Callable[[Callable[[], None]], Any] = self._inbox.append
            self._start(self._serve_inbox, socketio.sleep)
        else:
            self._submit = self._start

    def _serve_inbox(self, sleep: Callable[[float], None]) -> None:
        while True:
            while self._inbox:
                self._start(self._inbox.popleft())
            sleep(INBOX_POLL_SECONDS)

    async def call(self, function: Callable[[], T]) -> T:
        """Run `function` in the web server's world and await its result."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()

        def settle(value: Any, error: BaseException | None) -> None:
            if future.done():
                return
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(value)

        def job() -> None:
            try:
                result: tuple[Any, BaseException | None] = (function(), None)
            except Exception as exc:  # handed to the awaiting coroutine
                result = (None, exc)
            with contextlib.suppress(RuntimeError):  # the A2A loop already stopped
                loop.call_soon_threadsafe(settle, *result)

        self._submit(job)
        return await future


@dataclass
class _Run:
    conversation_id: str
    updater: TaskUpdater


class ConversationExecutor(AgentExecutor):
    """Runs each A2A task as a task of ours and reports its run as A2A events."""

    def __init__(self, state: WebState, world: WebWorld) -> None:
        self._state = state
        self._world = world
        self._conversations: dict[str, str] = {}  # A2A context id -> our conversation id
        self._runs: dict[str, _Run] = {}  # A2A task id -> the run

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = context.task_id or "", context.context_id or ""
        updater = TaskUpdater(event_queue, task_id, context_id)
        if context.current_task is None:
            history = [context.message] if context.message else []
            await event_queue.enqueue_event(
                new_task(task_id, context_id, TaskState.TASK_STATE_SUBMITTED, history=history)
            )
        text = context.get_user_input().strip()
        events: asyncio.Queue[Event] = asyncio.Queue()
        loop = asyncio.get_running_loop()

        def listen(event: Event) -> None:  # in the task's thread
            with contextlib.suppress(RuntimeError):  # the A2A loop already stopped
                loop.call_soon_threadsafe(events.put_nowait, event)

        try:
            if not text or len(text) > MAX_TEXT_CHARS:
                raise Invalid(f"send the task as text of 1 to {MAX_TEXT_CHARS:,} characters")
            begin = functools.partial(self._begin, text, context_id, _agent_asked(context), listen)
            conversation_id = await self._world.call(begin)
        except AgentError as exc:  # a busy conversation, an unknown agent, no model, ...
            error = refusal(exc, "an A2A task's start")
            await updater.update_status(
                TaskState.TASK_STATE_REJECTED,
                _note(updater, error["message"]),
                metadata={"error": dict(error)},
            )
            return
        self._runs[task_id] = _Run(conversation_id, updater)
        try:
            await updater.update_status(
                TaskState.TASK_STATE_WORKING, metadata={"conversation_id": conversation_id}
            )
            await _relay(events, updater)
        finally:
            self._runs.pop(task_id, None)
            self._state.taps.unsubscribe(conversation_id, listen)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Stop our task (its cancel token), then say so; the SDK then cancels `execute`."""
        run = self._runs.get(context.task_id or "")
        if run is None:
            return
        await self._world.call(lambda: self._state.hub.get(run.conversation_id).cancel())
        with contextlib.suppress(RuntimeError):  # the run reached its end meanwhile
            await run.updater.cancel(_note(run.updater, "cancelled by the A2A client"))

    def _begin(
        self, text: str, context_id: str, agent: str | None, listen: Callable[[Event], None]
    ) -> str:
        """Start the task like the page's send_message; returns its conversation id."""
        state = self._state
        known = self._conversations.get(context_id)
        try:
            record = state.hub.send(
                known,
                text,
                agent=agent,
                on_begun=lambda begun: state.taps.subscribe(begun["conversation_id"], listen),
                run_in_background=state.socketio.start_background_task,
            )
        except TaskBusy:
            raise TaskBusy("a task is already running in this context's conversation") from None
        except ConversationNotFound:
            raise ConversationNotFound("this context's conversation no longer exists") from None
        self._conversations[context_id] = record["conversation_id"]
        return str(record["conversation_id"])


class _Answer:
    """The task's answer as one artifact: streamed in chunks, then sent whole at the end."""

    def __init__(self, updater: TaskUpdater) -> None:
        self._updater = updater
        self._id = uuid.uuid4().hex
        self._text: list[str] = []
        self._pending: list[str] = []
        self._message_id: str | None = None

    def add(self, token: Token) -> None:
        if self._message_id not in (None, token.message_id):
            self._pending.append("\n\n")  # a later model message of the same task
        self._message_id = token.message_id
        self._pending.append(token.text)

    async def flush(self) -> None:
        """Send what arrived since the last chunk."""
        if not self._pending:
            return
        chunk = "".join(self._pending)
        self._pending.clear()
        await self._updater.add_artifact(
            [Part(text=chunk)],
            artifact_id=self._id,
            name="answer",
            append=bool(self._text),
            last_chunk=False,
        )
        self._text.append(chunk)

    async def close(self) -> None:
        """Replace the chunks by the whole text (what GetTask returns: one part)."""
        await self.flush()
        if self._text:
            await self._updater.add_artifact(
                [Part(text="".join(self._text))],
                artifact_id=self._id,
                name="answer",
                append=False,
                last_chunk=True,
            )


async def _relay(events: asyncio.Queue[Event], updater: TaskUpdater) -> None:
    """Turn our task's events into A2A events until its `done`."""
    answer = _Answer(updater)
    error: str | None = None
    while True:
        batch = [await events.get()]
        while not events.empty():  # tokens that arrived together go out as one chunk
            batch.append(events.get_nowait())
        for event in batch:
            if event.depth:  # a sub-agent's: only its report comes back, as a tool result
                continue
            if isinstance(event, Token):
                answer.add(event)
            elif isinstance(event, ToolEvent) and event.phase in ("end", "approval"):
                await answer.flush()
                note = (
                    f"calling {event.tool}"
                    if event.phase == "end"
                    else f"{event.tool} waits for approval in the web page"
                )
                await updater.update_status(TaskState.TASK_STATE_WORKING, _note(updater, note))
            elif isinstance(event, Error):
                error = event.message
            elif isinstance(event, Done):
                await answer.close()
                await _finish(updater, event, error)
                return
        await answer.flush()


async def _finish(updater: TaskUpdater, done: Done, error: str | None) -> None:
    if done.reason == "complete":
        await updater.complete()
    elif done.reason == "cancelled":
        with contextlib.suppress(RuntimeError):  # cancel() may have said it already
            await updater.cancel(_note(updater, "stopped"))
    elif done.reason == "max_iterations":
        await updater.failed(_note(updater, "stopped: too many model calls without an answer"))
    else:
        await updater.failed(_note(updater, error or "the task failed"))


def _note(updater: TaskUpdater, text: str) -> Any:
    return updater.new_agent_message([Part(text=text)])


def _agent_asked(context: RequestContext) -> str | None:
    """The agent (one of the card's skills) named in the request's or message's metadata."""
    wanted = context.metadata.get("agent")
    if wanted is None and context.message is not None:
        wanted = MessageToDict(context.message.metadata).get("agent")
    return wanted if isinstance(wanted, str) else None
