"""The demo model (AGENT_PROVIDER=demo): scripted tasks played in-process, no key, no network.

It answers like a model API would: thinking, then Markdown, then tool calls, each streamed at a
model's pace and stopped by the task's cancel token. The tools it calls are the real ones. The
scripts are data (`demo/tasks.yaml`): the task comes from the user's message, the step from the
calls it made earlier in this task (their ids name the step) and what became of them: a
declined approval, a failed command, or what a file it read holds, changes what it says next.
Like a model it works with what it is offered: a tool it lacks is handed to a specialist when
it may delegate, else it says what to change; under `plan_execute` it plans the script's
steps and finishes each; it describes what is attached to the message.
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
from model.demo_inputs import Request, describe_attachments, read_request
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


# Tools that change the workspace: when none is offered, the conversation is read-only.
WRITERS = frozenset(
    {"create_file", "modify_file", "delete_file", "rename_file", "run_command", "run_python"}
)
# Step ids the model itself uses (a script may not): the plan's calls and a hand-over.
PLAN, FINISH, DELEGATE = "plan", "finish", "delegate"
_FILL = re.compile(r"\{(?P<step>[\w-]+)\.(?P<call>\d+)(?:\|(?P<filter>\w+)(?::(?P<arg>[^}]*))?)?\}")
_NUMBERED = re.compile(r"^\s*(\d+)\t(.*)$", re.MULTILINE)
_AGENT = re.compile(r"You are the (?:(?P<name>[\w-]+) agent|(?P<supervisor>supervisor))\b")
RESULT_CHARS = 3000


@dataclass(frozen=True)
class Step:
    id: str
    thinking: str = ""
    say: str = ""
    calls: list[dict[str, Any]] = field(default_factory=list)
    next: dict[str, str] = field(default_factory=dict)
    when: list[dict[str, str]] = field(default_factory=list)


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
    delegate: str | None = None  # the specialist to hand the task to when a tool is missing
    plan: list[dict[str, str]] = field(default_factory=list)  # {title, from}: plan_execute

    def step(self, step_id: str) -> Step:
        return next(s for s in self.steps if s.id == step_id)

    def after(self, step: Step, outcome: str, results: str) -> Step:
        """The step that follows `step` when its calls came to `outcome` with `results`: the
        first `when` route whose text the results hold (only when they succeeded), else the
        route for the outcome, else the next step in the list."""
        if outcome == "ok":
            for route in step.when:
                if route["has"] in results:
                    return self.step(route["to"])
        if outcome in step.next:
            return self.step(step.next[outcome])
        return self.steps[self.steps.index(step) + 1]

    def plan_titles(self, request: str) -> list[tuple[str, str]]:
        """The plan as (title, first step id); one step, the request, when none is written."""
        if self.plan:
            return [(entry["title"], entry["from"]) for entry in self.plan]
        return [(request[:200] or self.name, self.steps[0].id)]


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
    from utils.yaml_text import safe_load

    data = safe_load(path.read_text(encoding="utf-8"))
    tasks = [
        Script(
            t["name"],
            t.get("suggestion"),
            list(t.get("match", [])),
            [Step(**step) for step in t["steps"]],
            t.get("delegate"),
            list(t.get("plan", [])),
        )
        for t in data["tasks"]
    ]
    by_name = {t.name: t for t in tasks}
    for script in tasks:
        targets = [entry["from"] for entry in script.plan]
        for step in script.steps:
            if step.id in (PLAN, FINISH, DELEGATE, LOST.id):
                raise ValueError(f"{script.name}: the step id {step.id!r} is the model's own")
            targets += [*step.next.values(), *(route["to"] for route in step.when)]
        for target in targets:
            script.step(target)  # StopIteration: a route to a step that is not there
    return Scripts([t for t in tasks if t.match], by_name[data["fallback"]])


def demo_suggestions() -> list[str]:
    """What the demo offers to do, for the page and the terminal's banner."""
    return load_scripts().suggestions


@dataclass
class Done:
    """One answered step of the task: its calls' outcome and their results' text."""

    step: str
    outcome: str
    results: list[str]


@dataclass
class TaskState:
    """What the messages say about the task: its request, the steps done, the prompt now."""

    request: Request
    agent: str | None  # "coder", "supervisor"... from the system prompt; None: the general one
    done: list[Done]
    lost: bool  # a call of this task the demo did not make
    prompt: dict[str, Any]  # the last user message's meta: a plan prompt or a plan step
    calls_since_prompt: bool  # whether a script call follows the last user message

    def results(self, step: str) -> list[str]:
        return next((d.results for d in reversed(self.done) if d.step == step), [])


