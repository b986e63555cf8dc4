"""The outside contract of docs/protocol.md as types: what crosses a process boundary.

Layer 0: the server and `workspace_client` both import it, and it imports nothing of ours
outside itself (only the standard library and pydantic).
"""
