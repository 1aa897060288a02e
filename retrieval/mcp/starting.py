"""Starting `manage.py mcp`: the agent's token (from the environment or a file, never
argv), checked once before serving; only its hash is kept. stdout is the transport, so
while starting, stdout_to_stderr() sends everything else to stderr."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from pathlib import Path

from django.db import connections
from rest_framework.exceptions import AuthenticationFailed

from catalog.agents import hash_token
from catalog.auth import agent_for_token_hash, visible_catalogs
from catalog.embedder import get_embedder
from catalog.models import Agent

logger = logging.getLogger(__name__)

TOKEN_ENV = "LECTERN_AGENT_TOKEN"


class StartupError(Exception):
    """The server cannot start: no token, or not one of an active agent."""


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
