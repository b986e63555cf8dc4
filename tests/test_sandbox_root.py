"""What an injected command can do through the real server, run as root as CI runs it: no
capability, no remount, no write outside the workspace, one memory bound, no secret in its
environment, no setuid program left behind, and nothing the server later loads runs it."""

from __future__ import annotations

import json
import os
import shlex
import site
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest

from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit.clients import EventClient, connected
from tests.kit.server import ServerProcess

SECRET = "acme-service-password-9f8e7d"
NAMED = "tool-home-visible-1a2b"
TOTAL_MB = 200
TMP_MB = 32
TASK_SECONDS = 60  # a command plus two model calls, on a loaded machine
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.server(
        env={
            "AGENT_SANDBOX": "local",
            "ACME_SERVICE_PASSWORD": SECRET,
            "MY_TOOL_HOME": NAMED,
            "AGENT_COMMAND_ENV": '["MY_TOOL_HOME"]',
            "AGENT_LOCAL_SANDBOX_TOTAL_MEMORY_MB": str(TOTAL_MB),
            "AGENT_LOCAL_SANDBOX_TMP_MB": str(TMP_MB),
        }
    ),
]


@pytest.fixture
def isolation(client: EventClient) -> list[str]:
    """The sandbox's own account of itself (get_status); skips where it is not bubblewrap."""
    sandbox = client.call("get_status")["sandbox"]
    if sandbox["kind"] != "bubblewrap":
        pytest.skip(f"bubblewrap is not usable here (sandbox: {sandbox})")
    return list(sandbox["isolation"])


def run(client: EventClient, fake: FakeLLM, command: str) -> dict[str, Any]:
    """Have the model run `command` through the server; the tool result's payload."""
    fake.script(Reply(tool_calls=[Call("run_command", {"command": command})]), Reply(content="ok"))
    cid = client.start("run it")
    events = client.wait_done(cid, TASK_SECONDS)
    return next(
        e.payload for e in events if e.name == "tool" and e.payload.get("phase") == "result"
    )


def status_fields(output: str) -> dict[str, str]:
    fields = {}
    for line in output.splitlines():
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    return fields


def test_a_command_has_no_capability_and_no_root_identity(
    client: EventClient, fake: FakeLLM, isolation: list[str]
) -> None:
    result = run(client, fake, "grep -E '^(Uid|Cap[A-Za-z]+|NoNewPrivs):' /proc/self/status")
    fields = status_fields(result["output"])
    for cap in ("CapEff", "CapPrm", "CapBnd", "CapAmb", "CapInh"):
        assert fields[cap] == "0000000000000000", result["output"]
    assert fields["NoNewPrivs"] == "1"
    assert fields["Uid"].split()[0] != "0"
    assert any(line.startswith("user:") and "no capabilities" in line for line in isolation)


def test_no_remount_and_no_write_outside_the_workspace(
    client: EventClient, fake: FakeLLM, isolation: list[str]
) -> None:
    venv_site = sysconfig.get_paths()["purelib"]
    base_site = sysconfig.get_paths(vars={"base": sys.base_prefix})["purelib"]
    tag = f"probe-{os.getpid()}"
    targets = [f"/etc/{tag}", f"/usr/{tag}", f"{venv_site}/{tag}.pth", f"{base_site}/{tag}.pth"]
    writes = "; ".join(f"echo 'import os' > {t} && echo WROTE {t}" for t in targets)
    core_pattern = Path("/proc/sys/kernel/core_pattern").read_text()
    command = (
        "mount -o remount,bind,rw /etc && echo REMOUNTED; "
        f"mount -o remount,bind,rw {venv_site} && echo REMOUNTED; "
        "unshare -U -r true && echo NESTED; "
        "echo '|/bin/false' > /proc/sys/kernel/core_pattern && echo SYSCTL; "
        f"{writes}; true"
    )
    result = run(client, fake, command)
    output = result["output"]
    assert "REMOUNTED" not in output and "NESTED" not in output and "SYSCTL" not in output
    assert "WROTE" not in output, output
    assert not any(Path(t).exists() for t in targets)
    assert Path("/proc/sys/kernel/core_pattern").read_text() == core_pattern
    assert site.getsitepackages()  # the paths above are this interpreter's own


def test_no_setuid_program_is_left_behind(
    client: EventClient, fake: FakeLLM, server: ServerProcess, isolation: list[str]
) -> None:
    command = (
        "cp /usr/bin/id ./suid-id; chmod 4755 suid-id && echo SETUID; "
        "python3 -c \"import os; os.open('sgid', os.O_CREAT | os.O_WRONLY, 0o2755)\" "
        "&& echo SETGID; ls -l suid-id"
    )
    result = run(client, fake, command)
    assert "SETUID" not in result["output"] and "SETGID" not in result["output"]
    assert "Operation not permitted" in result["output"]
    made = server.workspace / "suid-id"
    assert made.exists() and not made.stat().st_mode & 0o6000
    assert not (server.workspace / "sgid").exists()
    assert any(line.startswith("set-id bits: refused") for line in isolation)


