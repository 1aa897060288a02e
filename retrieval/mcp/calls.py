"""One tool call, the same for every tool.

A tool's typed signature is its input schema (the SDK generates it: retrieval.mcp.tools),
not its validation: every parameter is SkipValidation, and answer() hands the REST view's
input serializer the arguments as the client sent them, so they meet the same rules and
the same errors as over REST (the SDK would parse a JSON string given for a list, drop an
unknown name and fill in defaults). answer():
  1. runs on Django's one thread for sync work (asgiref's thread-sensitive executor),
     between close_old_connections() calls as a request is, after applying a reset a
     curator asked of the web tier (retrieval.runtime.runtime_follow), as a request does;
  2. reads the agent again by its token's hash, so a revoked token stops working at once;
  3. refuses unknown arguments, fills the defaults the agent's profile gives, and
     validates with the REST view's input serializer;
  4. calls the same service as the REST view, which returns the same JSON: as
     structuredContent and as text (or another text the tool gives), followed by a
     second text naming what was withheld, if anything, and the request to follow;
  5. turns a caller error into an isError result carrying the REST JSON error body.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from django.http import Http404
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, ContentBlock, TextContent
from rest_framework import serializers
from rest_framework.exceptions import APIException
from rest_framework.utils.encoders import JSONEncoder

from catalog.agents import agent_read_fence_advance
from catalog.auth import agent_for_token_hash
from catalog.errors import ApplicationError
from catalog.models import Agent
from catalog.reads import replica_configured, writes_noticed
from catalog.rest.errors import exception_handler
from retrieval.runtime import runtime_follow


@dataclass(frozen=True)
class Session:
    """What every call of this server shares (its lifespan state): whose it is."""

    token_hash: str


Ctx = Context[Session, Any]


@dataclass(frozen=True)
class Operation:
    """What a tool does with its arguments: the REST input serializer validates them
    (after fill_defaults, from the agent's profile, supplies those omitted), then run
    answers with the service's result."""

    serializer: type[serializers.Serializer[None]]
    run: Callable[[Agent, dict[str, Any]], CallToolResult]
    fill_defaults: Callable[[Agent, dict[str, Any]], dict[str, Any]] | None = None

    def call(self, token_hash: str, arguments: dict[str, Any]) -> CallToolResult:
        """Steps 2 to 5 of the module docstring, with a request's connection lifecycle."""
        close_old_connections()
        runtime_follow()
        try:
            agent = agent_for_token_hash(token_hash)
            return self.run_fenced(agent, self.validate(agent, arguments))
        except (ApplicationError, APIException, Http404) as exc:
            return error_result(exc)
        finally:
            close_old_connections()

    def run_fenced(self, agent: Agent, arguments: dict[str, Any]) -> CallToolResult:
        """run(), and with a replica, the agent's read fence moved past what it wrote
        (as ReplicaReadsMiddleware does for a request: catalog.reads)."""
        if not replica_configured():
            return self.run(agent, arguments)
        with writes_noticed() as writes:
            result = self.run(agent, arguments)
        if writes.wrote:
            agent_read_fence_advance(agent=agent)
        return result

    def validate(self, agent: Agent, arguments: dict[str, Any]) -> dict[str, Any]:
        """The serializer's validated data; a null argument counts as omitted."""
        names = list(self.serializer().fields)
        unknown = sorted(set(arguments) - set(names))
        if unknown:
            raise serializers.ValidationError(
                {name: [f"unknown argument; use {', '.join(names) or 'none'}"] for name in unknown})
        given = {name: value for name, value in arguments.items() if value is not None}
        if self.fill_defaults is not None:
            given = self.fill_defaults(agent, given)
        data = self.serializer(data=given)
        data.is_valid(raise_exception=True)
        return dict(data.validated_data)


async def answer(ctx: Ctx, operation: Operation) -> CallToolResult:
    """The call `ctx` carries, with the arguments as its request sent them (not as the
    SDK read them: see the module docstring), answered on Django's thread."""
    params = ctx.request_context.params or {}
    arguments = dict(params.get("arguments") or {})
    token_hash = ctx.request_context.lifespan_context.token_hash
    return await sync_to_async(operation.call, thread_sensitive=True)(token_hash, arguments)


def json_result(data: dict[str, Any], *, text: str | None = None, note: str = "",
                is_error: bool = False) -> CallToolResult:
    """A REST view's JSON body as structuredContent and, unless another text is given, as
    text: the first content item. `note`, when given, is a second text item, for what a
    reader of the first might miss (what was withheld, and the request to follow)."""
    plain = json.loads(json.dumps(data, cls=JSONEncoder))  # what DRF's JSON renderer would send
    text = json.dumps(plain, ensure_ascii=False) if text is None else text
    content: list[ContentBlock] = [TextContent(text=text), *([TextContent(text=note)] if note else [])]
    return CallToolResult(content=content, structured_content=plain, is_error=is_error)


def error_result(exc: ApplicationError | APIException | Http404, *, note: str = "") -> CallToolResult:
    """A caller error as an isError result carrying the REST JSON error body."""
    response = exception_handler(exc, {})
    if response is None:  # not reached: DRF's handler answers both
        raise exc
    return json_result(response.data, note=note, is_error=True)
