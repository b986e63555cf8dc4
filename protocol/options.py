"""What a task runs with, and what one message may carry along (docs/protocol.md §4.1
send_message and set_memory, §5 meta.json): plain values, light to import."""

from typing import Literal

Mode = Literal["fast", "thinking"]
Approval = Literal["auto", "ask", "read-only"]
MemoryScope = Literal["main", "task"]

MAX_FOCUS = 3  # files in focus, a conversation's at most
MAX_ATTACHMENTS = 10  # files attached to one message
