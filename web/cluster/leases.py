"""A web terminal's tasks held across the server processes that share a data dir.

A task's conversation is leased before the task begins and given back once its end is
stored, before anyone hears of it; with other processes writing the data dir the history is
read again first. A task or a call a stopped process left without an end is ended here as
`interrupted`. `TaskLeases` is the TaskHooks (core/web_terminal.py) of a hub's terminals.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from core.interrupted_calls import answer_interrupted_calls
from core.main_terminal import TaskBusy
from core.web_terminal import WebTerminal
from protocol.events import Done, Error, Event
from web.cluster import Cluster, ClusterUnavailable

UNWRITTEN_SEQ_GAP = 1000  # far more events than a write batch of replay_log.py holds
INTERRUPTED = (
    "The server process running this task stopped before it ended; what it "
    "recorded is kept. Send a message to go on."
)


class TaskLeases:
    """Each task of a hub's terminals held in the `cluster`: its lease, its replay stream."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    @contextlib.contextmanager
    def hold(self, terminal: WebTerminal) -> Iterator[None]:
        """Claim the conversation's task lease (cluster-wide) and, when other processes write
        the data dir, take its history as stored now, ending a task a dead process left
        running; given back when no task begins. A new conversation needs no lease yet."""
        cid = terminal.conversation_id
        if cid is None:
            yield
            return
        self._claim(cid)
        try:
            if self.cluster.shared:
                terminal.services.store.reload(cid)
                terminal.open_conversation(cid)
                terminal.timeline.skip_to(self.cluster.last_seq(cid))
                orphan = self.cluster.orphan(cid)
                if orphan is not None:
                    self.interrupt(terminal, orphan)  # its `done` gives the lease back
                    self._claim(cid)
            yield
        except BaseException:
            self.cluster.release(cid)
            raise

    def _claim(self, cid: str) -> None:
        if not self.cluster.claim(cid):
            raise TaskBusy(
                "a task is already running in this conversation (in another server process)"
            )

    def begun(
        self, conversation_id: str, message_id: str, replays_after: int, *, created: bool
    ) -> None:
        """The task runs here: it is named in the cluster and its events logged there."""
        if created:  # nobody else knows it yet: the lease is free (the heartbeat takes
            with contextlib.suppress(ClusterUnavailable):  # it once Redis answers again)
                self.cluster.claim(conversation_id)
        self.cluster.begin(conversation_id, message_id, replays_after)

    def relayed(self, event: Event) -> None:
        """Log the event in the conversation's replay stream."""
        self.cluster.record(event)

    def ended(self, conversation_id: str, message_id: str) -> None:
        """Release the lease of the task of `message_id` (only that task's) and let its log
        expire."""
        self.cluster.end(conversation_id, message_id)

    def interrupt(self, terminal: WebTerminal, message_id: str) -> None:
        """End a task a stopped process left running: an `interrupted` result for each call
        it left without one, `error` and `done` ("interrupted") to every client, and the end
        kept in the history like any task's (its lease released before the `done`)."""
        with terminal.timeline.lock:
            conversation = terminal.conversation
            if conversation is None or terminal.running:
                return
            # The stopped process's last batch of events may never have reached the stream
            # while its clients saw them: go past any seq they can hold, or they drop ours.
            seen = max(terminal.timeline.seq, self.cluster.last_seq(conversation.id))
            terminal.timeline.skip_to(seen + UNWRITTEN_SEQ_GAP)
            terminal.log_task(message_id)
            answer_interrupted_calls(conversation, terminal.timeline.record)
            terminal.timeline.report(Error("interrupted", INTERRUPTED))
            terminal.end_task(message_id, Done("interrupted"))

    def settled(self, conversation_id: str, make: Callable[[], WebTerminal]) -> WebTerminal:
        """A terminal for the conversation (`make` makes one as stored now), with an
        `interrupted` result recorded for each call a stopped process left without one,
        unless a task of a live process runs it."""
        terminal = make()
        conversation = terminal.conversation
        if conversation is None or not conversation.unanswered_calls():
            return terminal
        try:
            if not self.cluster.claim(conversation_id):
                return terminal  # the task making those calls holds the lease
        except ClusterUnavailable:
            return terminal
        try:
            if self.cluster.orphan(conversation_id) is not None:
                return terminal  # its process died: the reaper ends that task, calls included
            if self.cluster.shared:  # as stored now, another process may have answered them
                terminal.services.store.reload(conversation_id)
                terminal = make()
            conversation = terminal.conversation
            if conversation is not None:  # a terminal just made: no task runs in it
                answer_interrupted_calls(conversation, terminal.timeline.record)
        finally:
            self.cluster.release(conversation_id)
        return terminal
