"""The test kit: what the tests share, one module per concern.

waits (the one wait), settings (the one settings builder), events (what a recorder received),
tools (a tool context), terminal (an in-process terminal and `ask`), server (a server process),
clients (Socket.IO clients, the in-process app), browser (Chromium), cluster (Redis, haproxy
and several servers), mcp_servers and mcp_fixture_server (an MCP server to connect to), model
(the model client on the fake model), fake_llm_http (the fake model spoken to over raw HTTP),
tty (a real terminal in tmux), terminal_ops (a person's terminal through the server's ops),
raw_socket (a hand-made WebSocket), a2a, skills, demo, sandbox_image (the Docker image of the
sandbox tests), processes, web_app (a tiny app with a WebSocket echo that the app proxy's tests
run in a sandbox session), network (a probe of what a sandbox reaches, and this machine's
addresses). The fake model server is tests.fake_llm.

mcp_fixture_server runs as a script with this folder first on its path: no module here may be
named like a package it imports (a `mcp.py` here hid the `mcp` package from it).
"""
