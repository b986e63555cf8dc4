"""The demo model (AGENT_PROVIDER=demo): scripted tasks played in-process, no key, no network.

It answers like a model API would: thinking, then Markdown, then tool calls, each streamed at a
model's pace and stopped by the task's cancel token. The tools it calls are the real ones. The
scripts are data (`demo/tasks.yaml`): the task comes from the user's message, the step from the
calls it made earlier in this task (their ids name the step) and what became of them: a
declined approval, a failed command, or what a file it read holds, changes what it says next.
Like a model it works with what it is offered: a tool it lacks is handed to a specialist when
it may delegate, else it says what to change; under `plan_execute` it plans the script's
steps and finishes each; it describes what is attached to the message.

This module streams the step; the scripts are model/demo_scripts.py's, what the messages say
of the task model/demo_task.py's (and of the request model/demo_inputs.py's), the choice of
the step model/demo_reply.py's.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Generator, Sequence
from typing import Any, Unpack

from model.completion import (
    CallOptions,
    Completion,
    ContentDelta,
    ReasoningDelta,
    StreamEnd,
    StreamItem,
)
from model.demo_reply import Reply
from model.demo_scripts import Scripts, load_scripts
from model.demo_task import read_task
from model.messages import ChatMessage
from model.tool_calls import ToolCall, ToolCallArgs, ToolCallStarted
from protocol.event_values import Usage
from utils.cancel import CancelToken, TaskCancelled

# Seconds, at pace 1: a hosted model's first-token latency and its rate of words.
FIRST_TOKEN_SECONDS = 0.4
WORD_SECONDS = 0.03
THINKING_WORD_SECONDS = 0.015
ARGS_CHUNK_CHARS, ARGS_CHUNK_SECONDS = 16, 0.01
_WORD = re.compile(r"\s*\S+|\s+")


class DemoModel:
    """A ModelClient (core/services.py) that plays the scripts; `pace` scales every delay
    (0: as fast as possible, for tests). A script calls the tool a call requires by itself
    (make_plan, finish_step), so `require` changes nothing here."""

    def __init__(self, pace: float = 1.0, scripts: Scripts | None = None) -> None:
        self.pace = pace
        self.scripts = scripts or load_scripts()

    def stream(
        self,
        messages: Sequence[ChatMessage],
        tools: list[dict[str, Any]],
        **options: Unpack[CallOptions],
    ) -> Generator[StreamItem, None, None]:
        cancel, thinking = options["cancel"], options["thinking"]
        state = read_task(messages)
        offered = {tool.get("function", {}).get("name") for tool in tools}
        script = self.scripts.pick(state.request.words)
        step = Reply(script, state, offered, script is self.scripts.fallback).step()
        completion = Completion(finish_reason="tool_calls" if step.calls else "stop")
        self._sleep(FIRST_TOKEN_SECONDS, cancel)
        if thinking and step.thinking:
            for word in _WORD.findall(step.thinking):
                self._sleep(THINKING_WORD_SECONDS, cancel)
                completion.reasoning_content += word
                yield ReasoningDelta(word)
        for word in _WORD.findall(step.say.rstrip("\n")):
            self._sleep(WORD_SECONDS, cancel)
            completion.content += word
            yield ContentDelta(word)
        for index, call in enumerate(step.calls):
            tool_call = ToolCall(
                f"demo-{step.id}-{index}-{secrets.token_hex(4)}",
                call["tool"],
                json.dumps(call.get("args", {}), ensure_ascii=False),
            )
            yield ToolCallStarted(index, tool_call.id, tool_call.name)
            text = tool_call.arguments
            for at in range(0, len(text), ARGS_CHUNK_CHARS):
                self._sleep(ARGS_CHUNK_SECONDS, cancel)
                yield ToolCallArgs(index, tool_call.id, text[at : at + ARGS_CHUNK_CHARS])
            completion.tool_calls.append(tool_call)
        completion.usage = Usage(
            _tokens(json.dumps(messages, ensure_ascii=False)),
            _tokens(completion.content + completion.reasoning_content),
        )
        yield StreamEnd(completion)

    def _sleep(self, seconds: float, cancel: CancelToken) -> None:
        if cancel.wait(seconds * self.pace) if self.pace > 0 else cancel.cancelled:
            raise TaskCancelled()


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)
