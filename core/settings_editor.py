"""The user's settings changed while the program runs (docs/protocol.md §4.1 `get_settings`,
`set_settings`; the terminal's /model and /config): each editable setting with where its value
comes from, and a change validated as at start, written to DATA_DIR/settings.json and applied
to the next tasks (a running task keeps the setup it started with). The user's alone: the page
and the terminal call it, no tool does."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from core.services import AgentServices
from model.providers import PRESETS
from utils.errors import Invalid
from utils.settings import DEFAULT_PROVIDER, ENV_PREFIX, OWN_VARIABLES, Settings, settings_of
from utils.user_settings import (
    EDITABLE,
    PROVIDER_KEYS,
    SECRET,
    SettingLayers,
    settings_file,
    write_user_settings,
)


class SettingsRefused(Invalid):
    """A change refused, with why for each setting named."""

    def __init__(self, fields: Mapping[str, str]) -> None:
        super().__init__("; ".join(f"{name}: {why}" for name, why in fields.items()))
        self.fields = dict(fields)


class SettingsEditor:
    """Reads and changes the user's settings of one running program."""

    def __init__(self, services: AgentServices) -> None:
        self.services = services
        self._lock = threading.Lock()  # one change at a time: each rewrites the file whole

    def view(self) -> dict[str, Any]:
        """Every editable setting: its value (the key's never: whether one is set), where it
        comes from, whether this run fixes it; the provider presets; the file; the API state."""
        settings = self.services.settings
        layers = settings.layers
        found = layers.merged(DEFAULT_PROVIDER)
        entries = {
            name: _key_entry(layers, settings) if name == SECRET else _entry(name, found, layers)
            for name in EDITABLE
        }
        provider = self.services.provider
        return {
            "settings": entries,
            "providers": [
                {
                    "name": preset.name,
                    "base_url": preset.base_url,
                    "model": preset.model,
                    "key_env": preset.key_env,
                }
                for preset in PRESETS.values()
            ],
            "path": str(settings_file(settings.data_dir)),
            "active": {"provider": provider.name, "model": provider.model},
            "api": {
                "configured": provider.configured,
                "key_env": provider.key_env,
                "base_url": provider.base_url,
                "message": provider.problem,
            },
        }

    def update(self, changes: Mapping[str, Any]) -> dict[str, Any]:
        """Set each named setting (None or "" takes it out of the file), validated as at
        start, then written and applied; raises SettingsRefused naming each refused one."""
        with self._lock:
            settings = self.services.settings
            layers = settings.layers
            provider = str(changes.get("provider") or settings.provider)
            fixed = {
                name: _fixed_why(name, layers, provider)
                for name in changes
                if _is_fixed(name, layers, provider)
            }
            if unknown := [name for name in changes if name not in EDITABLE]:
                fixed |= {name: "not a setting that can be changed here" for name in unknown}
            if fixed:
                raise SettingsRefused(fixed)
            values = layers.user
            for name, value in changes.items():
                if value is None or value == "":
                    values.pop(name, None)
                else:
                    values[name] = value.strip() if isinstance(value, str) else value
            try:
                changed = settings_of(layers.with_user(values))
            except ValidationError as exc:
                raise SettingsRefused(_problems(exc)) from exc
            write_user_settings(settings.data_dir, values)
            self.services.reconfigure(changed)
        return self.view()


def _entry(name: str, found: Mapping[str, Any], layers: SettingLayers) -> dict[str, Any]:
    value = found.get(name, Settings.model_fields[name].get_default(call_default_factory=True))
    return {
        "value": value,
        "source": layers.source(name),
        "fixed": layers.fixed(name),
        "variable": _variable(name),
    }


def _key_entry(layers: SettingLayers, settings: Settings) -> dict[str, Any]:
    """Whether a key is set and where, never the key: as resolve_provider picks it."""
    own = PROVIDER_KEYS.get(settings.provider)
    if layers.fixed(SECRET) or not (own and layers.fixed(own)):
        where = layers.source(SECRET)
    else:
        where = layers.source(own)  # this run sets the provider's own variable: it wins
    if where == "default" and own:
        where = layers.source(own)
    return {
        "set": where != "default",
        "source": where,
        "fixed": _is_fixed(SECRET, layers, settings.provider),
        "variable": _variable(SECRET),
    }


def _is_fixed(name: str, layers: SettingLayers, provider: str) -> bool:
    """The command line or the environment sets it for this run (for the key, also the
    provider's own key variable)."""
    if name == SECRET:
        own = PROVIDER_KEYS.get(provider)
        return layers.fixed(SECRET) or (own is not None and layers.fixed(own))
    return layers.fixed(name)


def _fixed_why(name: str, layers: SettingLayers, provider: str) -> str:
    own = PROVIDER_KEYS.get(provider)
    field = own if name == SECRET and own and not layers.fixed(SECRET) else name
    where = layers.source(field)
    how = f"{_variable(field)} in the environment" if where == "environment" else "a flag"
    return (
        f"fixed by {how} of this run, which wins over the settings file: change it there "
        "and restart to change it"
    )


def _variable(name: str) -> str:
    return OWN_VARIABLES.get(name, ENV_PREFIX + name.upper())


def _problems(exc: ValidationError) -> dict[str, str]:
    """Each refused setting and why, as the start would have said it."""
    problems: dict[str, str] = {}
    for item in exc.errors():
        name, *inner = [str(part) for part in item["loc"]] or ["settings"]
        where = f" ({'.'.join(inner)})" if inner else ""
        problems.setdefault(name, f"{item['msg'].removeprefix('Value error, ')}{where}")
    return problems
