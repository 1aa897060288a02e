"""Which database a read goes to: the primary, or a streaming replica where a read path
chose it (docs/deploying.md, "Reads from a replica").

Every write, and every read outside such a path, goes to the primary (`default`). A
read path that may be served a little behind (an agent's search, its memory search)
asks approvals.replica.replica_read, which picks the replica only once it has replayed
what the read must see, and sets the alias for the block; the ORM follows it through
ReplicaRouter, and raw SQL asks read_connection(). Nothing here decides whether the
replica is fresh enough: this module only carries the choice, and notices the writes
that make a caller's later reads wait for the replica (writes_noticed).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Model

REPLICA = "replica"  # the alias DATABASE_REPLICA_URL configures (config/settings.py)

_read_alias: ContextVar[str] = ContextVar("lectern_read_alias", default=DEFAULT_DB_ALIAS)
# Statements that change rows, whatever leads them (a CTE, a comment). A lock taken to
# write later (SELECT ... FOR UPDATE) is not one; ON CONFLICT DO UPDATE comes with its INSERT.
_WRITE = re.compile(r"\b(?:INSERT\s+INTO|UPDATE\s+\S+\s+SET|DELETE\s+FROM|MERGE\s+INTO|TRUNCATE)\b", re.IGNORECASE)


def replica_configured() -> bool:
    return REPLICA in connections.settings


def read_alias() -> str:
    """The alias reads go to here: the replica inside a block reading_from() it, else
    the primary."""
    return _read_alias.get()


def read_connection() -> BaseDatabaseWrapper:
    """The connection raw SQL reads with (what `django.db.connection` is outside)."""
    return connections[read_alias()]


@contextmanager
def reading_from(alias: str) -> Iterator[None]:
    """Reads in the block (ORM and read_connection()) go to `alias`; writes stay on the
    primary whatever it is."""
    token = _read_alias.set(alias)
    try:
        yield
    finally:
        _read_alias.reset(token)


class ReplicaRouter:
    """DATABASE_ROUTERS: ORM reads where reading_from() sends them, writes and
    migrations on the primary. A row read from the replica may be written back: both
    hold the same rows."""

    def db_for_read(self, model: type[Model], **hints: Any) -> str:
        return read_alias()

    def db_for_write(self, model: type[Model], **hints: Any) -> str:
        return DEFAULT_DB_ALIAS

    def allow_relation(self, obj1: Model, obj2: Model, **hints: Any) -> bool:
        return True

    def allow_migrate(self, db: str, app_label: str, model_name: str | None = None, **hints: Any) -> bool:
        return db == DEFAULT_DB_ALIAS


class WriteNoticer:
    """An execute wrapper on the primary's connection: `wrote` once a statement that
    changes rows went through it (the ORM's and raw SQL alike)."""

    def __init__(self) -> None:
        self.wrote = False

    def __call__(self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        if not self.wrote and _WRITE.search(sql):
            self.wrote = True
        return execute(sql, params, many, context)


@contextmanager
def writes_noticed() -> Iterator[WriteNoticer]:
    """Whether the block wrote to the primary (on this thread's connection)."""
    noticer = WriteNoticer()
    with connections[DEFAULT_DB_ALIAS].execute_wrapper(noticer):
        yield noticer


_served: ContextVar[list[str] | None] = ContextVar("lectern_reads_served", default=None)


@contextmanager
def reads_served() -> Iterator[list[str]]:
    """The aliases the block's routed reads were served from, in order (note_served)."""
    served: list[str] = []
    token = _served.set(served)
    try:
        yield served
    finally:
        _served.reset(token)


def note_served(alias: str) -> None:
    served = _served.get()
    if served is not None:
        served.append(alias)
