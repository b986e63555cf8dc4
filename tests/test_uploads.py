"""Uploads, attachments, downloads and the workspace zip through the real server process;
hostile files refused quickly while the server goes on serving; `/attach` and
`read_document`."""

from __future__ import annotations

import io
import threading
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest
import requests

from cli.session import run_command
from cli.terminal import CliTerminal
from core.services import build_services
from modules.tools.catalogue import build_registry
from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit.clients import connected
from tests.kit.processes import live_command_lines
from tests.kit.server import ServerProcess
from tests.kit.settings import TOKEN, make_settings
from tests.kit.tools import call, make_ctx
from tests.kit.waits import wait_until
from tests.test_extraction import (
    billion_laughs_docx,
    make_docx,
    make_pptx,
    make_xlsx,
    slow_pdf,
    zip_bomb_docx,
)

AUTH = {"Authorization": f"Bearer {TOKEN}"}
COOKIE = {"Cookie": f"agent_token={TOKEN}"}  # what a browser sends along, from any page
pytestmark = pytest.mark.server(
    env={"AGENT_UPLOAD_LIMIT_MB": "2", "AGENT_EXTRACT_TIMEOUT": "3"},  # 3 s to parse one
    files={
        "README.md": "# demo\n",
        "src/app.py": "print('app')\n",
        "node_modules/dep/index.js": "junk\n",
        ".gitignore": "build/\n",
        "build/out.bin": b"\x00",
    },
)


def upload(server: ServerProcess, name: str, data: bytes, **kwargs: Any) -> requests.Response:
    return requests.post(
        f"{server.url}/api/upload",
        files={"file": (name, data)},
        headers=kwargs.pop("headers", AUTH),
        timeout=30,
        **kwargs,
    )


def uploads_folder(server: ServerProcess) -> list[str]:
    folder = server.workspace / "uploads"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_an_upload_is_stored_shown_and_its_text_goes_with_the_message(
    server: ServerProcess, fake: FakeLLM
):
    with connected(server.url) as client:
        answer = upload(server, "Q3 report.docx", make_docx())
        assert answer.status_code == 200, answer.text
        stored = answer.json()
        assert stored["path"] == "uploads/Q3_report.docx"
        assert (stored["kind"], stored["size"]) == ("docx", len(make_docx()))
        client.wait_until(
            lambda events: any(
                e.name == "file_tree"
                and (change["event"], change["path"]) == ("created", "uploads/Q3_report.docx")
                for e in events
                for change in e.payload["changes"]
            ),
            what="the upload in the tree",
        )
        assert (
            upload(server, "Q3 report.docx", make_docx()).json()["path"]
            == "uploads/Q3_report-2.docx"
        )

        raw = requests.post(
            f"{server.url}/api/upload?name=budget.xlsx", data=make_xlsx(), headers=AUTH, timeout=30
        )
        assert raw.json()["path"] == "uploads/budget.xlsx", raw.text

        fake.script(Reply(content="Read them."))
        cid = client.start(
            "what do these say?", attachments=["uploads/Q3_report.docx", "uploads/budget.xlsx"]
        )
        client.wait_done(cid)
        sent = fake.chat_requests[-1].messages[-1]["content"]
        assert sent.startswith("what do these say?\n\n[Attached file uploads/Q3_report.docx")
        assert "Revenue grew by 12 percent." in sent
        assert "2: rent | 1 | 3 [=B2+2]" in sent

        history = client.call("get_conversation", {"conversation_id": cid})["messages"]
        user = next(record for record in history if record["role"] == "user")
        assert user["content"] == "what do these say?"
        assert [a["path"] for a in user["meta"]["attachments"]] == [
            "uploads/Q3_report.docx",
            "uploads/budget.xlsx",
        ]

        refused = client.call(
            "send_message",
            {"conversation_id": cid, "text": "and this?", "attachments": ["../outside.txt"]},
        )
        assert refused["ok"] is False and refused["error"]["code"] == "invalid"


