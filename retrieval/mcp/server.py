"""Serving the MCP tools (retrieval.mcp.tools) over stdio with the SDK's MCPServer, for
the one agent whose token `manage.py mcp` checked on starting (retrieval.mcp.starting):
every call reads it again by the hash the server keeps (retrieval.mcp.calls).

stdout is the transport: while serving, the SDK's stdio_server() keeps everything else
off it."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import CallToolResult, InputRequiredResult
from pydantic import ValidationError

from retrieval.mcp.calls import Session, answer
from retrieval.mcp.tools import TOOLS

INSTRUCTIONS = (
    "Lectern's reference catalogs: read agent_instructions first; search them with rag_search; list, select, "
    "read and enrich with the reference tools. A reference withheld for want of an approval names its approval "
    "request: approval_requests follows it."
)


class LecternServer(MCPServer[Session]):
    """MCPServer whose tools refuse a missing required argument as REST does."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Session, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            # The SDK checks the arguments against the tool's signature before calling it.
            # Every parameter is SkipValidation, so all it can refuse is a required one
            # missing: the call goes on to the REST serializer, which refuses it in REST's words.
            refused = isinstance(exc.__cause__, ValidationError) and not isinstance(exc, UnexpectedToolError)
            if not refused or name not in TOOLS or context is None:
                raise
            return await answer(context, TOOLS[name].operation)


def build_server(*, token_hash: str) -> LecternServer:
    @asynccontextmanager
    async def session(server: MCPServer[Session]) -> AsyncIterator[Session]:
        yield Session(token_hash=token_hash)

    server = LecternServer("lectern", instructions=INSTRUCTIONS, lifespan=session)
    for tool in TOOLS.values():
        # the docstring without its indentation (the SDK would publish __doc__ as written)
        server.add_tool(tool.fn, description=inspect.getdoc(tool.fn), annotations=tool.hints)
    return server


def serve(*, token_hash: str) -> None:
    build_server(token_hash=token_hash).run("stdio")
