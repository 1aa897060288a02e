"""Agents and their bearer tokens: the one place a token is issued.

A token is shown once, to whoever asked for it (a command's output, the demo loader's
report, a test), and only its sha256 is stored: tokens are 256-bit random strings, so a
plain hash is a safe at-rest form. `manage.py create_agent`, the demo loader, the
benchmarks and the tests all issue tokens through agent_create / agent_token_rotate,
which announce each issue (`catalog.signals.token_issued`, without the token: approvals
writes it to the audit log).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from catalog.models import Agent, Catalog, ReferenceSource
from catalog.signals import token_issued

TOKEN_PREFIX = "lct_"
HINT_CHARS = 8  # the token's first characters, stored to tell tokens apart


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def _token_issue(agent: Agent) -> str:
    """Give `agent` a new token (its previous one stops working once saved)."""
    token = new_token()
    agent.token_hash, agent.token_hint = hash_token(token), token[:HINT_CHARS]
    return token


@transaction.atomic
def agent_create(*, name: str, catalogs: Iterable[Catalog] = (), preselected: Iterable[ReferenceSource] = (),
                 by: User | None = None, **profile: Any) -> tuple[Agent, str]:
    """A new agent scoped to `catalogs`, with `profile` (is_curator, strategy,
    token_budget, default_top_k, ...), and its token; `by`: the person asking (None: a
    command or a service). Raises ValidationError on a field out of range or a name taken."""
    agent = Agent(name=name, **profile)
    token = _token_issue(agent)
    agent.full_clean()
    agent.save()
    agent.catalogs.set(catalogs)
    agent.preselected.set(preselected)
    token_issued.send(sender=Agent, agent=agent, created=True, by=by)
    return agent, token


@transaction.atomic
def agent_token_rotate(*, name: str, catalogs: Iterable[Catalog] | None = None,
                       preselected: Iterable[ReferenceSource] | None = None, by: User | None = None,
                       **profile: Any) -> tuple[Agent, str]:
    """A new token for agent `name`, created when missing; the old token stops working.
    `catalogs`, `preselected` and `profile` fields replace the agent's when given."""
    agent = Agent.objects.select_for_update().filter(name=name).first()
    if agent is None:
        return agent_create(name=name, catalogs=catalogs or (), preselected=preselected or (), by=by, **profile)
    for field, value in profile.items():
        setattr(agent, field, value)
    token = _token_issue(agent)
    agent.full_clean()
    agent.save()
    if catalogs is not None:
        agent.catalogs.set(catalogs)
    if preselected is not None:
        agent.preselected.set(preselected)
    token_issued.send(sender=Agent, agent=agent, created=False, by=by)
    return agent, token
