"""Agents defined in files: a YAML or JSON file each, validated, later folders overriding
earlier ones by name (the shipped `agents/`, then `DATA_DIR/agents/`, then the workspace's
`.agents/agents/`). A bad file is reported with its file, field and line; the others load.

The workspace's definitions are the agent's to write: they are read only through the workspace
(core/agent_files.py), their templates may only be plain (utils/plain_templates.py), and unless
the user trusts them, one that would loosen a limit the user set is refused, and the definition
it would replace stays (core/agent_limits.py).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from core.agent_files import AgentFileError, AgentFolder
from core.agent_limits import loosened, reaches_further
from core.agent_specs import DEFAULT_AGENT, PLAIN_PROMPT, AgentCatalog, AgentProblem, AgentSpec
from utils.settings import Settings
from utils.validation import describe_validation_error
from utils.workspace_config import AGENT_DEFINITIONS
from utils.yaml_text import compose, safe_load

MAX_DEFINITIONS = 100  # files read of one folder
MAX_VALUES = 5_000  # of a YAML definition: its lists hold at most 200 names
TRUST = "AGENT_TRUST_WORKSPACE_AGENTS=true allows it"
_PROMPT_FILE = re.compile(r"^[\w.-]+\.(md|j2|jinja|txt)$")


def load_agents(
    folders: list[Path], workspace: Path | None = None, limits: Settings | None = None
) -> AgentCatalog:
    """Read every definition in `folders`, in order, then those of `workspace`'s `.agents/agents`:
    a later one replaces an earlier namesake. With `limits` (the settings, unless they trust the
    workspace's agents), a workspace definition that would loosen one of them is refused."""
    catalog = AgentCatalog()
    for folder in folders:
        for spec, _ in _definitions(AgentFolder(folder), catalog.problems, plain=False):
            catalog.agents[spec.name] = spec
    trusted = catalog.trusted = dict(catalog.agents)
    planted: dict[str, str] = {}  # the workspace's agents in the catalogue, by name: their file
    if workspace is not None:
        own = AgentFolder(Path(AGENT_DEFINITIONS), workspace)
        for spec, path in _definitions(own, catalog.problems, plain=True):
            found = [] if limits is None else _loosened(spec, trusted, limits)
            if found:
                catalog.problems.append(AgentProblem(path, _refusal(path, found)))
                continue
            catalog.agents[spec.name] = spec
            planted[spec.name] = path
    _settle(catalog, trusted, planted, limits)
    return catalog


def _definitions(
    folder: AgentFolder, problems: list[AgentProblem], *, plain: bool
) -> Iterator[tuple[AgentSpec, str]]:
    """Each definition of `folder` that validates, with its path; the others' problems noted."""
    try:
        names = folder.names()
    except AgentFileError as exc:
        problems.append(AgentProblem(str(folder.shown), str(exc)))
        return
    if len(names) > MAX_DEFINITIONS:
        left = len(names) - MAX_DEFINITIONS
        problems.append(
            AgentProblem(
                str(folder.shown),
                f"over {MAX_DEFINITIONS} definition files: the last {left} by name, from "
                f"{names[MAX_DEFINITIONS]}, are not read",
            )
        )
    for name in names[:MAX_DEFINITIONS]:
        path = str(folder.shown / name)
        try:
            yield _load(folder, name, plain=plain), path
        except FileNotFoundError:
            continue  # gone since the folder was listed
        except AgentFileError as exc:
            problems.append(AgentProblem(path, str(exc)))


def _load(folder: AgentFolder, name: str, *, plain: bool) -> AgentSpec:
    text = folder.read(name)
    try:
        data = json.loads(text) if name.endswith(".json") else safe_load(text, MAX_VALUES)
    except (ValueError, RecursionError, yaml.YAMLError) as exc:
        raise AgentFileError(f"{name}: cannot be read: {' '.join(str(exc).split())}") from None
    if not isinstance(data, dict):
        raise AgentFileError(f"{name}: must be a mapping of fields")
    prompt = data.get("system_prompt")
    if isinstance(prompt, str) and _PROMPT_FILE.match(prompt.strip()):
        with contextlib.suppress(FileNotFoundError):  # none beside it: the text is the prompt
            data = {**data, "system_prompt": folder.read(prompt.strip())}
    try:
        return AgentSpec.model_validate(data, context={PLAIN_PROMPT: plain})
    except ValidationError as exc:
        lines = _field_lines(text, name)
        fields = dict.fromkeys(e["loc"][0] for e in exc.errors() if e["loc"])
        where = [f"{key} (line {lines[key]})" for key in fields if key in lines]
        at = f" at {', '.join(where)}" if where else ""
        raise AgentFileError(f"{name}{at}: {describe_validation_error(exc)}") from None


def _field_lines(text: str, name: str) -> dict[Any, int]:
    """The line of each top-level key of a definition (1-based), for error messages."""
    if name.endswith(".json"):
        found = {}
        for number, line in enumerate(text.splitlines(), start=1):
            match = re.match(r'\s*"([^"]+)"\s*:', line)
            if match and match.group(1) not in found:
                found[match.group(1)] = number
        return found
    node = compose(text)
    if not isinstance(node, yaml.MappingNode):
        return {}
    return {key.value: key.start_mark.line + 1 for key, _ in node.value}


def _loosened(spec: AgentSpec, trusted: dict[str, AgentSpec], limits: Settings) -> list[str]:
    """What a workspace definition would loosen of the one it replaces, or of the default
    agent when it is a new one."""
    if spec.name in trusted:
        return loosened(spec, trusted[spec.name], f"the {spec.name} agent it replaces", limits)
    default = trusted.get(limits.default_agent) or trusted.get(DEFAULT_AGENT)
    if default is None:  # no agent of the user's to measure it by: it may use nothing
        default = AgentSpec(name=DEFAULT_AGENT, description="none", tools=[])
    return loosened(spec, default, f"the default agent ({default.name})", limits)


def _settle(
    catalog: AgentCatalog,
    trusted: dict[str, AgentSpec],
    planted: dict[str, str],
    limits: Settings | None,
) -> None:
    """Drop, until none is left, each agent that delegates to one that is not there, and each
    of the workspace's whose delegates may do more than it (the one it replaced comes back)."""
    changed = True
    while changed:
        changed = False
        for spec in list(catalog.agents.values()):
            missing = [name for name in spec.agents if name not in catalog.agents]
            further = []
            if not missing and limits is not None and spec.name in planted:
                further = reaches_further(spec, _reached(spec, catalog), limits)
            if not (missing or further):
                continue
            path = planted.pop(spec.name, None)
            if path is not None and spec.name in trusted:
                catalog.agents[spec.name] = trusted[spec.name]
            else:
                del catalog.agents[spec.name]
            if missing:
                message = f"agent {spec.name!r} delegates to unknown agents: {missing}"
                catalog.problems.append(AgentProblem(path or spec.name, message))
            else:
                catalog.problems.append(AgentProblem(path or spec.name, _refusal(path, further)))
            changed = True


def _reached(spec: AgentSpec, catalog: AgentCatalog) -> list[AgentSpec]:
    """Every agent `spec` may hand work to, directly or through the ones it reaches."""
    seen: dict[str, AgentSpec] = {}
    todo = list(spec.agents)
    while todo:
        name = todo.pop()
        if name in seen or name not in catalog.agents:
            continue
        seen[name] = catalog.agents[name]
        todo += seen[name].agents
    return list(seen.values())


def _refusal(path: str | None, found: list[str]) -> str:
    name = Path(path).name if path else "it"
    return (
        f"{name}: refused: from the workspace, it may not loosen the user's limits: "
        f"{'; '.join(found)} ({TRUST})"
    )
