"""The A2A front: the agent served to other agents, beside the web server."""
