"""The refusals a person can act on, each carrying its code of docs/protocol.md §4.4: what the
fronts answer with (web/refusals.py turns one into an ack) and what a domain error subclasses."""

from __future__ import annotations

from protocol.errors import ErrorCode


class AgentError(Exception):
    """A request that cannot be done as asked; the message says why, to a person."""

    code: ErrorCode = "internal_error"


class NotFound(AgentError):
    """What was named (a conversation, a message, an agent, a skill) does not exist."""

    code: ErrorCode = "not_found"


class Busy(AgentError):
    """A task or a condensation is running where this would act."""

    code: ErrorCode = "busy"


class NotConfigured(AgentError):
    """The model API is not set up (no key, no URL): no task can start."""

    code: ErrorCode = "not_configured"


class Invalid(AgentError):
    """A well-formed request the server will not do (a value out of range, a path refused)."""

    code: ErrorCode = "invalid"


class Unavailable(AgentError):
    """A store the request needs does not answer (docs/protocol.md §13)."""

    code: ErrorCode = "unavailable"
