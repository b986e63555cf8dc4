"""The ops a client has on the workspace beside its conversations' tasks (docs/protocol.md
§4.1): the editor's files, background processes and apps, terminals, changes and git. Each is
one op through `call`; `Client` gives the connection."""

from __future__ import annotations

import abc
from typing import Any

from protocol.processes import BackgroundProcess, ProcessOutput


class WorkspaceOps(abc.ABC):
    @abc.abstractmethod
    def call(self, op: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        """Any op of §4.1: its ack, or WorkspaceError."""

    # --- the editor's files -----------------------------------------------------------

    def open_file(self, path: str) -> dict[str, Any]:
        """A workspace file as the page's editor opens it (open_file): `{path, size, content,
        version, read_only}`; `version` is what a save names."""
        return dict(self.call("open_file", {"path": path})["file"])

    def save_file(
        self, path: str, content: str, base_version: str | None, *, confirmed: bool = False
    ) -> dict[str, Any]:
        """Write `content` over the file last opened at `base_version` (None: no file there),
        as a person's edit (save_file): the saved file as open_file gives it. Raises
        WorkspaceError `conflict` when it changed since (nothing written: open it again), and
        `invalid` for Workspace Agent's own configuration unless `confirmed`."""
        payload = {"path": path, "content": content, "base_version": base_version}
        return dict(self.call("save_file", {**payload, "confirmed": confirmed})["file"])

    # --- background processes -------------------------------------------------------

    def list_processes(self, conversation_id: str) -> list[BackgroundProcess]:
        """The conversation's background processes, running and ended."""
        ack = self.call("list_processes", {"conversation_id": conversation_id})
        return [BackgroundProcess.from_wire(p) for p in ack["processes"]]

    def process_output(
        self, conversation_id: str, process_id: str, offset: int = 0
    ) -> ProcessOutput:
        """A process's output from byte `offset` (at most 64 KiB); what the model has read
        does not move. Raises WorkspaceError `not_found` when it does not run in the server."""
        ack = self.call(
            "process_output",
            {"conversation_id": conversation_id, "process_id": process_id, "offset": offset},
        )
        return ProcessOutput.from_wire(ack)

    def stop_process(self, conversation_id: str, process_id: str) -> BackgroundProcess:
        """Stop a running process; returns it as it ended."""
        ack = self.call(
            "stop_process", {"conversation_id": conversation_id, "process_id": process_id}
        )
        return BackgroundProcess.from_wire(ack["process"])

    def restart_process(self, conversation_id: str, process_id: str) -> BackgroundProcess:
        """Run a process's command again (stopping it first if it runs): the new process,
        with an id of its own. Raises WorkspaceError `busy` past the server's limit."""
        ack = self.call(
            "restart_process", {"conversation_id": conversation_id, "process_id": process_id}
        )
        return BackgroundProcess.from_wire(ack["process"])

    def open_app(
        self, conversation_id: str, process_id: str | None = None, port: int | None = None
    ) -> str:
        """The URL of an app a background process serves (docs/protocol.md §3 Apps): on its
        `port`, or the process's first. Raises WorkspaceError `not_found` when none listens."""
        ack = self.call(
            "open_app",
            {
                "conversation_id": conversation_id,
                **({"process_id": process_id} if process_id is not None else {}),
                **({"port": port} if port is not None else {}),
            },
        )
        return str(ack["url"])

    def open_terminal(self, conversation_id: str, rows: int = 24, cols: int = 80) -> str:
        """A new terminal (bash on a PTY in the conversation's sandbox session); its id. Its
        output comes as `terminal` events; `terminal_scrollback` reads what it holds."""
        ack = self.call(
            "terminal_open", {"conversation_id": conversation_id, "rows": rows, "cols": cols}
        )
        return str(ack["terminal_id"])

    def terminal_input(self, conversation_id: str, terminal_id: str, data: str) -> int:
        """Type `data` (16 KiB at most) into a terminal; the bytes it took."""
        ref = {"conversation_id": conversation_id, "terminal_id": terminal_id}
        return int(self.call("terminal_input", {**ref, "data": data})["written"])

    def resize_terminal(self, conversation_id: str, terminal_id: str, rows: int, cols: int) -> None:
        """Set a terminal's size in characters."""
        ref = {"conversation_id": conversation_id, "terminal_id": terminal_id}
        self.call("terminal_resize", {**ref, "rows": rows, "cols": cols})

    def terminal_scrollback(self, conversation_id: str, terminal_id: str) -> str:
        """What a terminal holds of its output (its last 256 KiB); this client follows it
        from then on (terminal_attach)."""
        ref = {"conversation_id": conversation_id, "terminal_id": terminal_id}
        return str(self.call("terminal_attach", ref)["data"])

    def close_terminal(self, conversation_id: str, terminal_id: str) -> None:
        """End a terminal's shell and all it runs."""
        self.call(
            "terminal_close", {"conversation_id": conversation_id, "terminal_id": terminal_id}
        )

    def list_terminals(self, conversation_id: str) -> list[str]:
        """The ids of the conversation's open terminals."""
        ack = self.call("list_terminals", {"conversation_id": conversation_id})
        return [str(t["terminal_id"]) for t in ack["terminals"]]

    # --- changes and git (§4.1) ---------------------------------------------------------

    def changes(self, conversation_id: str, message_id: str | None = None) -> dict[str, Any]:
        """The files each task changed with their diffs (`tasks`) and, for the whole
        conversation, since it began (`since_start`)."""
        payload = {"conversation_id": conversation_id} | (
            {"message_id": message_id} if message_id else {}
        )
        return self.call("changes", payload)

    def git_status(self) -> dict[str, Any]:
        """The workspace's git status: `repository` false, or its branch, head and files."""
        return self.call("git_status")

    def git_diff(self, *, staged: bool = False, path: str | None = None) -> dict[str, Any]:
        """The work tree's diff against the index (or the index's against HEAD, `staged`)."""
        return self.call("git_diff", {"staged": staged} | ({"path": path} if path else {}))

    def git_stage(self, paths: list[str]) -> None:
        """Stage these paths (git add)."""
        self.call("git_stage", {"paths": paths})

    def git_unstage(self, paths: list[str]) -> None:
        """Take these paths out of the index again."""
        self.call("git_unstage", {"paths": paths})

    def git_commit(self, message: str) -> str:
        """Commit what is staged; the new commit's hash."""
        return str(self.call("git_commit", {"message": message})["commit"])
