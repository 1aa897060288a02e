"""The agent API as MCP tools over stdio (`manage.py mcp`): rag_search, list_references,
select_references, read_reference_file, enrich and agent_instructions, for the one agent
whose bearer token the server was started with.

Each tool call:
  1. runs on Django's one thread for sync work (asgiref's thread-sensitive executor),
     between close_old_connections() calls as a request is;
  2. reads the agent again by its token's hash, so a revoked token stops working at once;
  3. validates the arguments with the REST view's input serializer;
  4. calls the same service as the REST view and returns the same JSON, as text and as
     structuredContent (rag_search's text is seed 003's result list instead, a file's
     text and the instructions' text are themselves);
  5. turns a caller error into an isError result carrying the REST JSON error body.

stdout is the transport: while starting, stdout_to_stderr() sends everything else to
stderr; while serving, the SDK's stdio_server() does the same.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from asgiref.sync import sync_to_async
from django.core.validators import RegexValidator
from django.db import close_old_connections, connections
from django.http import Http404
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from rest_framework import serializers
from rest_framework.exceptions import APIException, AuthenticationFailed
from rest_framework.fields import empty
from rest_framework.utils.encoders import JSONEncoder

from catalog.agents import hash_token
from catalog.auth import agent_for_token_hash, visible_catalogs
from catalog.embedder import get_embedder
from catalog.models import Agent
from catalog.rest.errors import exception_handler
from catalog.rest.fields import StrictSlugField
from retrieval.apis import SearchApi, search_response
from retrieval.enrich_apis import (
    EnrichApi,
    ReferenceFileApi,
    ReferenceListApi,
    ReferenceSelectApi,
    enrich_response,
    instructions_response,
    reference_file_response,
    references_response,
)
from retrieval.enrichment.caller import Caller
from retrieval.enrichment.references import select_references

logger = logging.getLogger(__name__)

TOKEN_ENV = "LECTERN_AGENT_TOKEN"
NO_RESULTS = "No relevant documentation found for your query."


class StartupError(Exception):
    """The server cannot start: no token, or not one of an active agent."""


# --- starting -------------------------------------------------------------------------


def read_token(token_file: str | None) -> str:
    """The agent's token from --token-file, else from the environment (never argv)."""
    if token_file:
        try:
            token = Path(token_file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise StartupError(f"cannot read the token file {token_file}: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise StartupError(f"the token file {token_file} is not UTF-8 text") from None
    else:
        token = os.environ.get(TOKEN_ENV, "").strip()
    if not token:
        raise StartupError(f"no agent token: set {TOKEN_ENV} or pass --token-file PATH")
    return token


def authenticate(token: str) -> Agent:
    try:
        return agent_for_token_hash(hash_token(token))
    except AuthenticationFailed:
        raise StartupError("the agent token is unknown or revoked") from None


@contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send what Python code or a child process writes to stdout to stderr instead,
    until the transport takes stdout over."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        with redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def prepare(token: str) -> str:
    """Check the token, load the embedder (the first search should not pay for it), and
    return the token's hash: the only form of it the server keeps."""
    agent = authenticate(token)
    get_embedder()
    catalogs = ", ".join(visible_catalogs(agent).order_by("slug").values_list("slug", flat=True)) or "none"
    logger.info("MCP server for agent %r (catalogs: %s) on stdio", agent.name, catalogs)
    connections.close_all()  # tool calls run on another thread, with their own connection
    return agent.token_hash


def serve(*, token_hash: str) -> None:
    server = build_server(token_hash=token_hash)

    async def run() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(run)


# --- tools ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolSpec:
    """A tool: which of a REST input serializer's fields it takes as arguments, and the
    service call that turns validated arguments into a result."""

    name: str
    description: str
    serializer: type[serializers.Serializer[None]]
    arguments: tuple[str, ...]
    run: Callable[[Agent, dict[str, Any]], types.CallToolResult]
    read_only: bool = False
    notes: dict[str, str] = field(default_factory=dict)  # argument descriptions for the client
    # Arguments fill_defaults supplies (from the agent's profile) when they are omitted.
    filled: tuple[str, ...] = ()
    fill_defaults: Callable[[Agent, dict[str, Any]], dict[str, Any]] | None = None

    def describe(self) -> types.Tool:
        fields = self.serializer().fields
        properties: dict[str, dict[str, Any]] = {}
        required: list[str] = []
        for name in self.arguments:
            schema = field_schema(fields[name])
            if name in self.notes:
                schema["description"] = self.notes[name]
            if name in self.filled:
                schema.pop("default", None)
            elif fields[name].required:
                required.append(name)
            properties[name] = schema
        return types.Tool(
            name=self.name,
            description=self.description,
            input_schema={
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
            annotations=types.ToolAnnotations(read_only_hint=self.read_only, open_world_hint=False),
        )

    def validate(self, agent: Agent, arguments: dict[str, Any]) -> dict[str, Any]:
        """The serializer's validated data; a null argument counts as omitted."""
        unknown = sorted(set(arguments) - set(self.arguments))
        if unknown:
            raise serializers.ValidationError(
                {name: [f"unknown argument; use {', '.join(self.arguments)}"] for name in unknown}
            )
        given = {name: value for name, value in arguments.items() if value is not None}
        if self.fill_defaults is not None:
            given = self.fill_defaults(agent, given)
        data = self.serializer(data=given)
        data.is_valid(raise_exception=True)
        return dict(data.validated_data)


def field_schema(field: serializers.Field[Any, Any, Any, Any]) -> dict[str, Any]:
    """JSON Schema for the serializer fields tools take, with the same limits."""
    if isinstance(field, serializers.ListField):
        schema = _limits(
            {"type": "array", "items": field_schema(field.child)}, maxItems=field.max_length, minItems=field.min_length
        )
    elif isinstance(field, serializers.ChoiceField):
        schema = {"type": "string", "enum": list(field.choices)}
    elif isinstance(field, serializers.IntegerField):
        schema = _limits({"type": "integer"}, minimum=field.min_value, maximum=field.max_value)
    elif isinstance(field, serializers.CharField):
        schema = _limits({"type": "string"}, maxLength=field.max_length, minLength=field.min_length)
        # RegexValidator compiles its regex (lazily); the stubs also allow the str given
        patterns = [v.regex.pattern for v in field.validators
                    if isinstance(v, RegexValidator) and isinstance(v.regex, re.Pattern)]
        if patterns:
            schema["pattern"] = patterns[0]
    else:
        raise TypeError(f"no JSON Schema mapping for {type(field).__name__}")
    if field.help_text:
        schema["description"] = str(field.help_text)
    # `empty` marks a field without a default, a value the stubs leave out of Field.default
    if field.default is not empty and not callable(field.default):  # type: ignore[comparison-overlap]
        schema["default"] = field.default
    return schema


def _limits(schema: dict[str, Any], **limits: int | None) -> dict[str, Any]:
    return {**schema, **{key: value for key, value in limits.items() if value is not None}}


def _json_result(data: dict[str, Any], *, text: str | None = None, is_error: bool = False) -> types.CallToolResult:
    """A REST view's JSON body as structuredContent and, unless another text is given, as text."""
    plain = json.loads(json.dumps(data, cls=JSONEncoder))  # what DRF's JSON renderer would send
    text = json.dumps(plain, ensure_ascii=False) if text is None else text
    return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=plain, is_error=is_error)


# rag_search


def format_hits(hits: list[dict[str, Any]]) -> str:
    """Seed 003's rag_search output: one `--- Result N (score: 0.XXX, source: path) ---`
    block per hit, or a fixed sentence when there is none."""
    if not hits:
        return NO_RESULTS
    return "\n\n".join(
        f"--- Result {hit['rank']} (score: {hit['score']:.3f}, source: {hit['document_id']}) ---\n{hit['content']}"
        for hit in hits
    )


def withheld_note(withheld: dict[str, Any]) -> str:
    """The references search left out for want of an approval, with how many matching
    passages each holds and why (never their content), a line each; '' when none."""
    if not withheld["count"]:
        return ""
    lines = [f"- @{entry['source']}: {entry['count']} ({entry['reason']})" for entry in withheld["sources"]]
    count = withheld["count"]
    passages = f"{count} matching passage{'' if count == 1 else 's'}"
    return "\n".join([f"Withheld: {passages} in references that need an approval:", *lines])


def _search_defaults(agent: Agent, arguments: dict[str, Any]) -> dict[str, Any]:
    """catalog defaults to the agent's only catalog (top_k to its default_top_k, in
    search_response, as for REST)."""
    if "catalog" not in arguments:
        slugs = list(visible_catalogs(agent).order_by("slug").values_list("slug", flat=True))
        if len(slugs) != 1:
            named = f": {', '.join(slugs)}" if slugs else ""
            raise serializers.ValidationError(
                {"catalog": [f"required: this agent may search {len(slugs)} catalogs{named}"]}
            )
        arguments["catalog"] = slugs[0]
    return arguments


def _rag_search(agent: Agent, params: dict[str, Any]) -> types.CallToolResult:
    body = search_response(agent, params)
    note = withheld_note(body["withheld"])
    return _json_result(body, text=format_hits(body["results"]) + (f"\n\n{note}" if note else ""))


# the enrichment operations


def _list_references(agent: Agent, params: dict[str, Any]) -> types.CallToolResult:
    return _json_result(references_response(agent, params))


def _select_references(agent: Agent, params: dict[str, Any]) -> types.CallToolResult:
    caller = Caller.of(agent, params.get("catalogs"))
    return _json_result(select_references(caller=caller, ids=params["ids"], tags=params["tags"]))


def _enrich(agent: Agent, params: dict[str, Any]) -> types.CallToolResult:
    return _json_result(enrich_response(agent, params))


class ReadFileArguments(ReferenceFileApi.QuerySerializer):
    """The file endpoint's query plus the two parts of its URL, with the URL's rules."""

    catalog = StrictSlugField(max_length=64)
    source_id = StrictSlugField(max_length=100)


def _read_reference_file(agent: Agent, params: dict[str, Any]) -> types.CallToolResult:
    body = reference_file_response(agent, catalog=params["catalog"], source_id=params["source_id"],
                                   path=params["path"])
    return _json_result(body, text=body["text"] if body["encoding"] == "utf-8" else None)


class NoArguments(serializers.Serializer[None]):
    pass


def _agent_instructions(agent: Agent, params: dict[str, Any]) -> types.CallToolResult:
    body = instructions_response(agent)
    return _json_result(body, text=body["text"])


TOOLS = {
    tool.name: tool
    for tool in (
        ToolSpec(
            name="rag_search",
            description=(
                "Search a reference catalog for passages relevant to a natural-language query. Returns up to "
                "top_k passages, best first, each as `--- Result N (score: 0.XXX, source: path) ---` followed "
                "by its text, then a line naming references whose matching passages were withheld (they need "
                "an approval); structuredContent has chunk ids, component scores and `withheld`."
            ),
            serializer=SearchApi.InputSerializer,
            arguments=("query", "catalog", "top_k", "mode"),
            run=_rag_search,
            read_only=True,
            filled=("catalog", "top_k"),
            fill_defaults=_search_defaults,
            notes={
                "query": "What to look for, in natural language.",
                "catalog": "The catalog to search; default: the agent's only catalog.",
                "top_k": "How many passages; default: the agent's default_top_k.",
                "mode": "bm25 (exact words), vector (meaning), hybrid (both, fused) or bm25_tiebreak.",
            },
        ),
        ToolSpec(
            name="list_references",
            description="List the references (documentation sources) this agent may use.",
            serializer=ReferenceListApi.QuerySerializer,
            arguments=("tag", "q", "catalog"),
            run=_list_references,
            read_only=True,
            notes={
                "tag": "Only references with this tag.",
                "q": "Only references whose id, name, description or tags contain this text.",
                "catalog": "Only references of this catalog.",
            },
        ),
        ToolSpec(
            name="select_references",
            description=(
                "Select references by id or by tag: returns each one's description, files and instructions, "
                "and those withheld (pending approval) with the reason."
            ),
            serializer=ReferenceSelectApi.InputSerializer,
            arguments=("ids", "tags", "catalogs"),
            run=_select_references,
            notes={
                "ids": "Reference ids, `source` or `catalog/source` (a leading @ is allowed).",
                "tags": "Select every reference carrying one of these tags.",
            },
        ),
        ToolSpec(
            name="read_reference_file",
            description=(
                "Read one file of a reference this agent has selected (or has by profile): any path that "
                "select_references lists in `files`. Returns the file's text (structuredContent: path, title, "
                "sha256, encoding; a file that is not UTF-8 text comes base64-encoded, as JSON)."
            ),
            serializer=ReadFileArguments,
            arguments=("catalog", "source_id", "path"),
            run=_read_reference_file,
            read_only=True,
            notes={
                "catalog": "The reference's catalog.",
                "source_id": "The reference id, without @.",
                "path": "The file's path, as `files` lists it.",
            },
        ),
        ToolSpec(
            name="agent_instructions",
            description=(
                "This agent's startup instructions: auto references, its preselected ones and those they link to, "
                "whole or listed within its token budget, and how to search for rag agents. Returns the text "
                "(structuredContent: which references were included, listed or withheld, and why)."
            ),
            serializer=NoArguments,
            arguments=(),
            run=_agent_instructions,
            read_only=True,
        ),
        ToolSpec(
            name="enrich",
            description=(
                "Enrich a user prompt or a tool result: expands @reference mentions and appends hints for the "
                "references it is about. Returns the enriched text, the hints and a trace id."
            ),
            serializer=EnrichApi.InputSerializer,
            arguments=("text", "surface", "selected", "paths", "catalogs"),
            run=_enrich,
            notes={
                "text": "The user prompt or tool result.",
                "surface": "prompt (a user message) or tool_result (a tool's output).",
            },
        ),
    )
}


# --- serving --------------------------------------------------------------------------


def _agent(token_hash: str) -> Agent:
    return agent_for_token_hash(token_hash)


def call_tool(tool: ToolSpec, token_hash: str, arguments: dict[str, Any]) -> types.CallToolResult:
    """One tool call, with a request's connection lifecycle; see the module docstring."""
    close_old_connections()
    try:
        agent = _agent(token_hash)
        return tool.run(agent, tool.validate(agent, arguments))
    except (APIException, Http404) as exc:
        response = exception_handler(exc, {})
        if response is None:  # not reached: DRF's handler answers both
            raise
        return _json_result(response.data, is_error=True)
    finally:
        close_old_connections()


def build_server(*, token_hash: str) -> Server:
    async def list_tools(
        ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool.describe() for tool in TOOLS.values()])

    async def call(ctx: ServerRequestContext, params: types.CallToolRequestParams) -> types.CallToolResult:
        tool = TOOLS.get(params.name)
        if tool is None:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {params.name}")
        return await sync_to_async(call_tool, thread_sensitive=True)(tool, token_hash, params.arguments or {})

    return Server(
        "lectern",
        on_list_tools=list_tools,
        on_call_tool=call,
        instructions="Lectern's reference catalogs: read agent_instructions first; search them with rag_search; "
        "list, select, read and enrich with the reference tools.",
    )
