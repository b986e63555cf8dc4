"""Settings: where each comes from (docs/protocol.md §2), and what is not ours to read."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from main import main
from tests.kit.server import REPO
from utils.setting_sources import SETTINGS_FILE_BYTES
from utils.settings import BadConfiguration, load_settings

# main.py's main in a process of its own, its peak memory (VmHWM: this program's alone, not
# what a fork copied from the test's process) the last line of its stderr.
PEAK_OF_MAIN = f"""
import sys
sys.path.insert(0, {str(REPO)!r})
from main import main
from tests.kit.server import REPO
try:
    code = main(sys.argv[1:])
finally:
    with open("/proc/self/status") as status:
        peak = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
    print(peak, file=sys.stderr)
sys.exit(code)
"""


@pytest.fixture(autouse=True)
def clean_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty current folder (no .env, no config.yaml) and no AGENT_ variables."""
    for name in os.environ:
        if name.startswith("AGENT_") or name.endswith("_API_KEY"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_variables_set_for_other_programs_are_not_read(monkeypatch: pytest.MonkeyPatch):
    for name, value in {
        "MODE": "production",  # would fail validation and stop the start
        "MODEL": "someone-elses-model",
        "WORKSPACE": "/var/lib/jenkins/job",  # CI servers set it
        "API_KEY": "a-key-for-another-service",  # would be sent to the model provider
        "PROVIDER": "kimi",
        "SANDBOX": "docker",
        "A2A": "true",
    }.items():
        monkeypatch.setenv(name, value)
    settings = load_settings()
    assert (settings.mode, settings.model, settings.api_key) == ("fast", None, None)
    assert settings.workspace == Path.cwd() / "workspace"
    assert (settings.provider, settings.sandbox, settings.a2a) == ("deepseek", "auto", False)


def test_the_documented_names_are_read(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AGENT_MODE", "thinking")
    monkeypatch.setenv("AGENT_MODEL", "kimi-k2.6")
    monkeypatch.setenv("MOONSHOT_API_KEY", "mk")
    monkeypatch.setenv("AGENT_A2A", "true")
    monkeypatch.setenv("AGENT_ALLOWED_ORIGINS", '["http://a:1"]')
    monkeypatch.setenv("AGENT_DOCKER", '{"image": "img", "memory": "1g"}')
    monkeypatch.setenv("AGENT_DOCKER_MEMORY", "2g")  # one field of the section wins
    settings = load_settings()
    assert (settings.mode, settings.model, settings.moonshot_api_key) == (
        "thinking",
        "kimi-k2.6",
        "mk",
    )
    assert settings.a2a and settings.allowed_origins == ["http://a:1"]
    assert (settings.docker.image, settings.docker.memory) == ("img", "2g")


def test_environment_then_dotenv_then_config_yaml(clean_folder: Path, monkeypatch):
    (clean_folder / "config.yaml").write_text(
        "model: from-yaml\nmode: thinking\napproval: read-only\na2a: true\n"
        "docker:\n  image: yaml-image\n  cpus: 2\n"
    )
    (clean_folder / ".env").write_text("AGENT_MODEL=from-dotenv\nAGENT_MODE=fast\nMODE=x\n")
    monkeypatch.setenv("AGENT_MODE", "thinking")
    settings = load_settings(approval="auto")  # a command-line flag wins over all
    assert (settings.model, settings.mode, settings.approval) == ("from-dotenv", "thinking", "auto")
    assert settings.a2a and (settings.docker.image, settings.docker.cpus) == ("yaml-image", 2.0)


def test_unreadable_configuration_is_one_clear_line(clean_folder: Path, monkeypatch, capsys):
    monkeypatch.setenv("AGENT_ALLOWED_ORIGINS", "http://a:1")
    with pytest.raises(BadConfiguration, match=r"allowed_origins.*JSON"):
        load_settings()
    assert main(["cli", "-p", "hi"]) == 2
    assert capsys.readouterr().err.startswith("error: bad configuration: ")
    monkeypatch.delenv("AGENT_ALLOWED_ORIGINS")

    (clean_folder / "config.yaml").write_text("model: [unclosed\n")
    assert main(["cli", "-p", "hi"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: bad configuration: config.yaml is not valid YAML")
    assert "Traceback" not in err


def test_a_workspace_holding_the_program_or_its_python_is_refused(clean_folder: Path, capsys):
    program = Path(__file__).resolve().parent.parent
    for holder in (program, program.parent, Path(sys.prefix)):
        with pytest.raises(BadConfiguration, match="which commands could then change"):
            load_settings(workspace=holder)
    assert main(["cli", "--workspace", str(program), "-p", "hi"]) == 2
    assert "holds this program" in capsys.readouterr().err


def test_settings_files_inside_the_workspace_are_refused(
    clean_folder: Path, capsys, monkeypatch: pytest.MonkeyPatch
):
    """Started from inside the workspace, a command could write the .env or config.yaml the
    next start reads (say, to trust the workspace's MCP servers)."""
    monkeypatch.setenv("AGENT_DATA_DIR", str(clean_folder.parent / f"{clean_folder.name}-data"))
    assert load_settings(workspace=clean_folder).workspace == clean_folder.resolve()
    (clean_folder / ".env").write_text("AGENT_MCP_TRUST_WORKSPACE=true\n")
    with pytest.raises(BadConfiguration, match=r"\.env in .* lie in the workspace"):
        load_settings(workspace=clean_folder)
    assert main(["cli", "--workspace", ".", "-p", "hi"]) == 2
    assert "move them out" in capsys.readouterr().err
    assert load_settings(workspace=clean_folder / "inner").workspace.name == "inner"


def test_a_huge_planted_env_is_refused_before_it_is_read(clean_folder: Path):
    """Started in the workspace, a task could have left a `.env` of any size (or a pipe) there:
    the start is refused by where it lies, not after reading it whole (256 MB took 10 s and
    557 MB of memory)."""
    with (clean_folder / ".env").open("wb") as planted:
        planted.truncate(256 * 2**20)  # sparse: no disk, but the bytes a read brings in
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_")}
    env["AGENT_DATA_DIR"] = str(clean_folder.parent / f"{clean_folder.name}-data")
    argv = [sys.executable, "-c", PEAK_OF_MAIN, "cli", "--workspace", ".", "-p", "hi"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    *said, peak = done.stderr.splitlines()
    assert done.returncode == 2 and "lie in the workspace" in "".join(said), done.stderr
    assert int(peak) < 200 * 1024, f"the refused start's peak: {peak} KB"

    (clean_folder / ".env").unlink()
    os.mkfifo(clean_folder / ".env")  # no reader would ever end its read
    with pytest.raises(BadConfiguration, match=r"\.env in .* lie in the workspace"):
        load_settings(workspace=clean_folder)


def test_settings_files_are_read_as_small_regular_files_only(clean_folder: Path):
    (clean_folder / "config.yaml").write_text("model: m\n" + "#" * SETTINGS_FILE_BYTES)
    with pytest.raises(BadConfiguration, match=r"config\.yaml is over 256 KB.*not read"):
        load_settings()
    (clean_folder / "config.yaml").unlink()
    os.mkfifo(clean_folder / "config.yaml")  # opened without blocking, and left alone
    os.mkfifo(clean_folder / ".env")
    assert load_settings(workspace=clean_folder.parent / "ws").model is None


def test_a_settings_file_linked_into_the_workspace_is_refused(clean_folder: Path):
    workspace = clean_folder / "ws"
    workspace.mkdir()
    (workspace / "planted.yaml").write_text("mcp_trust_workspace: true\n")
    (clean_folder / "config.yaml").symlink_to(workspace / "planted.yaml")
    with pytest.raises(BadConfiguration, match=r"config\.yaml in .* lie in the workspace"):
        load_settings(workspace=workspace)


def test_a_data_folder_or_mcp_file_in_the_workspace_is_refused(clean_folder: Path, capsys):
    """A command could write what the server trusts as the user's: DATA_DIR/mcp.json (its
    servers start unsandboxed), DATA_DIR/agents and skills, the token, the history."""
    workspace = clean_folder / "ws"
    workspace.mkdir()
    with pytest.raises(BadConfiguration, match=r"the data folder .*/ws/data lies in the workspace"):
        load_settings(workspace=workspace, data_dir=workspace / "data")
    with pytest.raises(BadConfiguration, match=r"the MCP servers file .* lies in the workspace"):
        load_settings(workspace=workspace, mcp_config=workspace / "servers.json")
    with pytest.raises(BadConfiguration, match=r"the data folder .* lies in the workspace"):
        load_settings(workspace=clean_folder)  # from inside it: ./data is the default
    assert main(["mcp", "--workspace", "ws", "--data-dir", "ws/.agent"]) == 2
    assert "give --data-dir or AGENT_DATA_DIR a place outside it" in capsys.readouterr().err
    settings = load_settings(workspace=workspace, mcp_config=clean_folder / "servers.json")
    assert settings.data_dir == clean_folder / "data"


def test_names_match_in_any_case_and_a_provider_key_only_by_its_own_name(monkeypatch):
    monkeypatch.setenv("agent_model", "lower-case")
    monkeypatch.setenv("DEEPSEEK_API_KEY", "dk")
    monkeypatch.setenv("AGENT_MOONSHOT_API_KEY", "not-its-name")
    settings = load_settings()
    assert (settings.model, settings.deepseek_api_key) == ("lower-case", "dk")
    assert settings.moonshot_api_key is None


def test_a_section_field_in_dotenv_wins_over_its_json_and_config_yaml(clean_folder: Path):
    (clean_folder / "config.yaml").write_text(
        "docker:\n  image: yaml-image\n  memory: 9g\nlocal_sandbox:\n  tmp_mb: 32\n"
    )
    (clean_folder / ".env").write_text(
        'AGENT_DOCKER={"memory": "1g", "cpus": 2}\nAGENT_DOCKER_CPUS=3\n'
        'AGENT_LOCAL_SANDBOX_VISIBLE=["/opt/tools"]\n'
    )
    settings = load_settings()
    assert (settings.docker.image, settings.docker.memory, settings.docker.cpus) == (
        "yaml-image",
        "1g",
        3.0,
    )
    assert (settings.local_sandbox.tmp_mb, settings.local_sandbox.visible) == (32, ["/opt/tools"])


def test_json_that_is_not_json_is_named_with_where_it_was_read(clean_folder: Path, monkeypatch):
    monkeypatch.setenv("AGENT_LOCAL_SANDBOX_VISIBLE", "/opt/tools")
    with pytest.raises(BadConfiguration, match=r"AGENT_LOCAL_SANDBOX_VISIBLE in the environment"):
        load_settings()
    monkeypatch.delenv("AGENT_LOCAL_SANDBOX_VISIBLE")
    (clean_folder / ".env").write_text("AGENT_DOCKER=image=x\n")
    with pytest.raises(BadConfiguration, match=r"AGENT_DOCKER in \.env is not JSON"):
        load_settings()


@pytest.mark.parametrize("text", ["- model\n", "just text\n"])
def test_config_yaml_that_is_not_a_mapping_is_one_clear_line(clean_folder: Path, text, capsys):
    (clean_folder / "config.yaml").write_text(text)
    with pytest.raises(BadConfiguration, match="must map setting names to values"):
        load_settings()
    assert main(["cli", "-p", "hi"]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_an_empty_config_yaml_and_keys_not_ours_change_nothing(clean_folder: Path):
    (clean_folder / "config.yaml").write_text("# nothing yet\n")
    assert load_settings().model is None
    (clean_folder / "config.yaml").write_text("editor: vim\nmodel: from-yaml\nAGENT_MODE: x\n")
    settings = load_settings()
    assert (settings.model, settings.mode) == ("from-yaml", "fast")
