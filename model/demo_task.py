"""What the messages of a demo call say about its task: the request, which agent is asked, the
steps the demo's earlier calls in it came to, and the plan prompt it answers now."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from model.demo_inputs import Request, read_request
from model.demo_scripts import FINISH, PLAN
from model.messages import ChatMessage

# The id the demo gives each call it makes (model/demo.py): it names the step that made it.
_CALL_ID = re.compile(r"^demo-(?P<step>[\w-]+)-\d+-[0-9a-f]+$")
_AGENT = re.compile(r"You are the (?:(?P<name>[\w-]+) agent|(?P<supervisor>supervisor))\b")


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


def _outcome(results: list[ChatMessage]) -> str:
    """`declined` if the user said no to a call, `failed` if one failed, else `ok`."""
    failed = [r for r in results if not (r.get("meta") or {}).get("ok", True)]
    if any("declined" in str(r.get("content", "")) for r in failed):
        return "declined"
    return "failed" if failed else "ok"