@pytest.mark.parametrize(
    ("name", "make", "status", "code", "words"),
    [
        ("big.txt", lambda: b"a" * (2 * 1024 * 1024 + 1), 413, "too_large", "limit is 2 MB"),
        ("report.docx", zip_bomb_docx, 422, "zip_bomb", "possible zip bomb"),
        ("report.docx", billion_laughs_docx, 422, "xml_entities", "declares a DTD"),
        ("photo.png", make_pptx, 415, "mismatch", "not a image/png image"),
        ("slides.pptx", make_docx, 415, "mismatch", "no ppt/presentation.xml"),
        ("slow.pdf", slow_pdf, 422, "timeout", "longer than 3 s"),
    ],
)
def test_hostile_files_are_refused_quickly_and_the_server_goes_on(
    server: ServerProcess, name: str, make: Any, status: int, code: str, words: str
):
    before = uploads_folder(server)
    started = time.monotonic()
    answer = upload(server, name, make())
    assert time.monotonic() - started < 8
    assert answer.status_code == status, answer.text
    assert answer.json()["error"]["code"] == code
    assert words in answer.json()["error"]["message"]
    assert uploads_folder(server) == before
    assert requests.get(f"{server.url}/api/status", headers=AUTH, timeout=5).json()["ok"]


def test_an_oversized_body_is_refused_from_its_length(server: ServerProcess):
    answer = requests.post(
        f"{server.url}/api/upload?name=x.txt", data=b"a" * (3 * 2**20), headers=AUTH, timeout=30
    )
    assert answer.status_code == 413
    assert "AGENT_UPLOAD_LIMIT_MB" in answer.json()["error"]["message"]


def test_uploads_and_downloads_need_the_token(server: ServerProcess):
    assert upload(server, "a.txt", b"hi", headers={}).status_code == 401
    assert requests.get(f"{server.url}/api/archive", timeout=5).status_code == 401
    assert requests.get(f"{server.url}/api/download?path=README.md", timeout=5).status_code == 401


@pytest.mark.parametrize(
    "foreign",
    [
        {"Origin": "http://127.0.0.1:8080", "Sec-Fetch-Site": "same-site"},  # another port
        {"Origin": "http://localhost:8080"},
        {"Origin": "null"},
        {"Sec-Fetch-Site": "cross-site"},
    ],
)
def test_a_page_elsewhere_cannot_upload_with_the_cookie(
    server: ServerProcess, foreign: dict[str, str]
):
    before = uploads_folder(server)
    answer = upload(server, "planted.txt", b"hi", headers={**COOKIE, **foreign})
    assert answer.status_code == 403 and answer.json()["ok"] is False
    assert answer.json()["error"]["code"] == "forbidden_origin"
    assert uploads_folder(server) == before


def test_the_page_itself_uploads_with_the_cookie(server: ServerProcess):
    own = {**COOKIE, "Origin": server.url, "Sec-Fetch-Site": "same-origin"}
    answer = upload(server, "mine.txt", b"hi", headers=own)
    assert answer.json()["ok"] is True and "mine.txt" in uploads_folder(server)


def test_a_file_downloads_as_an_attachment_never_inline(server: ServerProcess):
    (server.workspace / "page.html").write_text("<script>alert(1)</script>")
    answer = requests.get(
        f"{server.url}/api/download", params={"path": "page.html"}, headers=AUTH, timeout=5
    )
    assert answer.status_code == 200
    assert answer.content == b"<script>alert(1)</script>"
    assert answer.headers["Content-Type"] == "application/octet-stream"
    assert answer.headers["Content-Disposition"].startswith("attachment")
    for bad in ("../etc/passwd", "/etc/passwd", "missing.txt"):
        refused = requests.get(
            f"{server.url}/api/download", params={"path": bad}, headers=AUTH, timeout=5
        )
        assert refused.status_code in (400, 404) and refused.json()["ok"] is False


def test_the_workspace_zip_holds_what_the_tree_shows(server: ServerProcess):
    (server.workspace / "src" / "outside").symlink_to("/etc")
    answer = requests.get(f"{server.url}/api/archive", headers=AUTH, timeout=10, stream=True)
    assert answer.status_code == 200
    assert answer.headers["Content-Type"] == "application/zip"
    assert "Content-Length" not in answer.headers  # streamed
    archive = zipfile.ZipFile(io.BytesIO(answer.raw.read()))
    assert archive.testzip() is None
    names = set(archive.namelist())
    assert {"ws/README.md", "ws/src/app.py", "ws/.gitignore"} <= names
    assert not any("node_modules" in n or "build/" in n or "outside" in n for n in names)
    assert archive.read("ws/src/app.py") == b"print('app')\n"
    folder = requests.get(
        f"{server.url}/api/download", params={"path": "src"}, headers=AUTH, timeout=10
    )
    assert zipfile.ZipFile(io.BytesIO(folder.content)).namelist() == ["src/app.py"]


