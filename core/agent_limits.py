"""What a definition from the workspace may not do, unless the user trusts the workspace's agents
(`trust_workspace_agents`): loosen a limit the user set.

Commands write the workspace, so a task (or a text it read) can plant a definition there for a
later start to load. It is measured against the definition it would replace (the shipped or the
user's one of its name) or, for a new name, the default agent, and is refused when it would
offer a tool that one does not, work in a mode that makes more model calls (plain < react <
plan_execute), make more model calls or replan more often, let a task spend more (`budget`,
else the settings' task budget; one in another unit cannot be compared), name a provider or
model that is neither the settings' nor that one's (another endpoint, with the user's key), or
delegate to an agent that may do more than itself. Approval and the sandbox are the user's
settings alone: no definition names them.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence

from core.agent_specs import AgentSpec
from core.budgets import limit_text
from utils.settings import Settings

_MODE_RANK = {"plain": 0, "react": 1, "plan_execute": 2}
_GLOB = frozenset("*?[")


def loosened(spec: AgentSpec, baseline: AgentSpec, whose: str, settings: Settings) -> list[str]:
    """Each limit of `baseline` (`whose` names it: "the coder agent it replaces") that `spec`
    would loosen, in words; empty when it loosens none."""
    tools = [repr(pattern) for pattern in spec.tools if not covers(baseline.tools, pattern)]
    found = [f"tools {_some(tools)}, which {whose} may not use"] if tools else []
    found += _more_calls(spec, baseline, whose, settings)
    found += _more_spend(spec, baseline, whose, settings)
    if spec.provider not in (None, settings.provider, baseline.provider):
        found.append(
            f"provider {spec.provider!r}, which neither the settings nor {whose} use: the "
            "conversation would go to another endpoint, with the user's key"
        )
    if spec.model not in (None, settings.model, baseline.model):
        found.append(f"model {spec.model!r}, which neither the settings nor {whose} use")
    return found


def reaches_further(spec: AgentSpec, reached: Iterable[AgentSpec], settings: Settings) -> list[str]:
    """How the agents `spec` may hand work to, directly or through others, may do more than
    `spec` itself, in words; empty when none may."""
    found = []
    for other in reached:
        tools = [repr(pattern) for pattern in other.tools if not covers(spec.tools, pattern)]
        more = [f"use {_some(tools)}"] if tools else []
        if _MODE_RANK[other.mode] > _MODE_RANK[spec.mode]:
            more.append(f"work in mode {other.mode!r}")
        mine, theirs = model_calls(spec, settings), model_calls(other, settings)
        if theirs > mine:
            more.append(f"make {theirs} model calls (it: {mine})")
        if more:
            found.append(f"it delegates to {other.name}, which may {', '.join(more)}")
    return found


def _some(items: list[str], shown: int = 5) -> str:
    if len(items) <= shown:
        return ", ".join(items)
    return f"{', '.join(items[:shown])} and {len(items) - shown} more"


def covers(patterns: Sequence[str], pattern: str) -> bool:
    """Whether every tool name `pattern` matches is matched by one of `patterns`; decided where
    it can be (a name, the same glob, a glob under a plain prefix and `*`), else no."""
    plain = not _GLOB.intersection(pattern)
    for other in patterns:
        if other in (pattern, "*") or (plain and fnmatch.fnmatchcase(pattern, other)):
            return True
        prefix = other[:-1]
        if other.endswith("*") and not _GLOB.intersection(prefix) and pattern.startswith(prefix):
            return True
    return False


def model_calls(spec: AgentSpec, settings: Settings) -> int:
    """How many model calls a task (or a plan's step) of `spec` may make."""
    return spec.max_iterations or settings.max_iterations


def _more_calls(spec: AgentSpec, baseline: AgentSpec, whose: str, settings: Settings) -> list[str]:
    found = []
    if _MODE_RANK[spec.mode] > _MODE_RANK[baseline.mode]:
        found.append(f"mode {spec.mode!r}, where {whose} works in {baseline.mode!r}")
    mine, theirs = model_calls(spec, settings), model_calls(baseline, settings)
    if mine > theirs:
        found.append(f"max_iterations {mine}, over the {theirs} model calls of {whose}")
    if spec.mode == baseline.mode == "plan_execute" and spec.max_replans > baseline.max_replans:
        found.append(f"max_replans {spec.max_replans}, over the {baseline.max_replans} of {whose}")
    return found


def _more_spend(spec: AgentSpec, baseline: AgentSpec, whose: str, settings: Settings) -> list[str]:
    theirs = baseline.budget or settings.budget_task
    if theirs is None:
        return []
    mine = spec.budget or settings.budget_task
    if mine is None:
        return [f"no task budget, where {whose} has {limit_text(theirs)}"]
    if mine.unit != theirs.unit:
        return [
            f"budget {limit_text(mine)}, which cannot be compared with the "
            f"{limit_text(theirs)} of {whose}"
        ]
    if mine.amount > theirs.amount:
        return [f"budget {limit_text(mine)}, over the {limit_text(theirs)} of {whose}"]
    return []
