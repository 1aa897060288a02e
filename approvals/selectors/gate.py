"""The one gate every injection passes: may this reference reach this agent now?

Enrichment, reference selection, startup instructions, transitive discovery and file
reads ask `injection_decisions` and honour its answer; search asks `withheld_sources`,
the same rule over whole catalogs, and leaves those sources out in SQL.

Nothing here writes. A decision says when a request is due (`request_due`: an agent's
first, or after its approval ended) and carries what raising it needs (the fingerprint
and the request it follows); the read path's service then raises them in one call
(approvals.services.requests.withheld_requests_raise), so the gate's statement runs once.

A source is governed when its `requires_approval` flag is set or an ApprovalPolicy
covers it for the caller (its catalog, the source, or one of its tags; every agent or
the agents named). A governed source reaches an agent only while one of the agent's
requests for the source's current fingerprint is live: approved by the required number
of distinct reviewers, within its lifetime, not revoked or lapsed. People signed in
(agent None) are never approved: every policy applies to them and they see nothing
governed. One statement answers for any number of sources.

This module's first section is pure (no Django, no database): `judge` turns the rule
that governs a source (the strictest of the policies that apply, a `Rule`) and the
caller's requests for its current content (`RequestState`) into the answer a read path
shows (a `Judgement`). The rest reads those inputs in one statement and answers with it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from django.utils import timezone

from approvals.models import ApprovalPolicy
from catalog.models import Agent
from catalog.reads import read_connection

# --- what the gate concludes (pure: no Django, no database) -------------------------------
#
# From the rule that governs a source and the caller's requests for its current content,
# what a read path shows: allowed or withheld, which request to follow and why, and
# whether a new request must be raised. The statement below computes both inputs.

MISSING_REASON = "requires approval; no reviewer has approved it for this agent"
PEOPLE_REASON = "requires approval; approvals are granted to agents, not to people signed in"


@dataclass(frozen=True)
class Rule:
    """The strictest of the policies covering a source for one caller (the source's own
    `requires_approval` flag counts as a policy of one approval, forever). Matches are
    disclosed only where at least one policy covers the source and every one allows
    it: the flag alone never discloses, and says nothing against a policy that does."""

    required: int = 1
    lifetime: timedelta | None = None  # None: forever
    four_eyes: bool = False
    policy_ids: tuple[int, ...] = ()
    disclose_matches: bool = False


@dataclass(frozen=True)
class RequestState:
    """A request of the caller for the source's current fingerprint, as the gate read it."""

    id: int
    state: str
    approvals: int
    live: bool  # approved by `required` reviewers, not past its lifetime
    timed_out: bool  # its approval's lifetime is over (whatever the state column says yet)
    raised_via: str = ""  # "reindex": raised when the content changed under an approval or a request


@dataclass(frozen=True)
class Judgement:
    allowed: bool
    state: str  # not_required | approved | pending | rejected | revoked | expired | missing
    reason: str = ""
    request_id: int | None = None
    raise_request: bool = False  # a new request is due (an agent's first, or after an approval ended)
    previous_id: int | None = None  # the request a new one follows


NOT_REQUIRED = Judgement(allowed=True, state="not_required")


def judge(*, rule: Rule, requests: Sequence[RequestState], for_agent: bool) -> Judgement:
    """Allowed while a request is live; otherwise withheld, naming the request to follow
    (newest first in `requests`). A rejection or revocation stands for this content
    (nothing new is raised until it changes or someone asks by hand); an expired
    approval, or one short of approvals the policy now requires, calls for a new
    request, as does having none."""
    if not for_agent:
        return Judgement(allowed=False, state="missing", reason=PEOPLE_REASON)
    if (live := next((r for r in requests if r.live), None)) is not None:
        return Judgement(allowed=True, state="approved", request_id=live.id)
    if (pending := next((r for r in requests if r.state == "pending"), None)) is not None:
        progress = f" ({pending.approvals} of {rule.required} approvals)" if rule.required > 1 else ""
        changed = "; its content changed since it was last approved or requested" \
            if pending.raised_via == "reindex" else ""
        return Judgement(allowed=False, state="pending", request_id=pending.id,
                         reason=f"requires approval{changed}; request {pending.id} awaits a reviewer{progress}")
    latest = requests[0] if requests else None
    if latest is None:
        return Judgement(allowed=False, state="missing", reason=MISSING_REASON, raise_request=True)
    if latest.state == "rejected":
        return Judgement(allowed=False, state="rejected", request_id=latest.id,
                         reason=f"requires approval; request {latest.id} was rejected")
    if latest.state == "revoked":
        return Judgement(allowed=False, state="revoked", request_id=latest.id,
                         reason=f"requires approval; the approval of request {latest.id} was revoked")
    if latest.state == "expired" or (latest.state == "approved" and latest.timed_out):
        return Judgement(allowed=False, state="expired", request_id=latest.id, raise_request=True,
                         previous_id=latest.id,
                         reason=f"requires approval; the approval of request {latest.id} expired")
    if latest.state == "approved":  # short of what the policy requires now
        return Judgement(allowed=False, state="missing", request_id=latest.id, raise_request=True,
                         previous_id=latest.id,
                         reason=f"requires approval; request {latest.id} has {latest.approvals} of the "
                                f"{rule.required} approvals now required")
    # lapsed: the content went back to a fingerprint approved before; that approval ended
    return Judgement(allowed=False, state="missing", request_id=latest.id, raise_request=True,
                     previous_id=latest.id, reason=MISSING_REASON)


