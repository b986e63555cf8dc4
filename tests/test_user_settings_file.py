"""The user's settings file, DATA_DIR/settings.json, read at start (docs/protocol.md §2): it wins
over `.env` and `config.yaml`; the command line and the environment, set for this run, win over
it, the provider's own key variable included; a file that is not JSON stops the start; one in a
data folder inside the workspace is never read; it is written whole and 0600."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from utils.setting_sources import BadConfiguration
from utils.settings import Settings, load_settings
from utils.user_settings import read_user_settings, write_user_settings

pytestmark = pytest.mark.usefixtures("clean_environment")


def start(tmp_path: Path, **flags: str) -> Settings:
    return load_settings(workspace=str(tmp_path / "ws"), data_dir=str(tmp_path / "data"), **flags)


def saved(tmp_path: Path, **values: object) -> None:
    write_user_settings(tmp_path / "data", values)


def test_the_file_wins_over_dotenv_and_config_yaml(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("AGENT_MODEL=from-dotenv\nAGENT_MODE=thinking\n")
    (tmp_path / "config.yaml").write_text("model: from-yaml\nbudget_day: 1m tokens\n")
    saved(tmp_path, model="from-file", api_key="sk-file", web_token="never-read-from-it-0123")
    settings = start(tmp_path)
    assert settings.model == "from-file" and settings.api_key == "sk-file"
    assert settings.mode == "thinking" and settings.budget_day is not None
    assert settings.web_token is None, "only the settings a person edits are read from it"
    layers = settings.layers
    assert [layers.source(n) for n in ("model", "mode", "budget_day", "provider")] == [
        "settings file",
        ".env",
        "config.yaml",
        "default",
    ]
    assert not layers.fixed("model")


def test_the_environment_and_flags_win_and_are_fixed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_MODEL", "from-env")
    saved(tmp_path, model="from-file", approval="auto")
    settings = start(tmp_path, approval="read-only")
    assert settings.model == "from-env" and settings.approval == "read-only"
    assert settings.layers.source("model") == "environment" and settings.layers.fixed("model")
    assert settings.layers.source("approval") == "command line"


def test_the_providers_own_key_in_the_environment_wins_over_the_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-env")
    saved(tmp_path, api_key="sk-file")
    assert start(tmp_path).api_key is None  # resolve_provider takes DEEPSEEK_API_KEY
    saved(tmp_path, api_key="sk-file", provider="openai")
    assert start(tmp_path).api_key == "sk-file"  # openai's own variable is not set


def test_a_broken_file_stops_the_start_naming_it(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "settings.json").write_text("{model: x")
    with pytest.raises(BadConfiguration, match=r"settings\.json is not JSON"):
        start(tmp_path)
    (tmp_path / "data" / "settings.json").write_text('["model"]')
    with pytest.raises(BadConfiguration, match="must hold a JSON object"):
        start(tmp_path)


def test_a_file_in_the_workspace_is_never_read(tmp_path: Path) -> None:
    inside = tmp_path / "ws" / "data"
    write_user_settings(inside, {"provider": "not-a-provider"})
    with pytest.raises(BadConfiguration, match=r"the data folder .* lies in the workspace"):
        load_settings(workspace=str(tmp_path / "ws"), data_dir=str(inside))


def test_it_is_written_whole_and_private(tmp_path: Path) -> None:
    data = tmp_path / "data"
    write_user_settings(data, {"model": "m", "api_key": "sk"})
    path = data / "settings.json"
    path.chmod(0o644)  # loosened by hand: the next write makes it private again
    write_user_settings(data, {"model": "n"})
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text()) == {"model": "n"} == read_user_settings(data)
    assert [p.name for p in data.iterdir()] == ["settings.json"]
