"""The agent API as MCP tools over stdio (server.py; `manage.py mcp`)."""