# --- the gate -----------------------------------------------------------------------------

class Governed(Protocol):
    """A source as the gate takes it: a ReferenceSource, retrieval's SourceCard, or
    anything with the source's pk (the gate reads the rest from the database as it is
    now, not from a cached card)."""

    @property
    def pk(self) -> int: ...


@dataclass(frozen=True)
class InjectionDecision:
    allowed: bool
    state: str  # not_required | approved | pending | rejected | revoked | expired | missing
    reason: str = ""
    request_id: int | None = None  # the approval request to follow (GET /api/v1/approvals)
    # A request is due and none was raised yet: the agent's first, or after its approval
    # ended; the read path's service raises it (withheld_requests_raise), a listing or
    # the playground only says so. Not in as_dict(): the API's answers say what was
    # raised, not what could have been.
    request_due: bool = False
    # Whether the policies let a read path tell the caller that its query matches the
    # withheld content (and raise its request then); off, a withheld source is named
    # whatever the query (Rule.disclose_matches). Not in as_dict(): search reports it as
    # a count or none.
    disclose_matches: bool = False
    fingerprint: str = ""  # the content a due request would be raised for
    previous_id: int | None = None  # the request a due one follows

    def as_dict(self) -> dict[str, object]:
        return {"allowed": self.allowed, "state": self.state, "reason": self.reason, "request_id": self.request_id}

    @classmethod
    def of(cls, judgement: Judgement, rule: Rule | None = None, fingerprint: str = "") -> InjectionDecision:
        return cls(allowed=judgement.allowed, state=judgement.state, reason=judgement.reason,
                   request_id=judgement.request_id, request_due=judgement.raise_request,
                   disclose_matches=rule is not None and rule.disclose_matches, fingerprint=fingerprint,
                   previous_id=judgement.previous_id)

    def raised(self, request_id: int) -> InjectionDecision:
        """This decision once its due request exists: pending, naming it."""
        ended = "" if self.reason == MISSING_REASON else self.reason.removeprefix("requires approval")
        return replace(self, state="pending", request_id=request_id, request_due=False,
                       reason=f"requires approval{ended}; request {request_id} awaits a reviewer")


NOT_GOVERNED = InjectionDecision.of(NOT_REQUIRED)


@dataclass(frozen=True)
class _Source:
    pk: int


@dataclass
class Governance:
    """One governed source as the gate read it: its current fingerprint, the rule that
    applies to the caller, and the caller's requests for that fingerprint (newest first)."""

    source_id: int
    fingerprint: str
    rule: Rule
    requests: list[RequestState]


def injection_decisions(*, agent: Agent | None, sources: Iterable[Governed]) -> dict[int, InjectionDecision]:
    """Decision per source pk for `agent` (an Agent, or None for a signed-in person),
    naming the requests that exist; one that is due says so (`request_due`)."""
    pks = list(dict.fromkeys(source.pk for source in sources))
    if not pks:
        return {}
    governed = governance(agent=agent, source_ids=pks)
    decisions = {pk: _decision(g, agent) for pk, g in governed.items()}
    return {pk: decisions.get(pk, NOT_GOVERNED) for pk in pks}


def _decision(governed: Governance, agent: Agent | None) -> InjectionDecision:
    judgement = judge(rule=governed.rule, requests=governed.requests, for_agent=agent is not None)
    return InjectionDecision.of(judgement, governed.rule, governed.fingerprint)


