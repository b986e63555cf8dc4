"""Tools as typed functions with pydantic argument models; schemas derived, calls dispatched."""

from __future__ import annotations

import inspect
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypedDict, Unpack, get_type_hints

from pydantic import BaseModel, ConfigDict, ValidationError

from modules.results import PlannedWrite, ToolError, ToolOutput, ToolResult
from modules.workspace.paths import Workspace
from utils.cancel import TaskCancelled
from utils.text import cap_text
from utils.validation import describe_validation_error

if TYPE_CHECKING:
    from modules.tools.tool_context import ToolContext

log = logging.getLogger(__name__)


ToolFunction = Callable[["ToolContext", Any], "str | ToolOutput"]
WritePlanner = Callable[[Workspace, Any], PlannedWrite]
# The workspace paths a call would change, named as the tool resolves them (raises ToolError
# or OSError for a call that will fail).
TargetFinder = Callable[[Workspace, Any], list[str]]
# When a call waits for the user in `ask` mode: every time, only when it would lose content
# that exists now (judged by the tool's planner), or never.
Asks = Literal["always", "on_overwrite", "never"]


class JsonArguments(BaseModel):
    """The arguments of a tool that brings its own JSON schema (an MCP server's): any JSON
    object, checked by the tool's owner; `model_dump()` gives it back as sent."""

    model_config = ConfigDict(extra="allow")


class ToolTraits(TypedDict, total=False):
    """What a tool does besides its name and function (Tool's fields of these names)."""

    read_only: bool
    asks: Asks
    plan: WritePlanner | None
    targets: TargetFinder | None
    runs_code: bool
    summary: str | None
    inline: bool


@dataclass(frozen=True)
class Tool:
    name: str
    function: ToolFunction
    args_model: type[BaseModel]
    read_only: bool = False
    asks: Asks = "never"
    plan: WritePlanner | None = None  # what a writing call would change, for approvals
    targets: TargetFinder | None = None  # which paths a writing call changes, for approvals
    runs_code: bool = False  # a command: what it changes is known only once it ran
    parameters: dict[str, Any] | None = None  # a JSON schema of its own (args: JsonArguments)
    summary: str | None = None  # its description, when not the function's docstring
    time_limit: float | None = None  # seconds a call may run, when not the tool timeout
    # Runs in the task's own thread, as long as it needs: a task's own tool (a plan's; a
    # delegation, whose sub-agent's events must all come before the task's end).
    inline: bool = False

    def __post_init__(self) -> None:
        if self.read_only and self.asks != "never":
            raise ValueError(f"tool {self.name}: a read-only tool never asks")
        if (self.asks == "on_overwrite") != (self.plan is not None):
            raise ValueError(f"tool {self.name}: asks='on_overwrite' goes with a write planner")
        if self.read_only and (self.targets is not None or self.runs_code):
            raise ValueError(f"tool {self.name}: a read-only tool changes nothing")

    @classmethod
    def typed(cls, name: str, function: ToolFunction, **traits: Unpack[ToolTraits]) -> Tool:
        """A tool whose function's second parameter is its pydantic argument model."""
        hints = get_type_hints(function)
        params = list(inspect.signature(function).parameters)
        args_model = hints[params[1]]
        if not (isinstance(args_model, type) and issubclass(args_model, BaseModel)):
            raise TypeError(f"tool {name}: second parameter must be a pydantic model")
        return cls(name, function, args_model, **traits)

    @classmethod
    def described(
        cls,
        name: str,
        function: ToolFunction,
        *,
        description: str,
        parameters: dict[str, Any],
        read_only: bool,
        asks: Asks,
        time_limit: float,
    ) -> Tool:
        """A tool described by a JSON schema rather than a pydantic model (MCP servers')."""
        return cls(
            name,
            function,
            JsonArguments,
            read_only,
            asks,
            parameters=parameters,
            summary=description,
            time_limit=time_limit,
        )

    def changed_paths(self, workspace: Workspace, args: Any) -> list[str]:
        """The workspace paths this call would change, as far as the tool can say before it
        runs; [] for a call that will fail."""
        if self.targets is None:
            return []
        try:
            return self.targets(workspace, args)
        except (ToolError, OSError):
            return []

    @property
    def description(self) -> str:
        if self.summary is not None:
            return self.summary
        return inspect.cleandoc(self.function.__doc__ or "")

    def schema(self) -> dict[str, Any]:
        """Its OpenAI `tools` entry: built once (a pydantic schema costs about a millisecond,
        and every task sends every tool's); shared, so never changed by a caller."""
        return self._schema

    @cached_property
    def _schema(self) -> dict[str, Any]:
        if self.parameters is None:
            return function_schema(self.name, self.description, self.args_model)
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


