"""Which database a read goes to: the primary, or a streaming replica where a read path
chose it (docs/deploying.md, "Reads from a replica").

Every write, and every read outside such a path, goes to the primary (`default`). A
read path that may be served a little behind (an agent's search, its memory search)
asks replica_read, which picks the replica only once it has replayed what the read must
see (below), and sets the alias for the block; the ORM follows it through ReplicaRouter,
and raw SQL asks read_connection(). writes_noticed notes the writes that make a
caller's later reads wait for the replica.

A replica replays the primary's WAL a little behind it. Two things must never be read
behind: the gate's facts (a revoked or rejected approval honoured, a tightened policy
not yet applied, content served that its approval no longer covers) and what the
caller itself wrote (an agent stores a memory and searches for it at once). So a read
goes to the replica only when the replica has replayed:

1. every governance change the primary had committed when the read began. Each one
   (decision, revocation, policy, lapse, expiry, an agent's catalogs) appends to the
   audit log in its own transaction, and appends take turns on one lock, so entry
   numbers (`seq`) follow commit order: a replica holding the primary's newest `seq`
   holds every governance change up to it. No separate marker can fall out of step
   with the change it marks, even when a process dies between the two;
2. the primary's WAL position after the agent's latest write (Agent.read_fence,
   recorded after each request that wrote: catalog.agents.agent_read_fence_advance).

Both are checked in one statement on the replica, inside the transaction the read then
runs in, so the read sees at least what was checked (one replica connection, which only
moves forward). Else, or when the replica cannot be reached, the read goes to the
primary. Content a curator changed may be served up to the replica's lag behind: the
replica's state is one the primary was in, with the gate's facts as they are now.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Model

from catalog.models import Agent, AuditEntry

logger = logging.getLogger(__name__)

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


# --- when the replica may serve an agent's read ------------------------------------------------

Read = TypeVar("Read")

_REPLAYED = (f"SELECT coalesce(pg_last_wal_replay_lsn() - '0/0'::pg_lsn >= %s, false) "
             f"AND coalesce((SELECT max(seq) FROM {AuditEntry._meta.db_table}), 0) >= %s")


def governance_head() -> int:
    """The newest audit entry's number on the primary (0: an empty log)."""
    seq = AuditEntry.objects.using(DEFAULT_DB_ALIAS).order_by("-seq").values_list("seq", flat=True).first()
    return seq or 0


class ReplicaUnavailable(Exception):
    """The replica could not be asked (down, restarting, unreachable)."""


def replica_read(*, agent: Agent | None, read: Callable[[], Read]) -> Read:
    """`read()` on the replica when it has replayed what `agent`'s read must see (the
    module docstring), else on the primary; writes inside it go to the primary either way. An
    error of the read itself is raised, wherever it came from: only asking the replica
    falls back."""
    if not replica_configured() or agent is None:  # people (the playground, the API by session): the primary
        return read()
    fence, head = agent.read_fence, governance_head()
    try:
        _connect()
        with transaction.atomic(using=REPLICA):
            if _replayed(fence=fence, head=head):
                note_served(REPLICA)
                with reading_from(REPLICA):
                    return read()
    except ReplicaUnavailable as exc:
        logger.warning("replica unavailable, reading from the primary: %s", exc.__cause__)
    note_served(DEFAULT_DB_ALIAS)
    return read()


def _connect() -> None:
    """The replica's connection, checked (CONN_HEALTH_CHECKS: a replica restarted since
    the last request is reconnected to here, outside the transaction)."""
    replica = connections[REPLICA]
    try:
        replica.close_if_health_check_failed()
        replica.ensure_connection()
    except DatabaseError as exc:
        raise ReplicaUnavailable from exc


def _replayed(*, fence: int, head: int) -> bool:
    """Whether the replica holds the agent's writes and the governance head (False
    where it has no replay position: not a standby)."""
    try:
        with connections[REPLICA].cursor() as cursor:
            cursor.execute(_REPLAYED, [fence, head])
            row = cursor.fetchone()
    except DatabaseError as exc:
        raise ReplicaUnavailable from exc
    return bool(row and row[0])
