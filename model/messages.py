"""What a model call is sent: a record of the history (protocol/records.py), or what stands in
for one."""

from typing import NotRequired

# typing_extensions: typing's own TypedDict learns ReadOnly in Python 3.13.
from typing_extensions import ReadOnly, TypedDict

from protocol.records import MessageMeta, Role, ToolCallRecord


class ImageUrl(TypedDict):
    url: str


class ContentPart(TypedDict):
    """A part of a message's content list: `text`, or `image_url` (an attached image)."""

    type: str
    text: NotRequired[str]
    image_url: NotRequired[ImageUrl]


class ChatMessage(TypedDict):
    """A message as the context is built from it and a model call is sent it: a record, or
    what stands in for one (the system prompt, a summary, a missing result's placeholder, a
    record with its skill or attachments expanded). Read-only, so a MessageRecord is one."""

    role: ReadOnly[Role]
    content: ReadOnly[str | list[ContentPart]]
    id: ReadOnly[NotRequired[str]]
    reasoning_content: ReadOnly[NotRequired[str]]
    tool_calls: ReadOnly[NotRequired[list[ToolCallRecord]]]
    tool_call_id: ReadOnly[NotRequired[str]]
    name: ReadOnly[NotRequired[str]]
    meta: ReadOnly[NotRequired[MessageMeta]]
