"""The document and SQL workers parse what a task or an upload brought, with C libraries, outside
the sandbox of commands: where bubblewrap confines commands it confines them too, with no
workspace, no network and of the program only its code (modules/sandbox/worker_jail.py). Real
bubblewrap, real workers; skipped where bubblewrap cannot run."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from modules.sandbox.worker_jail import FILES, WorkerJail, confine_workers, worker_jail
from modules.uploads.extraction import Limits, extract
from modules.uploads.file_types import ExtractionError
from tests.kit.processes import live_command_lines
from tests.kit.waits import wait_until
from tests.test_extraction import make_docx, slow_pdf
from utils.settings import PROGRAM_DIR, LocalSandboxSettings

OPTIONS = LocalSandboxSettings()
PROBE = """
import json, os, socket, sys
workspace, port, passed = sys.argv[1], int(sys.argv[2]), sys.argv[3]
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
try:
    socket.create_connection(("127.0.0.1", port), 2).close()
    network = True
except OSError:
    network = False
try:
    open(passed, "a").close()
    passed_writable = True
except OSError:
    passed_writable = False
print(json.dumps({
    "uid": os.getuid(),
    "capabilities": status["CapEff"].strip(),
    "no_new_privs": status["NoNewPrivs"].strip(),
    "workspace": os.path.exists(workspace),
    "program": sorted(os.listdir(sys.argv[4])),
    "code_writable": os.access(os.path.join(sys.argv[4], "modules"), os.W_OK),
    "python_writable": os.access(sys.prefix, os.W_OK),
    "network": network,
    "passed": open(passed).read(),
    "passed_writable": passed_writable,
}))
"""


@pytest.fixture
def jail() -> WorkerJail:
    found = worker_jail(OPTIONS)
    if found.bubblewrap is None:
        pytest.skip("bubblewrap cannot run here: the workers run unconfined, as before")
    return found


def test_a_worker_sees_no_workspace_no_network_and_only_the_programs_code(
    jail: WorkerJail, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "passed.txt").write_text("what the server opened\n")
    listener = socket.create_server(("127.0.0.1", 0))  # the host's loopback
    fd = os.open(workspace / "passed.txt", os.O_RDONLY)
    try:
        argv = [sys.executable, "-c", PROBE, str(workspace), str(listener.getsockname()[1])]
        argv += [jail.path_of(fd), str(PROGRAM_DIR)]
        with jail.confined(argv, (fd,)) as confined:
            done = subprocess.run(
                confined.argv,
                pass_fds=(fd, *confined.fds),
                cwd=PROGRAM_DIR,
                capture_output=True,
                text=True,
                timeout=60,
            )
    finally:
        os.close(fd)
        listener.close()
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["capabilities"] == "0000000000000000" and seen["no_new_privs"] == "1"
    if os.geteuid() == 0:
        assert seen["uid"] == 1000  # root's powers are gone, as a command's are
    assert not seen["workspace"] and not seen["network"]
    assert set(seen["program"]) <= {"modules", "utils", ".venv"}  # no .env, data, tests
    assert not seen["code_writable"] and not seen["python_writable"]
    assert jail.path_of(fd).startswith(FILES + "/")
    assert seen["passed"] == "what the server opened\n" and not seen["passed_writable"]


def test_a_document_is_extracted_in_the_jail_and_its_limits_hold(jail: WorkerJail) -> None:
    confine = confine_workers(OPTIONS)
    extracted = extract("report.docx", make_docx(), Limits(confine=confine))
    assert "Quarterly report" in extracted.text
    with pytest.raises(ExtractionError) as memory:
        extract("report.docx", make_docx(), Limits(memory_bytes=40 * 2**20, confine=confine))
    assert memory.value.reason in ("memory", "corrupt"), memory.value
    started = time.monotonic()
    with pytest.raises(ExtractionError, match="longer than 1 s") as slow:
        extract("slow.pdf", slow_pdf(), Limits(seconds=1, confine=confine))
    assert slow.value.reason == "timeout" and time.monotonic() - started < 10
    wait_until(  # stopped with its jail: nothing of it is left running
        lambda: not any("extract_worker" in argv for argv in live_command_lines().values()),
        10,
        "the stopped worker to be gone",
    )
