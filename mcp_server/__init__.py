"""The MCP front: the workspace's tools served to MCP clients."""
