"""MCP configuration: the files' formats, trusting a workspace's servers, and the tool names."""

from __future__ import annotations

from core.agent_specs import AgentSpec
from modules.mcp.config import ServerConfig, ServerEntry, load_config, tool_name
from tests.kit.mcp_servers import write_config


def entry_of(server: ServerConfig) -> ServerEntry:
    """The entry of a server whose configuration was read (None only for one that was not)."""
    assert server.entry is not None, server.problem
    return server.entry


def problem_of(server: ServerConfig) -> str:
    """What keeps a server from starting, for one the test knows has a problem."""
    assert server.problem is not None
    return server.problem


def test_config_reads_the_claude_desktop_and_cline_formats(tmp_path, monkeypatch):
    monkeypatch.setenv("FIXTURE_TOKEN", "s3cret")
    user = write_config(
        tmp_path / "user.json",
        {
            "files": {
                "command": "npx",
                "args": ["-y", "server"],
                "env": {"KEY": "${FIXTURE_TOKEN}"},
                "alwaysAllow": ["read"],
                "disabled": True,
            },
            "remote": {
                "url": "https://example.test/mcp",
                "headers": {"X": "${MISSING:-fallback}"},
                "allowedTools": ["search_*"],
                "timeout": 5,
            },
            "old": {"url": "http://127.0.0.1:1/sse", "type": "sse"},
            "cline": {"url": "http://127.0.0.1:1/mcp", "type": "streamableHttp"},
            "broken": {"args": ["x"]},
            "unset": {"command": "${NOT_SET_ANYWHERE}"},
        },
    )
    config = load_config(user, tmp_path / ".mcp.json", trust_workspace=False)
    servers = config.servers
    assert entry_of(servers["files"]).env == {"KEY": "s3cret"}
    assert entry_of(servers["files"]).always_allow == ["read"]
    assert not servers["files"].enabled
    assert entry_of(servers["remote"]).transport == "http"
    assert entry_of(servers["remote"]).headers == {"X": "fallback"}
    assert entry_of(servers["remote"]).allowed_tools == ["search_*"]
    assert entry_of(servers["old"]).transport == "sse"
    assert entry_of(servers["cline"]).transport == "http"
    broken = problem_of(servers["broken"])
    assert str(user) in broken and "command" in broken
    assert "NOT_SET_ANYWHERE" in problem_of(servers["unset"])
    (tmp_path / "bad.json").write_text("{not json")
    bad = load_config(tmp_path / "bad.json", tmp_path / ".mcp.json", trust_workspace=False)
    assert bad.servers == {} and str(tmp_path / "bad.json") in bad.problems[0]["path"]


def test_workspace_servers_start_only_when_trusted_and_the_users_file_wins(tmp_path):
    workspace = tmp_path / "ws"
    write_config(
        workspace / ".mcp.json",
        {"mine": {"command": "evil"}, "both": {"command": "from-workspace"}},
    )
    user = write_config(tmp_path / "user.json", {"both": {"command": "from-user"}})
    untrusted = load_config(user, workspace / ".mcp.json", trust_workspace=False)
    assert not untrusted.servers["mine"].enabled
    assert "AGENT_MCP_TRUST_WORKSPACE" in problem_of(untrusted.servers["mine"])
    assert entry_of(untrusted.servers["both"]).command == "from-user"
    assert untrusted.servers["both"].enabled
    assert load_config(user, workspace / ".mcp.json", trust_workspace=True).servers["mine"].enabled


def test_tool_names_are_namespaced_short_stable_and_distinct():
    assert tool_name("github", "create_issue") == "mcp__github__create_issue"
    long = tool_name("a-very-long-server-name-indeed", "and_an_even_longer_tool_name_here_too")
    assert len(long) == 64 and long == tool_name(
        "a-very-long-server-name-indeed", "and_an_even_longer_tool_name_here_too"
    )
    cleaned = {tool_name("a.b", "x"), tool_name("a_b", "x"), tool_name("a b", "x")}
    assert len(cleaned) == 3
    assert all(len(n) <= 64 and n.replace("_", "").replace("-", "").isalnum() for n in cleaned)
    spec = AgentSpec(name="gh", description="d", tools=["read_file", "mcp__github__*"])
    assert spec.allows("mcp__github__create_issue") and not spec.allows("mcp__gitlab__x")
