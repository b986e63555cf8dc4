"""The user's own settings file, DATA_DIR/settings.json (docs/protocol.md §2): what the page's
settings panel and the terminal's /model and /config write, read at every start. It holds only
the settings a person changes while the program runs (EDITABLE), as JSON under their plain
names. The data folder lies outside the workspace (checked at start), so no command the agent
runs can write it.

Where each setting comes from is a SettingLayers: the command line and the environment, set for
this run, win over the file and are shown as fixed; the file wins over `.env` and
`config.yaml`, which it was written to change."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from utils.files import atomic_write
from utils.setting_sources import BadConfiguration, merged, read_settings_file

FILE_NAME = "settings.json"
EDITABLE = (
    "provider",
    "base_url",
    "model",
    "thinking_model",
    "api_key",
    "mode",
    "approval",
    "budget_task",
    "budget_conversation",
    "budget_day",
    "prices",
)
SECRET = "api_key"  # written, never read back out
# The field holding each provider's own key variable (DEEPSEEK_API_KEY, ...).
PROVIDER_KEYS = {
    "deepseek": "deepseek_api_key",
    "kimi": "moonshot_api_key",
    "qwen": "dashscope_api_key",
    "siliconflow": "siliconflow_api_key",
    "openai": "openai_api_key",
}
COMMAND_LINE, ENVIRONMENT, USER_FILE = "command line", "environment", "settings file"
FIXED = (COMMAND_LINE, ENVIRONMENT)  # set for this run: the file cannot change them


def settings_file(data_dir: Path) -> Path:
    """Where the user's settings file of this data folder is."""
    return data_dir / FILE_NAME


def read_user_settings(data_dir: Path) -> dict[str, Any]:
    """The editable settings the file sets (none when there is no file)."""
    path = settings_file(data_dir)
    text = read_settings_file(path)
    if text is None:
        return {}
    try:
        data = json.loads(text.getvalue())
    except ValueError as exc:
        raise BadConfiguration(f"{path} is not JSON ({exc}): fix it or remove it") from exc
    if not isinstance(data, dict):
        raise BadConfiguration(f"{path} must hold a JSON object of settings")
    return {key: value for key, value in data.items() if key in EDITABLE}


def write_user_settings(data_dir: Path, values: Mapping[str, Any]) -> None:
    """Replace the file whole with `values`, readable by its owner alone (0600)."""
    text = json.dumps(dict(sorted(values.items())), indent=2, ensure_ascii=False) + "\n"
    atomic_write(settings_file(data_dir), text, mode=0o600)


@dataclass(frozen=True)
class SettingLayers:
    """The places the settings were read from, the first winning: (source, values) pairs."""

    layers: tuple[tuple[str, Mapping[str, Any]], ...]

    def merged(self, default_provider: str) -> dict[str, Any]:
        """Every layer's values merged. The file's key is left out when the command line or
        the environment gives the chosen provider's own key: set for this run, it wins."""
        values = merged(*(layer for _, layer in self.layers))
        provider = values.get("provider", default_provider)
        if self.fixed(PROVIDER_KEYS.get(str(provider), SECRET)):
            user = {k: v for k, v in self.user.items() if k != SECRET}
            values = merged(*(user if name == USER_FILE else v for name, v in self.layers))
        return values

    @property
    def user(self) -> dict[str, Any]:
        """What the settings file sets."""
        return dict(next((values for name, values in self.layers if name == USER_FILE), {}))

    def with_user(self, values: Mapping[str, Any]) -> SettingLayers:
        """The same layers with the settings file holding `values`."""
        return SettingLayers(
            tuple((name, values if name == USER_FILE else old) for name, old in self.layers)
        )

    def source(self, field: str) -> str:
        """Where the setting's value comes from: a layer's name, or "default"."""
        return next((name for name, values in self.layers if field in values), "default")

    def fixed(self, field: str) -> bool:
        """Whether this run's command line or environment sets it."""
        return any(field in values for name, values in self.layers if name in FIXED)
