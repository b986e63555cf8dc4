"""The client's events and their payloads (docs/protocol.md §4.1), as the server validates them."""

from __future__ import annotations

from typing import Literal

Mode = Literal["fast", "thinking"]
Approval = Literal["auto", "ask", "read-only"]
