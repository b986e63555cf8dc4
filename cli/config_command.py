"""`/model` and `/config`, local and remote alike: the user's settings as `get_settings` gives
them (core/settings_editor.py here, the server's through workspace_client there), each with
where its value comes from; a change saved in the settings file and used from the next task
on. The key is never printed: only whether one is set."""

from __future__ import annotations

import json
from typing import Any, Protocol

RESET = "--reset"  # `/config KEY --reset`: out of the settings file, back to the default
NAME_COLUMN, VALUE_COLUMN = 20, 28


class SettingsFront(Protocol):
    """A terminal's way to the user's settings."""

    def user_settings(self, changes: dict[str, Any] | None = None) -> dict[str, Any]:
        """The settings as get_settings answers them, after `changes` when given; ValueError
        saying why for each refused setting."""
        ...


def model_command(t: SettingsFront, arg: str) -> str:
    """`/model`: the model the next task uses; `/model NAME` sets it."""
    view = t.user_settings({"model": arg} if arg else None)
    entry, active = view["settings"]["model"], view["active"]
    line = f"model: {active['model']} (provider {active['provider']}; {_source(entry)})"
    return line + ("\nthe next task uses it" if arg else "")


def config_command(t: SettingsFront, arg: str) -> str:
    """`/config`: every setting and where it comes from; `/config KEY VALUE` sets one."""
    if not arg:
        view = t.user_settings()
        rows = [_row(name, entry) for name, entry in view["settings"].items()]
        return "\n".join([*rows, f"settings file: {view['path']}", _usage()])
    name, _, value = arg.partition(" ")
    value = value.strip()
    if not value:
        raise ValueError(_usage())
    view = t.user_settings({name: _value(name, value)})
    return f"{_row(name, view['settings'][name])}\nsaved; the next task uses it"


def _usage() -> str:
    return f"/config KEY VALUE sets one; /config KEY {RESET} takes it out of the settings file"


def _value(name: str, text: str) -> Any:
    if text == RESET:
        return None
    if name != "prices":
        return text
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ValueError(
            'prices: write them as JSON, {"MODEL": {"input": 0.3, "output": 1.2}}'
        ) from exc


def _row(name: str, entry: dict[str, Any]) -> str:
    return f"{name.ljust(NAME_COLUMN)}{_shown(entry).ljust(VALUE_COLUMN)}  {_source(entry)}"


def _shown(entry: dict[str, Any]) -> str:
    if "set" in entry:  # the key: never its value
        return "set" if entry["set"] else "not set"
    value = entry.get("value")
    if value is None or value == {}:
        return "-"
    if isinstance(value, dict):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _source(entry: dict[str, Any]) -> str:
    where = str(entry["source"])
    if entry.get("fixed"):
        return f"{where} ({entry['variable']}): fixed for this run"
    return where
