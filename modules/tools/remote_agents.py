"""The `call_agent` tool: the remote A2A agents named in the settings, called with streaming.

The tool exists only when at least one remote agent is configured. Its description lists them
by name, with the description from the settings or from their Agent Cards (fetched on first use
in the background, waited for a few seconds; a card that failed is fetched again later). The
a2a SDK is imported only when a card is fetched or a call made.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from modules.results import ToolError
from modules.tools.registry import Tool
from modules.tools.tool_context import ToolContext
from utils.cancel import TaskCancelled
from utils.settings import RemoteAgent

if TYPE_CHECKING:
    from a2a.client import Client
    from a2a.types import StreamResponse

log = logging.getLogger(__name__)

CARD_TIMEOUT_SECONDS = 5.0  # the first model call waits this long for the cards
CARD_RETRY_SECONDS = 60.0  # a card that could not be read is tried again after this
CARD_TEXT_CHARS = 600  # of a remote card's description and skills, in our tool description
CALL_GRACE_SECONDS = 15.0  # past a remote's timeout, to cancel its task and report
CANCEL_REMOTE_SECONDS = 5.0
CONNECT_SECONDS = 10.0

CALL_AGENT_DOC = """Send a task to a remote agent (over the A2A protocol) and return its answer.

Its reply streams into this call's output as it is written. The remote agent does not see this
conversation: make the message self-contained. Later calls to the same agent from this
conversation continue the same remote conversation."""


class CallAgentArgs(BaseModel):
    name: str = Field(description="The remote agent's name, as listed in this tool's description.")
    message: str = Field(
        min_length=1,
        max_length=100_000,
        description="What to ask it: the whole task, with everything it needs to know.",
    )


@dataclass
class _Reply:
    """What a remote task reported so far."""

    task_id: str = ""
    context_id: str = ""
    state: str = "TASK_STATE_SUBMITTED"
    note: str = ""  # the text of its last status message
    text: str = ""  # its answer: the artifacts' text, or a direct message's
    shown: list[str] = field(default_factory=list)  # what went to the live output


class RemoteAgents:
    """The configured remote agents; a ToolSource offering `call_agent` (modules.tools.registry)."""

    def __init__(
        self, agents: list[RemoteAgent], *, card_timeout: float = CARD_TIMEOUT_SECONDS
    ) -> None:
        self._agents = {agent.name: agent for agent in agents}
        self._card_timeout = card_timeout
        self._descriptions = {a.name: a.description for a in agents if a.description}
        self._card_problems: dict[str, str] = {}
        self._lock = threading.Lock()
        self._fetcher: threading.Thread | None = None
        self._attempted = float("-inf")
        self._contexts: dict[tuple[str, str], str] = {}  # (conversation, agent) -> remote context
        self._tool: Tool | None = None

    # --- the ToolSource ---------------------------------------------------------------

    def tools(self) -> Mapping[str, Tool]:
        """`call_agent`, described with what is known of the remote agents now."""
        self._refresh_cards()
        description = self.description()
        with self._lock:
            if self._tool is None or self._tool.summary != description:
                limit = max(agent.timeout for agent in self._agents.values()) + CALL_GRACE_SECONDS
                self._tool = Tool(
                    "call_agent",
                    self.call_agent,
                    CallAgentArgs,
                    read_only=False,
                    asks="always",
                    summary=description,
                    time_limit=limit,
                )
            return {"call_agent": self._tool}

    def description(self) -> str:
        """The tool's description: what it does, then each remote agent and what it does."""
        lines = []
        for name in self._agents:
            known = self._descriptions.get(name)
            if known is None:
                problem = self._card_problems.get(name, "not fetched yet")
                known = f"(its Agent Card could not be read: {problem})"
            lines.append(f"- {name}: {known}")
        return CALL_AGENT_DOC + "\n\nThe remote agents:\n" + "\n".join(lines)

    # --- Agent Cards ------------------------------------------------------------------

    def _refresh_cards(self) -> None:
        """Fetch the missing cards in the background; the first time, wait for them a while."""
        with self._lock:
            missing = [name for name in self._agents if name not in self._descriptions]
            busy = self._fetcher is not None and self._fetcher.is_alive()
            due = time.monotonic() - self._attempted >= CARD_RETRY_SECONDS
            if not missing or busy or not due:
                return
            first = self._fetcher is None
            self._attempted = time.monotonic()
            self._fetcher = threading.Thread(
                target=self._fetch_cards, args=(missing,), name="a2a-cards", daemon=True
            )
            self._fetcher.start()
            fetcher = self._fetcher
        if first:
            fetcher.join(self._card_timeout)

    def _fetch_cards(self, names: list[str]) -> None:
        import asyncio

        async def fetch_all() -> list[Any]:
            return await asyncio.gather(
                *(self._card_text(name) for name in names), return_exceptions=True
            )

        for name, result in zip(names, asyncio.run(fetch_all()), strict=True):
            with self._lock:
                if isinstance(result, str):
                    self._descriptions[name] = result
                    self._card_problems.pop(name, None)
                else:
                    self._card_problems[name] = _problem(result)
            if not isinstance(result, str):
                log.warning(
                    "remote agent card not read",
                    extra={"fields": {"agent": name, "error": _problem(result)}},
                )

    async def _card_text(self, name: str) -> str:
        import asyncio

        import httpx
        from a2a.client import A2ACardResolver

        remote = self._agents[name]
        async with httpx.AsyncClient(timeout=self._card_timeout) as http:
            card = await asyncio.wait_for(
                A2ACardResolver(http, remote.url).get_agent_card(), self._card_timeout
            )
        skills = "; ".join(f"{s.name}: {s.description}" for s in card.skills)
        text = (
            " ".join(f"{card.description} Skills: {skills}".split())
            if skills
            else " ".join(card.description.split())
        )
        return text if len(text) <= CARD_TEXT_CHARS else text[: CARD_TEXT_CHARS - 1] + "…"

    # --- the call ---------------------------------------------------------------------

    def call_agent(self, ctx: ToolContext, args: CallAgentArgs) -> str:
        """Send a task to a remote agent and return its answer (see CALL_AGENT_DOC)."""
        import asyncio

        remote = self._agents.get(args.name)
        if remote is None:
            raise ToolError(
                f"No remote agent {args.name!r}; the remote agents are: {', '.join(self._agents)}."
            )
        reply = asyncio.run(self._call(remote, args.message, ctx))
        return _outcome(remote.name, reply)

    async def _call(self, remote: RemoteAgent, text: str, ctx: ToolContext) -> _Reply:
        import asyncio

        import httpx
        from a2a.client import ClientConfig, create_client
        from a2a.utils.errors import A2AError

        loop = asyncio.get_running_loop()
        stopped = asyncio.Event()
        unregister = ctx.cancel.on_cancel(lambda: loop.call_soon_threadsafe(stopped.set))
        headers = {"Authorization": f"Bearer {remote.token}"} if remote.token else {}
        timeout = httpx.Timeout(remote.timeout, connect=CONNECT_SECONDS)
        reply = _Reply(context_id=self._contexts.get((ctx.conversation_id, remote.name), ""))
        try:
            async with httpx.AsyncClient(headers=headers, timeout=timeout) as http:
                client = await create_client(
                    remote.url, client_config=ClientConfig(streaming=True, httpx_client=http)
                )
                run = asyncio.create_task(
                    _stream(client, _request(text, reply), reply, ctx.on_output)
                )
                stop = asyncio.create_task(stopped.wait())
                await asyncio.wait(
                    {run, stop}, timeout=remote.timeout, return_when=asyncio.FIRST_COMPLETED
                )
                stop.cancel()
                if not run.done():
                    run.cancel()
                    await _cancel_remote(client, reply.task_id)
                    if stopped.is_set():
                        raise TaskCancelled()
                    raise ToolError(
                        f"{remote.name} did not finish within {remote.timeout:g} s; "
                        f"its task was cancelled. It wrote so far:\n{reply.text}"
                    )
                run.result()
        except (A2AError, httpx.HTTPError, ValueError) as exc:
            raise ToolError(
                f"Could not reach {remote.name} at {remote.url}: {_problem(exc)}"
            ) from None
        finally:
            unregister()
        if reply.context_id:
            self._contexts[(ctx.conversation_id, remote.name)] = reply.context_id
        return reply