def test_attach_in_the_cli_copies_the_file_in_and_sends_its_text(tmp_path: Path, fake_llm):
    outside = tmp_path / "Desktop"
    outside.mkdir()
    (outside / "plan.pptx").write_bytes(make_pptx())
    settings = make_settings(fake_llm, tmp_path)
    out, err = io.StringIO(), io.StringIO()
    terminal = CliTerminal(build_services(settings), out=out, err=err)
    assert run_command(terminal, f"/attach {outside / 'plan.pptx'}")
    assert "uploads/plan.pptx (PowerPoint deck" in out.getvalue()
    (tmp_path / "ws" / "notes.md").write_text("# Notes\nbuy milk\n")
    run_command(terminal, "/attach notes.md")
    run_command(terminal, "/attach /no/such/file.txt")
    assert "no such file" in err.getvalue().lower()
    fake_llm.script(Reply(content="Done."))
    assert terminal.run_foreground("summarise these") == "complete"
    sent = fake_llm.chat_requests[-1].messages[-1]["content"]
    assert "Launch plan" in sent and "buy milk" in sent
    assert terminal.attachments == []  # they went with that message only
    fake_llm.script(Reply(content="Again."))
    terminal.run_foreground("and now?")
    assert fake_llm.chat_requests[-1].messages[-1]["content"] == "and now?"


def test_read_document_reads_a_document_in_parts(tmp_path: Path):
    ctx = make_ctx(tmp_path, attachment_chars=1_000, output_limit_chars=5_000)
    (tmp_path / "ws" / "report.docx").write_bytes(make_docx())
    result = call(ctx, "read_document", path="report.docx")
    assert result.ok, result.output
    assert result.output.startswith("report.docx (Word document")
    assert "Revenue grew by 12 percent." in result.output
    (tmp_path / "ws" / "long.md").write_text("y" * 1_500)
    first = call(ctx, "read_document", path="long.md")
    assert first.output.endswith("[More: read_document(path='long.md', offset=1000)]")
    rest = call(ctx, "read_document", path="long.md", offset=1000)
    assert rest.output.endswith("y" * 500)
    for bad, words in (("../x.docx", "outside the workspace"), ("report.docx/..", "folder")):
        refused = call(ctx, "read_document", path=bad)
        assert not refused.ok and words in refused.output
    offered = build_registry().schemas(read_only=True)
    assert "read_document" in [schema["function"]["name"] for schema in offered]


def test_the_agent_reads_an_attachment_later_with_read_document(
    server: ServerProcess, fake: FakeLLM
):
    (server.workspace / "memo.docx").write_bytes(make_docx())
    fake.script(
        Reply(tool_calls=[Call("read_document", {"path": "memo.docx"})]),
        Reply(content="It says revenue grew."),
    )
    with connected(server.url) as client:
        cid = client.start("read memo.docx")
        events = client.wait_done(cid)
    result = next(e.payload for e in events if e.name == "tool" and e.payload["phase"] == "result")
    assert result["ok"] and "Revenue grew by 12 percent." in result["output"]


def test_under_eventlet_a_parse_runs_beside_the_server_not_in_its_way(tmp_path: Path) -> None:
    """The extraction child is waited on by a green thread: while a slow parse runs to its
    time limit, the same server answers at once, and a good file still extracts."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env = {"AGENT_EXTRACT_TIMEOUT": "3"}
    with (
        FakeLLM("deepseek") as fake,
        ServerProcess(
            workspace,
            tmp_path / "data",
            base_url=fake.base_url,
            api_key=fake.api_key,
            async_mode="eventlet",
            env=env,
        ) as server,
    ):
        results: dict[str, requests.Response] = {}
        slow = threading.Thread(
            target=lambda: results.setdefault("slow", upload(server, "slow.pdf", slow_pdf()))
        )
        slow.start()
        wait_until(
            lambda: any("extract_worker" in a for a in live_command_lines(server.pid).values()),
            10,
            "the slow parse to be under way",
        )
        started = time.monotonic()
        status = requests.get(f"{server.url}/api/status", headers=AUTH, timeout=5)
        assert status.ok and time.monotonic() - started < 1.0
        good = upload(server, "notes.docx", make_docx())
        assert good.status_code == 200 and good.json()["ok"]
        slow.join(20)
        assert results["slow"].status_code == 422
        assert results["slow"].json()["error"]["code"] == "timeout"
