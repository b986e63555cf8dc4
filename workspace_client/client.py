"""`Client`: a Python program's way into a running web workspace (docs/protocol.md §4, §7, §11).

    from workspace_client import Client

    with Client("http://127.0.0.1:5000", token="...") as client:
        for event in client.run("List the files"):
            if isinstance(event, Token):
                print(event.text, end="")

What it guarantees:
- Every event of a conversation reaches you once and in `seq` order, as the typed
  dataclasses (protocol/events.py). `events(cid)` ends after the task's top-level `Done`.
- One reader thread calls `subscribe` handlers in wire order. A handler must not call the
  client's ops (their answers come through that same thread; such a call would wait out its
  timeout): hand that work to another thread. A handler that raises ends the connection (the
  client reconnects and rejoins); catch what you expect.
- When the connection drops, it reconnects with backoff and `join`s every conversation it
  follows with `after_seq` = the last seq it delivered; the join's replay fills the gap. When
  the server cannot replay it (it restarted, or the task's log moved on) it reloads the
  conversation: a `Reloaded` event, then the followed task's end as the server kept it (`Done`
  `interrupted` when the task died with its server). Events held during a rejoin are
  delivered after its answer, in `seq` order, none twice. A cluster's `Notice` `events_lost`
  (§13) makes it rejoin the same way.
- `on_approval(event) -> True | False | "always"` answers `tool` events of phase `approval`
  with the `approve` op, on a thread of its own (it may prompt a person). Without it, the
  calls wait for another client (the page) to answer. An answer the connection lost on its way
  is asked for again after the rejoin when the server still waits for that call (the join
  replays the approval without its result).
- An op answered `{ok: false}` raises `WorkspaceError(code, message)`.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal
from urllib.parse import quote, urlencode

import simple_websocket

from protocol.events import Event, ToolEvent
from workspace_client.connection import Connection, ConnectionRefused, Disconnected
from workspace_client.stream import Followed, Handler, Stream
from workspace_client.workspace_ops import WorkspaceOps

ApprovalAnswer = bool | Literal["always"]
ApprovalCallback = Callable[[ToolEvent], ApprovalAnswer]
LinkState = Literal["lost", "back", "refused", "gone"]
LinkCallback = Callable[[LinkState, Exception | None], None]
FIRST_RETRY, LAST_RETRY = 0.1, 5.0  # seconds between reconnect attempts, doubling


class WorkspaceError(Exception):
    """An op the server refused: `code` as docs/protocol.md §4.4 lists them."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code, self.message = code, message


@dataclass(frozen=True)
class Started:
    """What `send` started: the conversation (new or given) and the task's user message."""

    conversation_id: str
    message_id: str