def withheld_sources(*, agent: Agent | None, catalog_ids: Iterable[int]) -> dict[int, InjectionDecision]:
    """The sources of these catalogs that may not reach `agent` (None: a signed-in
    person), each with the gate's decision: what search leaves out of its SQL before
    ranking. One statement; sources approved for the agent never leave the database."""
    governed = governance(agent=agent, catalog_ids=list(catalog_ids), withheld_only=True)
    decisions = {pk: _decision(g, agent) for pk, g in governed.items()}
    return {pk: decision for pk, decision in decisions.items() if not decision.allowed}


def source_rules(*, agent: Agent | None, source_ids: Iterable[int]) -> dict[int, Governance]:
    """The governance of these sources for `agent` (only those governed): the rule the
    decide service checks (required approvals, four eyes) and listings show."""
    return governance(agent=agent, source_ids=list(source_ids))


# --- the statement ------------------------------------------------------------------------

# The policies that apply to the caller: every policy for a person (agent NULL).
_POLICIES = """
    SELECT p.id, p.catalog_id, p.source_id, p.tag_id, p.required_approvals, p.lifetime, p.four_eyes,
           p.disclose_matches
    FROM approvals_approvalpolicy p
    WHERE p.all_agents OR %(agent)s::bigint IS NULL
       OR EXISTS (SELECT FROM approvals_approvalpolicy_agents a
                  WHERE a.approvalpolicy_id = p.id AND a.agent_id = %(agent)s)
"""

# An approval's lifetime is over: by its own expiry, or by the lifetime the policies set now.
_TIMED_OUT = "(coalesce(r.expires_at <= %(now)s, false) OR coalesce(r.decided_at + g.lifetime <= %(now)s, false))"
# A request that lets the source through: approved by enough reviewers, not timed out.
_LIVE = f"(r.state = 'approved' AND r.approvals >= g.required AND NOT {_TIMED_OUT})"

# `g`: the governed sources among those asked about, each with the strictest rule of the
# policies covering it (the flag alone: one approval, forever, no matches disclosed;
# matches are disclosed where a policy covers the source and none of them refuses). Two branches, of which
# Postgres runs one (each has a one-time filter): while no policy applies to the caller
# (the usual case), only flagged sources are read, with no per-source work; otherwise the
# policies' rules are aggregated once per catalog (`c`) and once per source they name or
# tag (`o`), and each source takes the stricter of its two by hash joins (what a
# catalog-wide policy costs is one pass over the catalog's sources, not a per-source
# search of the policies). Then the caller's requests for each source's current
# fingerprint, newest first, with which are live. With `withheld`, a source with a live
# request is left out (a hash anti-join: what an approved catalog costs is one pass over
# its governed sources and the agent's approvals).
_RULE = """max(p.required_approvals) AS required, min(p.lifetime) AS lifetime, bool_or(p.four_eyes) AS four_eyes,
           bool_and(p.disclose_matches) AS disclose, array_agg(p.id) AS policy_ids"""
_GOVERNANCE = """
WITH pol AS MATERIALIZED ({policies}),
g AS MATERIALIZED (
    SELECT s.id, s.fingerprint, 1 AS required, NULL::interval AS lifetime, false AS four_eyes,
           false AS disclose, '{{}}'::bigint[] AS policy_ids
    FROM catalog_referencesource s
    WHERE {where} AND s.requires_approval AND NOT EXISTS (SELECT FROM pol)
    UNION ALL
    SELECT s.id, s.fingerprint, greatest(coalesce(c.required, 1), coalesce(o.required, 1), 1),
           least(c.lifetime, o.lifetime), coalesce(c.four_eyes, false) OR coalesce(o.four_eyes, false),
           (c.catalog_id IS NOT NULL OR o.source_id IS NOT NULL) AND coalesce(c.disclose, true)
               AND coalesce(o.disclose, true),
           coalesce(c.policy_ids, '{{}}') || coalesce(o.policy_ids, '{{}}')
    FROM catalog_referencesource s
    LEFT JOIN (SELECT p.catalog_id, {rule} FROM pol p WHERE p.catalog_id IS NOT NULL
               GROUP BY p.catalog_id) c ON c.catalog_id = s.catalog_id
    LEFT JOIN (SELECT p.source_id, {rule}
               FROM (SELECT source_id, id, required_approvals, lifetime, four_eyes, disclose_matches FROM pol
                     WHERE source_id IS NOT NULL
                     UNION ALL
                     SELECT t.referencesource_id, pol.id, pol.required_approvals, pol.lifetime, pol.four_eyes,
                            pol.disclose_matches
                     FROM pol JOIN catalog_referencesource_tags t ON t.tag_id = pol.tag_id) p
               GROUP BY p.source_id) o ON o.source_id = s.id
    WHERE {where} AND (s.requires_approval OR c.catalog_id IS NOT NULL OR o.source_id IS NOT NULL)
      AND EXISTS (SELECT FROM pol)
)
SELECT g.id, g.fingerprint, g.required, g.lifetime, g.four_eyes, g.disclose, g.policy_ids,
       r.id, r.state, r.approvals, {live} AS live, {timed_out} AS timed_out, r.raised_via
FROM g
LEFT JOIN approvals_approvalrequest r ON r.agent_id = %(agent)s AND r.source_id = g.id AND r.fingerprint = g.fingerprint
{withheld}
ORDER BY g.id, r.id DESC
"""

