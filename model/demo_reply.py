"""The step the demo plays now: the script's next step as the task stands, fitted to the tools
offered and to the prompt, its placeholders filled with what earlier calls returned."""

from __future__ import annotations

import re
from typing import Any

from model.demo_inputs import describe_attachments
from model.demo_scripts import DELEGATE, FINISH, LOST, PLAN, Script, Step
from model.demo_task import TaskState

# Tools that change the workspace: when none is offered, the conversation is read-only.
WRITERS = frozenset(
    {"create_file", "modify_file", "delete_file", "rename_file", "run_command", "run_python"}
)
_FILL = re.compile(r"\{(?P<step>[\w-]+)\.(?P<call>\d+)(?:\|(?P<filter>\w+)(?::(?P<arg>[^}]*))?)?\}")
_NUMBERED = re.compile(r"^\s*(\d+)\t(.*)$", re.MULTILINE)
RESULT_CHARS = 3000


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
