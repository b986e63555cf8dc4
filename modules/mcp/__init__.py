"""MCP servers the agent uses: their configuration, connections and tools."""
