"""Where in the workspace Workspace Agent reads its own configuration (docs/protocol.md §8,
§10): the one home of these names, for the loaders and for the rule that guards them
(modules/workspace/protected.py)."""

AGENTS_FOLDER = ".agents"
AGENT_DEFINITIONS = f"{AGENTS_FOLDER}/agents"
SKILLS = f"{AGENTS_FOLDER}/skills"
MCP_FILE = ".mcp.json"
