"""The demo model (AGENT_PROVIDER=demo): scripted tasks played in-process, no key, no network.

It answers like a model API would: thinking, then Markdown, then tool calls, each streamed at a
model's pace and stopped by the task's cancel token. The tools it calls are the real ones. The
scripts are data (`demo/tasks.yaml`): the task comes from the user's message, the step from the
calls it made earlier in this turn (their ids name the step) and what became of them, so a
declined approval or a failed command changes what it says next.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from history.records import ChatMessage
from model.completion import (
    Completion,
    ContentDelta,
    ReasoningDelta,
    StreamEnd,
    StreamItem,
    Usage,
)
from model.tool_calls import ToolCall, ToolCallArgs, ToolCallStarted
from utils.cancel import CancelToken, TaskCancelled
from utils.settings import PROGRAM_DIR

DEMO_DIR = PROGRAM_DIR / "demo"
TASKS_FILE = DEMO_DIR / "tasks.yaml"

# Seconds, at pace 1: a hosted model's first-token latency and its rate of words.
FIRST_TOKEN_SECONDS = 0.4
WORD_SECONDS = 0.03
THINKING_WORD_SECONDS = 0.015
ARGS_CHUNK_CHARS, ARGS_CHUNK_SECONDS = 16, 0.01
_WORD = re.compile(r"\s*\S+|\s+")
_CALL_ID = re.compile(r"^demo-(?P<step>[\w-]+)-\d+-[0-9a-f]+$")


@dataclass(frozen=True)
class Step:
    id: str
    thinking: str = ""
    say: str = ""
    calls: list[dict[str, Any]] = field(default_factory=list)
    next: dict[str, str] = field(default_factory=dict)


UNAVAILABLE = (
    "This task needs {} here, and this conversation does not offer it (read-only "
    "mode, or an agent without it). Switch the approval mode to *ask* or *auto* and "
    "try again."
)
LOST = Step(
    "lost",
    say="I lost track of this task: this turn has tool calls the demo did not "
    "make. Start a new conversation and try one of the suggested tasks.",
)


@dataclass(frozen=True)
class Script:
    name: str
    suggestion: str | None
    match: list[str]
    steps: list[Step]

    def step(self, step_id: str) -> Step:
        return next(s for s in self.steps if s.id == step_id)

    def after(self, step: Step, outcome: str) -> Step:
        """The step that follows `step` when its calls came to `outcome`."""
        if outcome in step.next:
            return self.step(step.next[outcome])
        return self.steps[self.steps.index(step) + 1]


@dataclass(frozen=True)
class Scripts:
    tasks: list[Script]
    fallback: Script

    def pick(self, message: str) -> Script:
        """The task whose match word comes first in the message; the fallback if none does."""
        text = message.lower()
        found = [
            (text.find(word.lower()), n)
            for n, script in enumerate(self.tasks)
            for word in script.match
            if word.lower() in text
        ]
        return self.tasks[min(found)[1]] if found else self.fallback

    @property
    def suggestions(self) -> list[str]:
        return [s.suggestion for s in self.tasks if s.suggestion]


@cache
def load_scripts(path: Path = TASKS_FILE) -> Scripts:
    """The scripted tasks (read once; a mistake in the file is a start-up error, not a reply)."""
    import yaml

    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    tasks = [
        Script(
            t["name"],
            t.get("suggestion"),
            list(t.get("match", [])),
            [Step(**step) for step in t["steps"]],
        )
        for t in data["tasks"]
    ]
    by_name = {t.name: t for t in tasks}
    for script in tasks:
        for step in script.steps:
            for target in step.next.values():
                script.step(target)  # StopIteration: a route to a step that is not there
    return Scripts([t for t in tasks if t.match], by_name[data["fallback"]])


def demo_suggestions() -> list[str]:
    """What the demo offers to do, for the page and the terminal's banner."""
    return load_scripts().suggestions


class DemoModel:
    """A ModelClient (core/services.py) that plays the scripts; `pace` scales every delay
    (0: as fast as possible, for tests)."""

    def __init__(self, pace: float = 1.0, scripts: Scripts | None = None) -> None:
        self.pace = pace
        self.scripts = scripts or load_scripts()

    def stream(
        self,
        messages: Sequence[ChatMessage],
        tools: list[dict[str, Any]],
        *,
        thinking: bool,
        cancel: CancelToken,
        on_wait: Callable[[float, str], None] | None = None,
    ) -> Iterator[StreamItem]:
        turn = _current_turn(messages)
        script = self.scripts.pick(str(turn[0].get("content") or "") if turn else "")
        step = _next_step(script, turn[1:])
        offered = {tool.get("function", {}).get("name") for tool in tools}
        missing = sorted({call["tool"] for call in step.calls} - offered)
        if missing:  # a model calls only the tools it is offered
            step = Step("unavailable", say=UNAVAILABLE.format(", ".join(f"`{m}`" for m in missing)))
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


def _current_turn(messages: Sequence[ChatMessage]) -> Sequence[ChatMessage]:
    """The last user message and everything after it."""
    last_user = max((n for n, m in enumerate(messages) if m.get("role") == "user"), default=None)
    return [] if last_user is None else messages[last_user:]


def _next_step(script: Script, turn: Sequence[ChatMessage]) -> Step:
    """The first step, or the one after the step whose calls were last answered in this turn."""
    calls = [m for m in turn if m.get("role") == "assistant" and m.get("tool_calls")]
    if not calls:
        return script.steps[0]
    ids = [c.get("id", "") for c in calls[-1]["tool_calls"]]
    found = _CALL_ID.match(ids[0]) if ids else None
    if found is None or all(s.id != found["step"] for s in script.steps):
        return LOST
    results = [m for m in turn if m.get("role") == "tool" and m.get("tool_call_id") in ids]
    return script.after(script.step(found["step"]), _outcome(results))


def _outcome(results: list[ChatMessage]) -> str:
    """`declined` if the user said no to a call, `failed` if one failed, else `ok`."""
    failed = [r for r in results if not (r.get("meta") or {}).get("ok", True)]
    if any("declined" in str(r.get("content", "")) for r in failed):
        return "declined"
    return "failed" if failed else "ok"


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)