class Client(WorkspaceOps):
    """A connection to a web workspace that survives the server's restarts (see the module)."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        on_approval: ApprovalCallback | None = None,
        batch_deltas: bool = False,
        timeout: float = 10.0,
        reconnect_for: float = 60.0,
        on_link: LinkCallback | None = None,
    ) -> None:
        """`token`: the server's (§3); default AGENT_WEB_TOKEN from the environment. `timeout`:
        seconds an op waits for its answer; `reconnect_for`: how long to try to reconnect
        before the iterators raise `Disconnected`; `on_link(state, error)`: told at once when
        the connection is `lost` (reconnecting), `back`, or, with the error the ops and
        iterators raise from then on, `refused` by the server (ConnectionRefused: a restarted
        server with another token) or `gone` (Disconnected: none answered for
        `reconnect_for`). Raises ConnectionRefused
        (`code` `wrong_token`, ...) or OSError when the first connection fails."""
        token = token or os.environ.get("AGENT_WEB_TOKEN")
        if not token:
            raise ValueError(
                "a token is needed: pass token= or set AGENT_WEB_TOKEN (the server keeps its "
                "token in DATA_DIR/web_token and prints it in its URL)"
            )
        self.url = url.rstrip("/")
        self.timeout, self.reconnect_for = timeout, reconnect_for
        self._token = token
        self._auth: dict[str, Any] = {"token": token}
        if batch_deltas:
            self._auth["batch_deltas"] = True
        self._on_approval = on_approval
        self._approvals: queue.SimpleQueue[ToolEvent | None] = queue.SimpleQueue()
        self._stream = Stream(self.call, self._approvals.put if on_approval else None)
        self._on_link = on_link
        self._link = threading.Condition()  # notified when _up or _stream.failure changes
        self._up = False
        self._connection = self._open()
        self._up = True
        if on_approval is not None:
            threading.Thread(
                target=self._answer_approvals, name="workspace-approvals", daemon=True
            ).start()

    # --- tasks ----------------------------------------------------------------------

    def send(self, text: str, conversation_id: str | None = None, **options: Any) -> Started:
        """`send_message` (§4.1): options `mode`, `approval`, `agent`, `skill`, `focus`,
        `parent_id`, `attachments`, `budget_override`. Its events are kept for `events()`."""
        if conversation_id is not None:
            self._stream.begin(conversation_id)
        ack = self.call(
            "send_message", {"conversation_id": conversation_id, "text": text, **options}
        )
        started = Started(str(ack["conversation_id"]), str(ack["message_id"]))
        self._stream.begin(started.conversation_id)
        return started

    def events(self, conversation_id: str) -> Iterator[Event]:
        """The conversation's events, each once and in seq order, up to and including the
        top-level `Done` of its task. A conversation this client neither sent to nor follows
        is joined first (from seq 0: its running or last task from the start). Raises
        `Disconnected` when the connection is lost for good."""
        return self._stream.events(conversation_id)

    def run(self, text: str, conversation_id: str | None = None, **options: Any) -> Iterator[Event]:
        """`send` then `events`: the task's events up to its `Done`."""
        started = self.send(text, conversation_id, **options)
        return self.events(started.conversation_id)

    def follow(self, conversation_id: str, after_seq: int = 0) -> Followed:
        """`join` the conversation (its events from `after_seq` on, replayed then live) and
        rejoin it after every reconnect."""
        return self._stream.follow(conversation_id, after_seq)

    def subscribe(self, conversation_id: str | None, handler: Handler) -> Callable[[], None]:
        """Call `handler(event)` for each of the conversation's events (None: events outside
        conversations, `file_tree` and `conversation_update`), on the reader thread, in
        order. Joins the conversation when not followed yet. Returns the unsubscribe."""
        return self._stream.subscribe(conversation_id, handler)

    def cancel(self, conversation_id: str) -> None:
        """Stop the conversation's task (`not_running` when none runs)."""
        self.call("cancel", {"conversation_id": conversation_id})

    def approve(
        self, conversation_id: str, call_id: str, approved: bool, *, always: bool = False
    ) -> list[str]:
        """Answer a call waiting for approval; returns the tools now always allowed."""
        ack = self.call(
            "approve",
            {
                "conversation_id": conversation_id,
                "call_id": call_id,
                "approved": approved,
                "always": always,
            },
        )
        return list(ack.get("always_allowed") or [])

    # --- conversations and files ----------------------------------------------------

    def conversations(self, query: str | None = None) -> list[dict[str, Any]]:
        """Newest first: `{id, title, created_at, updated_at, tasks, running, snippet?...}`."""
        ack = self.call("list_conversations", {} if query is None else {"query": query})
        running = set(ack.get("running") or [])
        return [{**c, "running": c["id"] in running} for c in ack["conversations"]]

    def get_conversation(self, conversation_id: str) -> dict[str, Any]:
        """The `get_conversation` answer (§4.1) without `ok`."""
        return _without_ok(self.call("get_conversation", {"conversation_id": conversation_id}))

    def rename_conversation(self, conversation_id: str, title: str) -> str:
        ack = self.call("rename_conversation", {"conversation_id": conversation_id, "title": title})
        return str(ack["title"])

    def delete_conversation(self, conversation_id: str) -> None:
        self.call("delete_conversation", {"conversation_id": conversation_id})

    def undo(
        self,
        conversation_id: str,
        message_id: str | None = None,
        *,
        overwrite: bool | list[str] | None = None,
    ) -> dict[str, Any]:
        """Undo a task (default: the last): `{restored, removed, skipped, conflicts, message}`."""
        payload: dict[str, Any] = {"conversation_id": conversation_id}
        if message_id is not None:
            payload["message_id"] = message_id
        if overwrite is not None:
            payload["overwrite"] = overwrite
        return _without_ok(self.call("undo_task", payload))

    def status(self, conversation_id: str | None = None) -> dict[str, Any]:
        """The `get_status` answer without `ok`."""
        payload = {} if conversation_id is None else {"conversation_id": conversation_id}
        return _without_ok(self.call("get_status", payload))

    def settings(self) -> dict[str, Any]:
        """The `get_settings` answer without `ok`: each editable setting, where it comes from
        and whether this run fixes it (the API key only as whether one is set)."""
        return _without_ok(self.call("get_settings", {}))

    def set_settings(self, **changes: Any) -> dict[str, Any]:
        """Change the user's settings (`model="..."`, `api_key="..."`; None: back to the
        default); the new `get_settings` answer. A refusal raises WorkspaceError `invalid`
        naming each refused setting."""
        return _without_ok(self.call("set_settings", {"settings": changes}))

    def list_files(self, path: str = "") -> list[dict[str, Any]]:
        """The entries of a workspace folder (`""`: the top) as the file tree shows them:
        `{name, path, is_dir, children?, annotation?}`. Raises WorkspaceError `not_found`."""
        node = self.call("get_file_tree", {})["tree"]
        for part in [p for p in path.strip("/").split("/") if p]:
            node = next((c for c in node.get("children") or [] if c["name"] == part), None)
            if node is None or not node.get("is_dir"):
                raise WorkspaceError("not_found", f"{path!r} is not a folder of the workspace")
        return list(node.get("children") or [])

    def read_file(self, path: str) -> dict[str, Any]:
        """`GET /api/file` (§7): `{path, content, truncated, binary, size}`."""
        return self._http("GET", "/api/file?" + urlencode({"path": path}))

    def upload(self, source: str | Path, name: str | None = None) -> dict[str, Any]:
        """Upload a local file into the workspace's `uploads/` (§11): `{path, name, size,
        kind, ...}`; the path can go in `send(..., attachments=[path])`."""
        source = Path(source)
        query = urlencode({"name": name or source.name})
        return self._http("POST", f"/api/upload?{query}", source.read_bytes())

    def export_conversation(self, conversation_id: str, fmt: str = "md") -> str:
        """`GET /api/conversations/ID/export` (§7): the conversation's current branch as
        Markdown (`md`), or as the JSON text of its meta and records (`json`)."""
        path = f"/api/conversations/{quote(conversation_id, safe='')}/export"
        return self._http_body("GET", f"{path}?{urlencode({'format': fmt})}").decode("utf-8")

    # --- the connection -------------------------------------------------------------

    def call(self, op: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        """Any op of §4.1, waiting out a reconnect; its ack, or WorkspaceError."""
        self._wait_up(op)
        ack = self._connection.call(op, {} if payload is None else payload, self.timeout)
        if not isinstance(ack, dict) or not ack.get("ok"):
            error = ack.get("error") if isinstance(ack, dict) else None
            error = error if isinstance(error, dict) else {}
            raise WorkspaceError(str(error.get("code", "bad_answer")), str(error.get("message")))
        return ack

    def close(self) -> None:
        self._stream.close()
        self._approvals.put(None)
        self._connection.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _open(self) -> Connection:
        return Connection(
            self.url,
            auth=self._auth,
            on_event=self._stream.on_wire,
            on_close=self._on_close,
            timeout=self.timeout,
        )

    def _wait_up(self, op: str) -> None:
        """Until connected; raises at once what ended the connection for good."""
        with self._link:
            if not self._link.wait_for(
                lambda: self._up or self._stream.failure is not None, self.reconnect_for
            ):
                raise Disconnected(f"{op}: not connected")
            if not self._up:
                raise self._stream.failure or Disconnected(f"{op}: not connected")

    def _set_link(self, state: LinkState, failure: Exception | None = None) -> None:
        if self._on_link is not None:  # first: it may end the program before anything raises
            self._on_link(state, failure)
        with self._link:
            self._up = state == "back"
            if failure is not None:
                self._stream.fail(failure)
            self._link.notify_all()

    def _on_close(self) -> None:
        if self._stream.closing:
            with self._link:
                self._up = False
            return
        self._set_link("lost")
        threading.Thread(target=self._reconnect, name="workspace-reconnect", daemon=True).start()

    def _reconnect(self) -> None:
        delay, deadline = FIRST_RETRY, time.monotonic() + self.reconnect_for
        while not self._stream.closing:
            try:
                self._connection = self._open()
                self._set_link("back")
                break
            except ConnectionRefused as exc:
                if exc.code != "too_many_attempts":
                    return self._set_link("refused", exc)
            except (
                OSError,
                TimeoutError,
                simple_websocket.ConnectionError,
                simple_websocket.ConnectionClosed,
            ) as exc:
                if time.monotonic() >= deadline:
                    gone = Disconnected(f"cannot reconnect to {self.url}: {exc}")
                    return self._set_link("gone", gone)
            time.sleep(delay)  # a backoff between attempts, not a wait on a condition
            delay = min(delay * 2, LAST_RETRY)
        self._stream.rejoin_all()

    def _answer_approvals(self) -> None:
        assert self._on_approval is not None
        while (event := self._approvals.get()) is not None:
            answer = self._on_approval(event)
            assert event.conversation_id is not None
            try:
                self.approve(
                    event.conversation_id,
                    event.call_id,
                    answer is not False,
                    always=answer == "always",
                )
            except WorkspaceError:  # not_waiting: another client answered first
                pass
            except (Disconnected, TimeoutError):  # lost on its way, or not: the rejoin tells
                self._stream.not_answered(event)
                with contextlib.suppress(ConnectionRefused, Disconnected):
                    self._wait_up("approve")
                    self._stream.rejoin_quietly(event.conversation_id)

    def _http(self, method: str, path: str, body: bytes | None = None) -> dict[str, Any]:
        return _without_ok(_checked(json.loads(self._http_body(method, path, body))))

    def _http_body(self, method: str, path: str, body: bytes | None = None) -> bytes:
        """A route's answer as it came; its refusal (`{ok: false, error}`) as WorkspaceError."""
        request = urllib.request.Request(
            self.url + path,
            data=body,
            method=method,
            headers={"Authorization": f"Bearer {self._token}"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return bytes(response.read())
        except urllib.error.HTTPError as exc:
            with exc:
                _checked(json.loads(exc.read() or b"{}"))
            raise


def _checked(answer: dict[str, Any]) -> dict[str, Any]:
    if not answer.get("ok"):
        error = answer.get("error") or {}
        raise WorkspaceError(str(error.get("code", "bad_answer")), str(error.get("message")))
    return answer


def _without_ok(ack: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in ack.items() if key != "ok"}