def read_task(messages: Sequence[ChatMessage]) -> TaskState:
    """The task is everything after the last user message that is not a plan prompt."""
    users = [n for n, m in enumerate(messages) if m.get("role") == "user"]
    start = next((n for n in reversed(users) if not _plan_meta(messages[n])), None)
    system = next((str(m.get("content")) for m in messages if m.get("role") == "system"), "")
    who = _AGENT.search(system)
    agent = (who["name"] or who["supervisor"]) if who else None
    if start is None:
        return TaskState(Request("", []), agent, [], False, {}, False)
    done: list[Done] = []
    lost = since_prompt = False
    last_user = users[-1]
    for n, message in enumerate(messages[start:], start):
        ids = [str(c.get("id", "")) for c in message.get("tool_calls") or ()]
        if message.get("role") != "assistant" or not ids:
            continue
        found = _CALL_ID.match(ids[0])
        if found is None:
            lost = True
            continue
        if found["step"] in (PLAN, FINISH):
            continue
        answers = [
            m for m in messages[n + 1 :] if m.get("role") == "tool" and m.get("tool_call_id") in ids
        ]
        texts = [str(m.get("content") or "") for m in answers]
        done.append(Done(found["step"], _outcome(answers), texts))
        since_prompt = since_prompt or n > last_user
    prompt = _plan_meta(messages[last_user]) if last_user != start else {}
    return TaskState(read_request(messages[start]), agent, done, lost, prompt, since_prompt)


def _plan_meta(message: ChatMessage) -> dict[str, Any]:
    meta = message.get("meta") or {}
    return {k: meta[k] for k in ("plan_prompt", "plan_step") if k in meta}


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
        *,
        thinking: bool,
        cancel: CancelToken,
        on_wait: Callable[[float, str], None] | None = None,
        require: str | None = None,
    ) -> Iterator[StreamItem]:
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