@pytest.mark.skipif(os.geteuid() != 0, reason="files only root may read are hidden from root")
def test_files_only_root_may_read_are_hidden(
    client: EventClient, fake: FakeLLM, isolation: list[str]
) -> None:
    shadow = Path("/etc/shadow")
    if not shadow.exists() or shadow.stat().st_mode & 0o004:
        pytest.skip("no /etc/shadow that only root may read")
    result = run(client, fake, "head -c 200 /etc/shadow && echo READ")
    assert "READ" not in result["output"] and "root:" not in result["output"], result["output"]
    assert "Permission denied" in result["output"]


def test_a_command_all_its_processes_and_its_tmp_share_one_memory_bound(
    client: EventClient, fake: FakeLLM, isolation: list[str]
) -> None:
    if not any(line.startswith(f"memory: at most {TOTAL_MB} MB") for line in isolation):
        pytest.skip(f"no writable memory cgroup here: {isolation}")
    hog = (
        "import os, time\n"
        "for _ in range(3):\n"
        "    if os.fork() == 0:\n"
        f"        b = bytearray({TOTAL_MB // 2} * 1024 * 1024)\n"
        "        b[::4096] = b'x' * len(b[::4096])\n"
        "        time.sleep(5); os._exit(0)\n"
        "clean = sum(os.wait()[1] == 0 for _ in range(3))\n"
        "print('clean exits:', clean)\n"
    )
    result = run(client, fake, f"python3 -c {shlex.quote(hog)}")
    assert "clean exits: 3" not in result["output"]
    assert f"memory limit of {TOTAL_MB} MB" in result["output"], result["output"]


def test_tmp_is_a_small_private_tmpfs(
    client: EventClient, fake: FakeLLM, isolation: list[str]
) -> None:
    result = run(client, fake, f"head -c {TMP_MB * 2}M /dev/zero > /tmp/fill; ls -l /tmp/fill")
    assert "No space left on device" in result["output"], result["output"]
    assert any(f"private /tmp ({TMP_MB} MB)" in line for line in isolation)


def test_commands_get_an_allow_list_of_variables_and_the_named_ones(
    client: EventClient, fake: FakeLLM, server: ServerProcess, isolation: list[str]
) -> None:
    result = run(client, fake, "env")
    names = {line.split("=", 1)[0] for line in result["output"].splitlines() if "=" in line}
    assert SECRET not in result["output"]
    assert server.env["AGENT_API_KEY"] not in result["output"]
    assert server.env["AGENT_WEB_TOKEN"] not in result["output"]
    assert f"MY_TOOL_HOME={NAMED}" in result["output"]
    assert "PATH" in names and not any(name.startswith("AGENT_") for name in names)
    assert any(line.startswith("environment: only PATH") for line in isolation)


def test_a_prompt_template_written_by_a_command_cannot_reach_the_server(
    fake: FakeLLM, tmp_path: Path
) -> None:
    """An agent file in the workspace is rendered by the server, outside the sandbox: its
    template may use variables, never Python's internals; one that tries is not loaded."""
    workspace, data = tmp_path / "ws", tmp_path / "data"
    marker = tmp_path / "escaped"
    payload = (
        "{{ cycler.__init__.__globals__.os.system('touch " + str(marker) + "') }}"
        "{{ cycler.__init__.__globals__.os.environ }}"
    )
    agent = {"name": "general", "description": "planted", "system_prompt": payload}
    quoted = json.dumps(json.dumps(agent))
    plant = f"mkdir -p .agents/agents && echo {quoted} > .agents/agents/general.json"
    with (
        ServerProcess(workspace, data, base_url=fake.base_url, api_key=fake.api_key) as first,
        connected(first.url) as sio,
    ):  # a command's change to an agent file is held until the user approves it: they do
        fake.script(
            Reply(tool_calls=[Call("run_command", {"command": plant})]), Reply(content="ok")
        )
        cid = sio.start("run it")
        held = sio.wait_for("tool", phase="approval", name="run_command")
        approval = {"conversation_id": cid, "call_id": held["call_id"], "approved": True}
        assert sio.call("approve", approval)["ok"]
        sio.wait_done(cid, TASK_SECONDS)
    assert (workspace / ".agents/agents/general.json").exists()
    with ServerProcess(workspace, data, base_url=fake.base_url, api_key=fake.api_key) as second:
        fake.script(Reply(content="hello"))
        with connected(second.url) as sio:
            cid = sio.start("hi")
            done = sio.wait_done(cid, TASK_SECONDS)[-1]
    assert (
        done.payload["reason"] == "complete"
    )  # with the shipped agent: the planted one is refused
    assert not marker.exists()
    for request in fake.chat_requests:
        assert second.env["AGENT_API_KEY"] not in json.dumps(request.body)
