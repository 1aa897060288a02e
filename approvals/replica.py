"""When an agent's read may be served by the streaming replica (docs/deploying.md,
"Reads from a replica").

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
from collections.abc import Callable
from typing import TypeVar

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, transaction

from catalog.models import Agent, AuditEntry
from catalog.reads import REPLICA, note_served, reading_from, replica_configured

logger = logging.getLogger(__name__)

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
