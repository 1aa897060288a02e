from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from retrieval import mcp_server


class Command(BaseCommand):
    help = (
        "Serve rag_search, list_references, select_references and enrich as MCP tools over stdio, for the "
        f"agent whose bearer token is in {mcp_server.TOKEN_ENV} (or in --token-file)."
    )
    # System check warnings are written to stdout, which is the MCP transport here.
    requires_system_checks = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--token-file", help="read the agent's token from this file (never pass it as an argument)")

    def handle(self, *args: Any, token_file: str | None, **options: Any) -> None:
        with mcp_server.stdout_to_stderr():
            try:
                token_hash = mcp_server.prepare(mcp_server.read_token(token_file))
            except mcp_server.StartupError as exc:
                raise CommandError(str(exc)) from None
        mcp_server.serve(token_hash=token_hash)
