"""A Python client of the web workspace (docs/protocol.md)."""