def _request(text: str, reply: _Reply) -> Any:
    from a2a.types import Message, Part, Role, SendMessageRequest

    message = Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[Part(text=text)])
    if reply.context_id:
        message.context_id = reply.context_id
    return SendMessageRequest(message=message)


async def _stream(
    client: Client, request: Any, reply: _Reply, on_output: Callable[[str], None]
) -> None:
    """Follow the remote task's events, showing its answer and status notes as they come."""
    from a2a.types import TaskState

    def show(text: str) -> None:
        if text:
            reply.shown.append(text)
            on_output(text)

    response: StreamResponse
    async for response in client.send_message(request):
        if response.HasField("task"):
            task = response.task
            reply.task_id, reply.context_id = task.id, task.context_id
            reply.state = TaskState.Name(task.status.state)
            if task.artifacts and not reply.text:
                reply.text = "".join(p.text for a in task.artifacts for p in a.parts)
                show(reply.text)
        elif response.HasField("status_update"):
            status = response.status_update.status
            reply.state = TaskState.Name(status.state)
            reply.note = "".join(part.text for part in status.message.parts)
            if reply.note:
                newline = "\n" if reply.shown and not reply.shown[-1].endswith("\n") else ""
                show(f"{newline}· {reply.note}\n")
        elif response.HasField("artifact_update"):
            update = response.artifact_update
            chunk = "".join(part.text for part in update.artifact.parts)
            if update.append:
                reply.text += chunk
                show(chunk)
            elif chunk != reply.text:  # a whole artifact replacing what streamed before
                reply.text = chunk
                show(chunk)
        elif response.HasField("message"):
            reply.text = "".join(part.text for part in response.message.parts)
            reply.state = "TASK_STATE_COMPLETED"
            show(reply.text)


async def _cancel_remote(client: Client, task_id: str) -> None:
    import asyncio

    from a2a.types import CancelTaskRequest

    if not task_id:
        return
    with contextlib.suppress(Exception):
        await asyncio.wait_for(
            client.cancel_task(CancelTaskRequest(id=task_id)), CANCEL_REMOTE_SECONDS
        )


def _outcome(name: str, reply: _Reply) -> str:
    """The tool's result for a finished remote task, or a ToolError the model can act on."""
    state = reply.state.removeprefix("TASK_STATE_").lower().replace("_", " ")
    answer = reply.text.strip() or "(no text in its answer)"
    if reply.state == "TASK_STATE_COMPLETED":
        return answer
    if reply.state in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"):
        raise ToolError(
            f"{name} stopped answering before its task ended ({state}). It wrote so far:\n{answer}"
        )
    if reply.state in ("TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"):
        return f"{answer}\n\n[{name} stopped: {state}: {reply.note or 'no details'}]"
    raise ToolError(
        f"{name} ended its task as {state}: {reply.note or 'no details'}."
        + (f"\nIt wrote:\n{reply.text}" if reply.text.strip() else "")
    )


def _problem(exc: BaseException) -> str:
    """A short, single-line reason, with what a 401 means."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    if "401" in text:
        text += " (the token in remote_agents is missing or wrong)"
    return text[:300]
