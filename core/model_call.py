"""One streamed model call of a task: every delta reported the moment it arrives, the reply
recorded in the task's transcript when the stream ends, and what came of a cancelled, cut or
looping stream recorded as interrupted."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Generator
from typing import Any

from core.repeats import RepeatLoop
from core.services import ModelClient
from core.spend import counted, estimated_usage
from core.task import StreamProgress, Task
from core.text_loops import LoopWatch
from model.completion import (
    CallStarted,
    Completion,
    ContentDelta,
    ReasoningDelta,
    StreamEnd,
    StreamItem,
)
from model.errors import StreamInterrupted
from model.messages import ChatMessage
from model.tool_calls import ToolCallArgs, ToolCallStarted
from protocol.events import Notice, Thinking, Token, ToolEvent
from utils.cancel import TaskCancelled
from utils.logger import log_context

log = logging.getLogger(__name__)

# What a reply's `finish_reason` tells the user, when it says the reply did not end by itself.
CUT_REPLIES = {
    "length": (
        "length_limit",
        "The model's answer was cut off: it reached the server's length limit (its output cap, "
        "or the end of its context window). Ask it to go on, or /compact to make room.",
    ),
    "content_filter": (
        "content_filter",
        "The model's answer was cut off by the provider's content filter.",
    ),
}


def stream_reply(
    task: Task,
    model: ModelClient,
    messages: list[ChatMessage],
    tools: list[dict[str, Any]],
    on_content: Callable[[], None],
    prompt_estimate: int,
    require: str | None = None,
) -> Completion:
    """Stream the reply to `messages` into the task's events and record it.

    `on_content` runs before the first content delta is reported; `prompt_estimate` stands for the
    prompt's tokens when the server sends no usage; `require` names the tool the reply must
    call. TaskCancelled and StreamInterrupted go through, after what had come is
    recorded; so does RepeatLoop, raised when the reply loops, after the call was stopped.
    """
    message_id = uuid.uuid4().hex
    progress = StreamProgress()
    with log_context(message_id=message_id, agent=task.agent.name):
        try:
            stream = model.stream(
                messages,
                tools,
                thinking=task.thinks(),
                cancel=task.cancel,
                on_wait=lambda seconds, text: task.report(Notice("retrying", text, seconds)),
                require=require,
            )
            completion = _consume(task, stream, message_id, progress, on_content)
        except (TaskCancelled, StreamInterrupted, RepeatLoop) as exc:
            reason = _interruption(exc)
            partial = progress.partial()
            _record_partial(task, message_id, partial, reason)
            if partial.content or partial.reasoning_content:  # the provider bills what it sent
                partial.usage = estimated_usage(prompt_estimate, partial)
                _count(task, partial)
            raise
    if not counted(completion.usage):
        completion.usage = estimated_usage(prompt_estimate, completion)
    cut = CUT_REPLIES.get(completion.finish_reason or "")
    if cut is not None:
        task.report(Notice(*cut))
    _count(task, completion)
    log.info(
        "model reply",
        extra={
            "fields": {
                "message_id": message_id,
                "reply": completion.content,
                "tool_calls": len(completion.tool_calls),
            }
        },
    )
    task.transcript.append(
        "assistant", completion.content, id=message_id, **_assistant_fields(completion)
    )
    return completion


def _consume(
    task: Task,
    stream: Generator[StreamItem, None, None],
    message_id: str,
    progress: StreamProgress,
    on_content: Callable[[], None],
) -> Completion:
    content_loop, reasoning_loop = LoopWatch(), LoopWatch()
    for item in stream:
        if isinstance(item, CallStarted):
            progress.call = item
        elif isinstance(item, ContentDelta):
            if not progress.content:  # the first text of the reply
                on_content()
            progress.content.append(item.text)
            task.report(Token(message_id, item.text))
            _stop_if_looping(stream, content_loop.feed(item.text))
        elif isinstance(item, ReasoningDelta):
            progress.reasoning.append(item.text)
            task.report(Thinking(message_id, item.text))
            _stop_if_looping(stream, reasoning_loop.feed(item.text))
        elif isinstance(item, ToolCallStarted):
            progress.tool_names[item.call_id] = item.name
            task.report(ToolEvent(item.call_id, item.name, "start"))
        elif isinstance(item, ToolCallArgs):
            name = progress.tool_names.get(item.call_id, "")
            task.report(ToolEvent(item.call_id, name, "args", delta=item.delta))
        elif isinstance(item, StreamEnd):
            return item.completion
    raise StreamInterrupted("the model stream ended without a final chunk", progress.partial())


def _interruption(exc: Exception) -> str:
    """What the transcript says stopped a reply before its end."""
    if isinstance(exc, TaskCancelled):
        return "cancelled"
    return "loop" if isinstance(exc, RepeatLoop) else "stream_cut"


def _stop_if_looping(stream: Generator[StreamItem, None, None], found: str) -> None:
    """Stop the call (closing the stream closes its connection: no more output is paid for)
    and raise RepeatLoop when the reply was found looping."""
    if found:
        stream.close()
        raise RepeatLoop(
            f"The model's reply repeated itself: {found}. The call was stopped so as not to "
            "spend more; what it said before is kept."
        )


def _count(task: Task, completion: Completion) -> None:
    """What a call used, in the task's usage, its spend and the ledger."""
    task.usage.add(completion.usage)
    if task.spend is not None:
        task.spend.record(completion.model, completion.usage, completion.price)


def _record_partial(task: Task, message_id: str, partial: Completion, reason: str) -> None:
    if not (partial.content or partial.reasoning_content):
        return
    task.transcript.append(
        "assistant",
        partial.content,
        id=message_id,
        reasoning_content=partial.reasoning_content or None,
        meta={"interrupted": reason},
    )


def _assistant_fields(completion: Completion) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    if completion.reasoning_content:
        fields["reasoning_content"] = completion.reasoning_content
    if completion.tool_calls:
        fields["tool_calls"] = [call.to_message() for call in completion.tool_calls]
    usage = completion.usage
    if usage.prompt_tokens or usage.completion_tokens:  # the context meter of a reopened branch
        fields["meta"] = {"usage": usage.to_wire()}
    return fields