_WITHHELD_ONLY = f"""WHERE NOT EXISTS (
    SELECT FROM approvals_approvalrequest r
    WHERE r.agent_id = %(agent)s AND r.source_id = g.id AND r.fingerprint = g.fingerprint AND {_LIVE})"""


def governance(*, agent: Agent | None, source_ids: list[int] | None = None, catalog_ids: list[int] | None = None,
               withheld_only: bool = False, now: datetime | None = None) -> dict[int, Governance]:
    """The governed sources among `source_ids` (or in `catalog_ids`) for `agent`, read
    in one statement; `withheld_only` leaves out those with a live request."""
    params: dict[str, Any] = {"agent": agent.pk if agent is not None else None, "now": now or timezone.now()}
    if source_ids is not None:
        where, params["ids"] = "s.id = ANY(%(ids)s)", source_ids
    else:
        where, params["catalogs"] = "s.catalog_id = ANY(%(catalogs)s)", catalog_ids or []
    sql = _GOVERNANCE.format(policies=_POLICIES, rule=_RULE, where=where, live=_LIVE, timed_out=_TIMED_OUT,
                             withheld=_WITHHELD_ONLY if withheld_only else "")
    with read_connection().cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    found: dict[int, Governance] = {}
    for (pk, fingerprint, required, lifetime, four_eyes, disclose, policy_ids,
         request_id, state, approvals, live, timed_out, raised_via) in rows:
        entry = found.get(pk)
        if entry is None:
            rule = Rule(required, lifetime, four_eyes, tuple(sorted(policy_ids)), disclose)
            entry = found[pk] = Governance(pk, fingerprint, rule, [])
        if request_id is not None:
            entry.requests.append(RequestState(request_id, state, approvals, live, timed_out, raised_via))
    return found


def self_approval_allowed(rule: Rule) -> bool:
    """Whether the person whose change raised a request may decide it under `rule`: only
    while policies cover the source and every one of them allows it (strictest wins, as
    for the other settings; a source its own flag alone governs never allows it)."""
    if not rule.policy_ids:
        return False
    return not ApprovalPolicy.objects.filter(pk__in=rule.policy_ids, allow_self_approval=False).exists()


# --- when an approval ends ------------------------------------------------------------------

# When an approved request's approval ends, from the facts the gate's _TIMED_OUT reads:
# its own `expires_at`, or its decision plus the shortest lifetime the policies covering
# its source for its agent set now (the gate aggregates the same policies per source).
# NULL: never. `{r}` is the request table's name or alias in the enclosing statement.
# Listings (approvals.selectors.requests.with_state_now), the expiry task and a reindex's
# lapse read it, so what they show and record is what the gate concludes, whenever they run.
APPROVAL_ENDS_SQL = """least({r}.expires_at, {r}.decided_at + (
    SELECT min(p.lifetime) FROM approvals_approvalpolicy p, catalog_referencesource s
    WHERE s.id = {r}.source_id AND p.lifetime IS NOT NULL
      AND (p.all_agents OR EXISTS (SELECT FROM approvals_approvalpolicy_agents a
                                   WHERE a.approvalpolicy_id = p.id AND a.agent_id = {r}.agent_id))
      AND (p.catalog_id = s.catalog_id OR p.source_id = s.id
           OR p.tag_id IN (SELECT t.tag_id FROM catalog_referencesource_tags t WHERE t.referencesource_id = s.id))))"""