class ToolSource(Protocol):
    """Tools that come and go while the program runs (an MCP server's)."""

    def tools(self) -> Mapping[str, Tool]:
        """The tools offered now, by name."""
        ...


def function_schema(name: str, description: str, args_model: type[BaseModel]) -> dict[str, Any]:
    """The OpenAI `tools` entry of a function whose arguments `args_model` describes."""
    parameters = args_model.model_json_schema()
    _drop_titles(parameters)
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


def _drop_titles(node: Any) -> None:
    if isinstance(node, dict):
        node.pop("title", None)
        for value in node.values():
            _drop_titles(value)
    elif isinstance(node, list):
        for value in node:
            _drop_titles(value)


def parse_arguments(tool: Tool, arguments: str) -> BaseModel:
    """A call's JSON arguments checked against the tool's model; raises ToolError with a
    message for the model."""
    name = tool.name
    try:
        raw = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError as exc:
        raise ToolError(
            f"Arguments for {name} are not valid JSON ({exc.msg} at position {exc.pos}). "
            "Send one JSON object."
        ) from None
    if not isinstance(raw, dict):
        raise ToolError(f"Arguments for {name} must be a JSON object, got {type(raw).__name__}")
    try:
        return tool.args_model.model_validate(raw)
    except ValidationError as exc:
        raise ToolError(
            f"Invalid arguments for {name}: {describe_validation_error(exc, 'arguments')}"
        ) from None


class ToolRegistry:
    """The set of tools offered to the model."""

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}
        self._sources: list[ToolSource] = []

    def add_source(self, source: ToolSource) -> None:
        """Also offer the tools `source` has at each moment (after the registered ones)."""
        self._sources.append(source)

    def register(self, name: str, function: ToolFunction, **traits: Unpack[ToolTraits]) -> None:
        """Offer `function` as `name`; a reading tool never asks, a writing one says when and
        what it changes (`targets`; `runs_code`: known only once it ran)."""
        self._tools[name] = Tool.typed(name, function, **traits)

    def _all(self) -> dict[str, Tool]:
        if not self._sources:
            return self._tools
        merged = dict(self._tools)
        for source in self._sources:
            for name, tool in source.tools().items():
                merged.setdefault(name, tool)
        return merged

    def names(self) -> list[str]:
        return list(self._all())

    def tools(self) -> list[Tool]:
        """Every tool offered now, registered ones first."""
        return list(self._all().values())

    def get(self, name: str) -> Tool | None:
        return self._all().get(name)

    def schemas(self, *, read_only: bool = False) -> list[dict[str, Any]]:
        return [t.schema() for t in self._all().values() if t.read_only or not read_only]

    def parse_arguments(self, name: str, arguments: str) -> tuple[Tool, BaseModel]:
        """Check a call before it runs; raises ToolError with a message for the model."""
        tool = self.get(name)
        if tool is None:
            known = ", ".join(self.names())
            raise ToolError(f"Unknown tool {name!r}. Available tools: {known}")
        return tool, parse_arguments(tool, arguments)

    def run(self, tool: Tool, args: BaseModel, ctx: ToolContext) -> ToolResult:
        """Run a parsed call; every failure but cancellation becomes a failed result."""
        started = time.monotonic()
        try:
            result = tool.function(ctx, args)
            output = result if isinstance(result, ToolOutput) else ToolOutput(result)
            ok = True
        except TaskCancelled:
            raise
        except ToolError as exc:
            ok, output = False, ToolOutput(str(exc), details=exc.details)
        except Exception as exc:
            log.exception("tool %s crashed", tool.name)
            ok, output = False, ToolOutput(f"{tool.name} failed: {type(exc).__name__}: {exc}")
        duration_ms = int((time.monotonic() - started) * 1000)
        text = cap_text(output.text, ctx.settings.output_limit_chars)
        return ToolResult(ok, text, duration_ms, output.changes, output.details, output.ends_loop)

    def dispatch(self, name: str, arguments: str, ctx: ToolContext) -> ToolResult:
        """Parse and run one call given as the model sent it."""
        try:
            tool, args = self.parse_arguments(name, arguments)
        except ToolError as exc:
            return ToolResult(False, str(exc))
        return self.run(tool, args, ctx)
