"""The demo model's scripts (`demo/tasks.yaml`): the tasks it plays, each a list of steps that
say, think and call tools, and the routes from a step's outcome to the next."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from utils.settings import PROGRAM_DIR

DEMO_DIR = PROGRAM_DIR / "demo"
TASKS_FILE = DEMO_DIR / "tasks.yaml"

# Step ids the model itself uses (a script may not): the plan's calls and a hand-over.
PLAN, FINISH, DELEGATE = "plan", "finish", "delegate"


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
        """What the demo offers to do: each task's suggestion, which plays that task."""
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
    scripts = Scripts([t for t in tasks if t.match], by_name[data["fallback"]])
    for script in scripts.tasks:
        if script.suggestion and scripts.pick(script.suggestion) is not script:
            raise ValueError(f"{script.name}: its suggestion plays another script")
    return scripts


def demo_suggestions() -> list[str]:
    """What the demo offers to do, for the page and the terminal's banner."""
    return load_scripts().suggestions
