"""Start over in the demo (docs/protocol.md §4 and §8, `demo_reset`): the sample workspace
back as it was (web/demo_sample.py), and every conversation, proposal and memory gone."""

from __future__ import annotations

import time
from typing import Any

from flask_socketio import SocketIO

from protocol.errors import failure
from protocol.requests import Empty
from web.demo_sample import demo_sample
from web.handlers import acked
from web.state import WebState

STOP_SECONDS = 10.0


def register_demo_handlers(socketio: SocketIO, state: WebState) -> None:
    """`demo_reset`: refused (`not_demo`) but with the demo provider on the sample's copy."""
    demo = state.services.provider.name == "demo"
    sample = demo_sample(state)
    if demo:
        sample.claim()
    hub, services = state.hub, state.services

    @socketio.on("demo_reset")
    @acked(Empty)
    def on_demo_reset(msg: Empty) -> dict[str, Any]:
        if not demo:
            return failure("not_demo", "Only the demo (AGENT_PROVIDER=demo) starts over.")
        if not sample.available:
            return failure(
                "not_demo",
                f"{sample.workspace} did not start as the demo's sample, so its files are "
                "not deleted. `make demo` runs the demo on a copy of the sample.",
            )
        for cid in hub.running_ids():
            hub.cancel(cid)
        deadline = time.monotonic() + STOP_SECONDS
        while hub.running_ids():
            if time.monotonic() > deadline:
                return failure("busy", "a task did not stop in time; try again")
            socketio.sleep(0.05)
        conversations = services.store.list()
        for meta in conversations:
            cid = str(meta["id"])
            hub.forget(cid)
            services.delete_conversation(cid)
            socketio.emit("conversation_update", {"id": cid, "deleted": True})
        services.memory.replace("main", "", "")
        sample.restore()
        return {"ok": True, "deleted": len(conversations)}
