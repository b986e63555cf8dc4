"""The user's message of a task: recorded whole, with what the task runs with, or not at all;
and told to every view of the conversation as its task starts."""

from __future__ import annotations

import contextlib
from typing import Any

from core.interrupted_calls import answer_interrupted_calls
from core.services import AgentServices
from core.timeline import Timeline
from history.titles import title_from
from protocol.events import UserMessage
from protocol.options import Mode
from protocol.records import ConversationState, MessageRecord
from utils.disk import disk_full, is_disk_full

NOT_KEPT = "Your message was not sent, and nothing of it was kept."


def record_user_message(
    services: AgentServices,
    timeline: Timeline,
    chosen: ConversationState,
    text: str,
    parent_id: str | None,
    meta: dict[str, Any],
) -> MessageRecord:
    """Record the user's message under `parent_id`, or keep nothing of it (raises DiskFull for
    want of space).

    meta.json is written first with what the task runs with, `chosen` (creating the
    conversation when there is none), then the user's record: a disk too full for meta.json
    refuses the message before any of it is kept, a record is kept whole or not at all, and a
    conversation created for it is removed again when it could not be recorded."""
    created = timeline.conversation is None
    try:
        conversation = timeline.conversation
        if conversation is None:  # titled and set up in one write of meta.json
            conversation = services.store.create(title=title_from(text) or None, meta=chosen)
            timeline.open(conversation, timeline.seq)
        else:
            conversation.update_meta(**chosen)  # written even when unchanged: see above
        parent_id = answer_interrupted_calls(conversation, timeline.record, parent_id)
        return timeline.record("user", text, parent_id=parent_id, meta=meta or None)
    except BaseException as exc:
        if created and timeline.conversation is not None:  # nobody knows of it yet
            with contextlib.suppress(OSError):
                services.store.delete(timeline.conversation.id)
            timeline.open(None, timeline.seq)
        if is_disk_full(exc):
            raise disk_full(services.settings.data_dir, NOT_KEPT) from exc
        raise


def user_message_event(record: MessageRecord, mode: Mode) -> UserMessage:
    """The `user_message` event of a task's message record (§4.2): what a view shows of it."""
    meta = record.get("meta") or {}
    return UserMessage(
        message_id=record["id"],
        text=record["content"],
        parent_id=record["parent_id"],
        mode=mode,
        skill=meta.get("skill"),
        attachments=meta.get("attachments"),
    )
