from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from retrieval.mcp import starting
from retrieval.mcp.server import serve


class UnechoingParser(CommandParser):
    """Django's parser, except that arguments it does not know are refused by option
    name only: one may be a token (`--token lct_...`, `--api-key=lct_...`), and an error
    line ends up on a terminal, in shell logs or in an MCP client's log."""

    # Any: argparse's overloads (a namespace given or not) are all served by this one.
    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:
        options, unknown = self.parse_known_args(args, namespace)
        if unknown:
            self.error(_unknown_arguments(unknown))
        return options


def _unknown_arguments(unknown: list[str]) -> str:
    """The option names among `unknown`, and how many values were left out."""
    names = [arg.split("=", 1)[0] for arg in unknown if arg.startswith("-")]
    hidden = len(unknown) - sum(1 for arg in unknown if arg.startswith("-") and "=" not in arg)
    message = f"unrecognized arguments: {' '.join(names) or 'none named'}"
    if hidden:
        message += f" and {hidden} value{'s' if hidden > 1 else ''}, not shown: a value may be a secret"
    return (f"{message}. The agent token comes from {starting.TOKEN_ENV} or --token-file PATH, never from the "
            "command line")


class Command(BaseCommand):
    help = (
        "Serve rag_search, list_references, select_references, read_reference_file, enrich and agent_instructions "
        f"as MCP tools over stdio, for the agent whose bearer token is in {starting.TOKEN_ENV} (or in --token-file)."
    )
    # System check warnings are written to stdout, which is the MCP transport here.
    requires_system_checks = []

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        # allow_abbrev: argparse would take `--token X` for `--token-file X` (a prefix of
        # it) and then name the token as the file it cannot read.
        parser = super().create_parser(prog_name, subcommand, allow_abbrev=False, **kwargs)
        parser.__class__ = UnechoingParser  # Django builds a CommandParser; this one only parses differently
        return parser

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--token-file", help="read the agent's token from this file (never pass it as an argument)")

    def handle(self, *args: Any, token_file: str | None, **options: Any) -> None:
        with starting.stdout_to_stderr():
            try:
                token_hash = starting.prepare(starting.read_token(token_file))
            except starting.StartupError as exc:
                raise CommandError(str(exc)) from None
        serve(token_hash=token_hash)