class Reply:
    """The step to play now: the script's next step as the task stands, fitted to the tools
    offered and to the prompt (a plan to make, a plan step to finish, the final answer)."""

    def __init__(self, script: Script, state: TaskState, offered: set[Any], fallback: bool) -> None:
        self.script, self.state, self.offered = script, state, offered
        self.fallback = fallback  # the script of a message that matched none

    def step(self) -> Step:
        state = self.state
        if state.lost:
            return LOST
        if state.prompt.get("plan_prompt") in ("created", "replanned"):
            titles = [title for title, _ in self.script.plan_titles(state.request.words)]
            return Step(PLAN, calls=[{"tool": "make_plan", "args": {"steps": titles}}])
        step = self._fill(self._fitted(self._next()))
        if "plan_step" in state.prompt:
            return self._in_plan_step(step)
        if not state.done and state.request.attached:
            say = describe_attachments(state.request.attached)
            say += "\n\n" + (ATTACHMENTS_ONLY if self.fallback else step.say)
            return Step(step.id, step.thinking, say, step.calls)
        return step

    def _next(self) -> Step:
        """The first step, or the one after the step whose calls were answered last."""
        if not self.state.done:
            return self.script.steps[0]
        last = self.state.done[-1]
        if last.step == DELEGATE:
            agent = self.script.delegate or "specialist"
            text = REPORTED if last.outcome == "ok" else NOT_REPORTED
            return Step("reported", say=text.format(agent=agent, report="{delegate.0}"))
        if all(s.id != last.step for s in self.script.steps):
            return LOST
        step = self.script.step(last.step)
        return self.script.after(step, last.outcome, "\n".join(last.results))

    def _fitted(self, step: Step) -> Step:
        """`step`, or what a model does instead when a tool it needs is not offered."""
        missing = sorted({call["tool"] for call in step.calls} - self.offered)
        if not missing:
            return step
        helper = f"delegate_to_{self.script.delegate}"
        if self.script.delegate and helper in self.offered:
            say = HAND_OVER.format(agent=self.script.delegate)
            args = {"task": self.state.request.words}
            return Step(DELEGATE, say=say, calls=[{"tool": helper, "args": args}])
        if "unavailable" in step.next:
            return self._fitted(self.script.step(step.next["unavailable"]))
        return Step("unavailable", say=self._unavailable(missing))

    def _unavailable(self, missing: list[str]) -> str:
        """Why the task cannot go on here: read-only mode when the agent meant for it (or the
        general one) is offered nothing that writes, else an agent without those tools."""
        tools = ", ".join(f"`{name}`" for name in missing)
        agent, better = self.state.agent, self.script.delegate or "general"
        if agent in (None, better) and not WRITERS & self.offered:
            return READ_ONLY.format(tools=tools)
        who = f"I'm the **{agent}** agent here" if agent else "This agent"
        return WRONG_AGENT.format(who=who, tools=tools, better=better)

    def _in_plan_step(self, step: Step) -> Step:
        """Within a plan step: play the script until it reaches the next plan step's first
        step or its end, then finish the plan step."""
        plan = self.script.plan_titles(self.state.request.words)
        if step.calls and not (self.state.calls_since_prompt and step.id in {s for _, s in plan}):
            return step
        index = self.state.prompt["plan_step"]
        if step.calls:
            summary = f"{plan[index - 1][0] if index <= len(plan) else 'This step'}: done."
        elif self.state.calls_since_prompt:
            summary = _first_sentence(step.say)
        else:
            summary = f"Not needed: {_first_sentence(step.say)}"
        args = {"ok": True, "summary": summary}
        return Step(FINISH, calls=[{"tool": "finish_step", "args": args}])

    def _fill(self, step: Step) -> Step:
        """The step with `{STEP.N}` placeholders replaced by what call N of STEP returned."""
        calls = [{**call, "args": self._fill_value(call.get("args", {}))} for call in step.calls]
        return Step(step.id, step.thinking, self._fill_text(step.say), calls, step.next, step.when)

    def _fill_value(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {key: self._fill_value(item) for key, item in value.items()}
        if isinstance(value, str):
            whole = _FILL.fullmatch(value)
            filled = self._fill_text(value)
            return (
                int(filled) if whole and whole["filter"] == "line" and filled.isdigit() else filled
            )
        return value

    def _fill_text(self, text: str) -> str:
        def fill(found: re.Match[str]) -> str:
            results = self.state.results(found["step"])
            n = int(found["call"])
            result = results[n] if n < len(results) else ""
            return _filtered(result, found["filter"], found["arg"])

        return _FILL.sub(fill, text)


def _filtered(result: str, name: str | None, arg: str | None) -> str:
    """A result as a reply shows it: as is (cut), `names` (a listing's lines after its
    first, as code), `line:TEXT` (the number of the line holding TEXT in a numbered read)."""
    if name == "names":
        names = [line.strip() for line in result.splitlines()[1:] if line.strip()]
        return ", ".join(f"`{n}`" for n in names) or "(nothing)"
    if name == "line":
        return next((m[1] for m in _NUMBERED.finditer(result) if arg and arg in m[2]), "")
    return result.strip()[:RESULT_CHARS]


def _first_sentence(text: str) -> str:
    line = next((ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#")), "")
    sentence = re.split(r"(?<=[.!?])\s", line.strip().replace("**", ""), maxsplit=1)[0]
    return sentence.rstrip(":")[:200] or "done"


def _outcome(results: list[ChatMessage]) -> str:
    """`declined` if the user said no to a call, `failed` if one failed, else `ok`."""
    failed = [r for r in results if not (r.get("meta") or {}).get("ok", True)]
    if any("declined" in str(r.get("content", "")) for r in failed):
        return "declined"
    return "failed" if failed else "ok"


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


READ_ONLY = (
    "This task needs {tools}, and this conversation is in **read-only** mode, where I may "
    "only read. Switch the approval mode to *ask* (you approve each change) or *auto*, then "
    "send it again."
)
WRONG_AGENT = (
    "{who}, and this task needs {tools}, which it does not have. Switch this conversation "
    "to the **{better}** agent (the agent menu by the message box, or `/agent {better}` in "
    "the terminal) and send it again."
)
HAND_OVER = "This needs tools I don't have, so I'll hand it to the **{agent}** agent."
REPORTED = "I handed this to the **{agent}** agent. Its report:\n\n---\n\n{report}"
NOT_REPORTED = "The **{agent}** agent could not finish it: {report}"
ATTACHMENTS_ONLY = (
    "I'm the **demo model**, so that is as far as I go with attachments: I play a few "
    "scripted tasks on this workspace. Try *Give me a tour of this workspace*, *Fix the bug "
    "in calc.py* or *Summarise data.csv*."
)
