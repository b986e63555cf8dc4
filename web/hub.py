"""Each conversation's WebTerminal in this server process, and commands for the tasks that
run in another (cancel, approve, join: forwarded through the cluster to their process).
Where a task is held, and what a stopped process left, is web/cluster/leases.py's."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Unpack

from core.main_terminal import TaskBusy
from core.services import AgentServices
from core.web_terminal import Announce, Send, SendOptions, WebTerminal
from modules.sandbox.factory import sessions_of
from protocol.cluster import (
    Answer,
    Applied,
    ApproveCommand,
    Approved,
    CancelCommand,
    Cancelled,
    Command,
    JoinCommand,
    Joined,
    NotHere,
    ProcessCommand,
    ReapCommand,
    StatusCommand,
    TaskStatus,
)
from protocol.events import Event, Process
from protocol.records import MessageRecord
from utils.errors import NotFound
from web.cluster import Cluster, LocalCluster
from web.cluster.leases import TaskLeases

ToClient = Callable[[str, str, dict[str, Any]], None]  # (sid, name, payload): to one client
EnterRoom = Callable[[str, str], None]  # (sid, room): a client of any process
OWNER_POLL_SECONDS = 0.2


class TerminalHub:
    """The WebTerminal of each conversation, created on first use, and what the `cluster`
    says runs in other server processes: commands for those tasks go to their process."""

    def __init__(
        self,
        services: AgentServices,
        send: Send,
        *,
        cluster: Cluster | None = None,
        to_client: ToClient | None = None,
        enter_room: EnterRoom | None = None,
    ) -> None:
        self.services = services
        self._send = send
        self.cluster = cluster or LocalCluster()
        self.leases = TaskLeases(self.cluster)
        self._to_client = to_client
        self._enter_room = enter_room
        self.announce: Announce | None = None  # set by the Socket.IO handlers
        self.process_commands: Callable[[ProcessCommand], Answer] | None = None  # process_ops
        self._lock = threading.Lock()
        self._terminals: dict[str, WebTerminal] = {}
        self._versions: dict[str, tuple[int, int]] = {}  # what each terminal's history read

    def get(self, conversation_id: str) -> WebTerminal:
        """The conversation's terminal (raises ConversationNotFound).

        When other processes write the data dir, a terminal is made from the files as they
        are, and an idle one whose history changed on disk since is made afresh.
        """
        with self._lock:
            terminal = self._terminals.get(conversation_id)
            # Read before the history is: a write landing in between makes the next get
            # read it again, where a version read after would hide it for good.
            version = self.services.store.version(conversation_id) if self.cluster.shared else None
            changed = version is not None and version != self._versions.get(conversation_id)
            if terminal is not None and changed and not terminal.running:
                terminal = None
            if terminal is None:
                if version is not None:  # what the store holds may be older than the files
                    self.services.store.reload(conversation_id)
                terminal = self.leases.settled(conversation_id, lambda: self._make(conversation_id))
                self._terminals[conversation_id] = terminal
                if version is not None:
                    self._versions[conversation_id] = version
            return terminal

    def new(self) -> WebTerminal:
        """A terminal for a conversation the next task will create; `register` it once begun."""
        return self._make(None)

    def _make(self, conversation_id: str | None) -> WebTerminal:
        return WebTerminal(
            self.services,
            conversation_id,
            send=self._send,
            hooks=self.leases,
            announce=self.announce,
        )

    def forget(self, conversation_id: str) -> None:
        """Drop an idle conversation's terminal (it is being deleted); raises TaskBusy."""
        with self._lock:
            terminal = self._terminals.get(conversation_id)
            if (terminal is not None and terminal.running) or self.cluster.owner(conversation_id):
                raise TaskBusy("a task is running in this conversation; stop it first")
            self._terminals.pop(conversation_id, None)
            self._versions.pop(conversation_id, None)

    def register(self, terminal: WebTerminal) -> None:
        """Make a begun terminal findable by its conversation id."""
        assert terminal.conversation_id is not None
        with self._lock:
            self._terminals[terminal.conversation_id] = terminal

    def send(
        self,
        conversation_id: str | None,
        text: str,
        *,
        run_in_background: Callable[..., Any],
        on_begun: Callable[[MessageRecord], None],
        **options: Unpack[SendOptions],
    ) -> MessageRecord:
        """Start a task in the conversation (None: a new one) and run it in the background
        (WebTerminal.start); once the conversation exists its terminal is registered, then
        `on_begun(user_record)` runs, before the task's first event."""
        terminal = self.get(conversation_id) if conversation_id else self.new()

        def enter(record: MessageRecord) -> None:
            self.register(terminal)
            on_begun(record)

        return terminal.start(text, run_in_background=run_in_background, on_begun=enter, **options)

    def report_process(self, conversation_id: str, event: Process) -> None:
        """A background process of the conversation changed: onto its timeline, between
        tasks too (a process outlives the task that started it). One that started makes this
        process the one other processes relay the conversation's process ops to."""
        if event.phase == "started":
            self.hold_session(conversation_id)
        try:
            terminal = self.get(conversation_id)
        except NotFound:  # deleted meanwhile: its processes end with it
            return
        terminal.report_process(event)

    def hold_session(self, conversation_id: str) -> None:
        """Make this process, where the conversation's sandbox session now lives, the one
        other processes relay its session ops to (while the session lives)."""
        sessions = sessions_of(self.services.runner)
        if sessions is not None:
            self.cluster.hold_session(
                conversation_id, lambda: sessions.existing(conversation_id) is not None
            )

    def running(self) -> list[WebTerminal]:
        """The terminals whose task is running in this process now."""
        with self._lock:
            return [t for t in self._terminals.values() if t.running]

    def running_ids(self) -> list[str]:
        """The conversations whose task runs now, in this process or another."""
        here = [t.conversation_id for t in self.running() if t.conversation_id]
        return here + sorted(self.cluster.running().difference(here))

    # --- commands that act where the task runs ----------------------------------------

    def cancel(self, conversation_id: str) -> bool:
        """Stop the conversation's task or condensation; False when nothing runs."""
        terminal = self.get(conversation_id)
        if terminal.cancel():
            return True
        answer = self._ask(CancelCommand(conversation_id))
        return isinstance(answer, Cancelled) and answer.cancelled

    def approve(
        self, conversation_id: str, call_id: str, approved: bool, *, always: bool = False
    ) -> list[str] | None:
        """Answer a call waiting for approval; the tools now always allowed, or None when no
        such call waits."""
        terminal = self.get(conversation_id)
        if terminal.approve(call_id, approved, always=always):
            return terminal.gate.allowed()
        answer = self._ask(ApproveCommand(conversation_id, call_id, approved, always))
        return answer.always_allowed if isinstance(answer, Approved) else None

    def join(
        self, conversation_id: str, after_seq: int, sid: str, room: str | None = None
    ) -> dict[str, Any]:
        """Put client `sid` in the conversation's `room` (default: the one named by its id)
        and replay what it missed after `after_seq` (see WebTerminal.replay): by the process
        running the task, which alone orders the replay before the live events; else from
        the last task's log. Raises ClusterUnavailable."""
        room = room or conversation_id
        terminal = self.get(conversation_id)
        if not terminal.running:
            answer = self._owner_joins(JoinCommand(conversation_id, after_seq, sid, room))
            if answer is not None:
                return answer.to_wire()
            terminal = self.get(conversation_id)  # as it is after a wait for the owner
            logged = self.cluster.replay_log(conversation_id, after_seq)
            if logged is not None and not terminal.running:
                last_seq = max(logged.last_seq, terminal.last_seq)
                events, replays_after = logged.events, logged.replays_after
                if last_seq > logged.last_seq:  # the log lacks the newest events
                    events, replays_after = [], last_seq
                self._subscribe(sid, room)
                for name, wire in events:
                    self._deliver(sid, name, wire)
                return Joined(False, last_seq, replays_after).to_wire()
        return self._replay_here(terminal, after_seq, sid, room).to_wire()

    def _owner_joins(self, command: JoinCommand) -> Joined | None:
        """The answer of the process running the conversation's task, if one does.

        A task the history shows without an end runs in another process, or ran in one that
        stopped. When Redis restarted moments ago (cluster.settling), its owner has yet to
        take its lease back: ask again until then rather than answer without its events."""
        conversation_id = command.conversation_id
        deadline: float | None = None
        while True:
            answer = self._ask(command)
            if isinstance(answer, Joined):
                return answer
            if not self.cluster.shared or not self._unended_elsewhere(conversation_id):
                return None
            if deadline is None:
                deadline = time.monotonic() + self.cluster.settling()
            if time.monotonic() >= deadline:
                return None
            time.sleep(OWNER_POLL_SECONDS)

    def _unended_elsewhere(self, conversation_id: str) -> bool:
        """Whether the conversation's newest task has no end stored and does not run here."""
        terminal = self.get(conversation_id)
        conversation = terminal.conversation
        if terminal.running or conversation is None:
            return False
        newest = next((r for r in reversed(conversation.records) if r["role"] == "user"), None)
        ends = conversation.meta.get("meta", {}).get("task_ends") or {}
        return newest is not None and newest["id"] not in ends

    def remote_status(self, conversation_id: str) -> dict[str, Any] | None:
        """Where the conversation's task is when another process runs it (None otherwise)."""
        if self.cluster.owner(conversation_id) is None:
            return None
        answer = self._ask(StatusCommand(conversation_id))
        status = answer.status if isinstance(answer, TaskStatus) else None
        return status if status is not None else {"state": "thinking", "iteration": 0}

    def _ask(self, command: Command) -> Answer | None:
        owner = self.cluster.owner(command.conversation_id)
        if owner is None:
            return None
        return self.cluster.ask(owner, command)

    def _replay_here(self, terminal: WebTerminal, after_seq: int, sid: str, room: str) -> Joined:
        def deliver(event: Event) -> None:
            self._deliver(sid, event.name, event.to_wire())

        return terminal.replay(after_seq, deliver, subscribe=lambda: self._subscribe(sid, room))

    def _subscribe(self, sid: str, room: str) -> None:
        if self._enter_room is not None:
            self._enter_room(sid, room)

    def _deliver(self, sid: str, name: str, payload: dict[str, Any]) -> None:
        if self._to_client is not None:
            self._to_client(sid, name, payload)

    def handle(self, command: Command) -> Answer:
        """Apply a command another process forwarded for a task (or a sandbox session) of
        this one."""
        cid = command.conversation_id
        if isinstance(command, ReapCommand):
            self._reap(cid)
            return Applied()
        if isinstance(command, ProcessCommand):
            return NotHere() if self.process_commands is None else self.process_commands(command)
        with self._lock:
            terminal = self._terminals.get(cid)
        if terminal is None or not terminal.running:
            return NotHere()  # ended meanwhile: the asker falls back on its own
        if isinstance(command, CancelCommand):
            return Cancelled(terminal.cancel())
        if isinstance(command, ApproveCommand):
            answered = terminal.approve(command.call_id, command.approved, always=command.always)
            return Approved(terminal.gate.allowed() if answered else None)
        if isinstance(command, JoinCommand):
            return self._replay_here(terminal, command.after_seq, command.sid, command.room)
        return TaskStatus(terminal.task_status())

    def _reap(self, conversation_id: str) -> None:
        """Mark the task a dead process left running interrupted (this process holds its
        lease now; the `interrupted` done gives it back)."""
        message_id = self.cluster.orphan(conversation_id)
        if message_id is None or not self.services.store.exists(conversation_id):
            return
        with self._lock:
            self._terminals.pop(conversation_id, None)
        self.services.store.reload(conversation_id)
        self.leases.interrupt(self.get(conversation_id), message_id)
