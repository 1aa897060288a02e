"""Issue 12, "Done means" (first bullet), as a property: after any sequence of policies,
approvals, rejections, revocations, expiries, content edits with their reindexes, flag
and tag changes, every read path an agent has (search in every mode, enrich on a prompt
and on a tool result, a conversation's enrichment, conversation retrieval in both
modes, listing and selecting references, reading their files, the startup instructions
for preload and rag agents, traces, its approval requests, and each MCP tool) shows no
content that needs approval unless a live approval covers that agent and that exact
content.

Content is recognisable by its canary: every version of every source carries a word of
its own (`marker`) in its text, its titles and one of its file paths, so "content
reached the agent" is a substring test on whatever the agent received. Which markers an
agent may receive is decided by `Model.allowed`, a plain reading of the rules over a
model the steps keep in Python (policies, flags, tags, versions, requests and the
clock); the gate is never asked. The model's request states are compared with the
database after every step, so the oracle judges the requests that exist.

Reads also check that what may be shown is shown (select, enrich expansions, search,
conversation retrieval, file reads, instructions): a gate that withheld everything
would fail too.

And what an agent is told of content withheld from it does not depend on whether its
query matches that content (issue 20), unless every policy covering the source
discloses matches (`disclose_matches`, drawn with each policy): every withheld source is
named by search, conversation retrieval and conversation enrichment, uncounted, with
the same entry for a query that matches nothing (`probe`); semantic detection and the
path pass of enrich never find, score or pin one.

MCP tools are called through the SDK's own client and server, in memory: the same
dispatch, argument handling and tool code as over stdio, on this test's connection
(asgiref runs the tools' sync work on this thread), so each example still rolls back.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone
from hypothesis import HealthCheck, event, example, given, note, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.types import CallToolResult, TextContent
from rest_framework.test import APIClient

from approvals.models import ApprovalRequest
from approvals.services.decisions import request_decide
from approvals.services.expiry import approvals_expire
from approvals.services.policies import policy_create, policy_delete, policy_update
from approvals.services.requests import request_raise
from approvals.services.revocation import approval_revoke
from catalog.errors import ApplicationError
from catalog.indexing.runs import source_import
from catalog.models import Agent, Catalog, IndexRun, ReferenceSource, Tag
from catalog.sources.documents import DocumentInput
from catalog.sources.editing import source_changed_by
from catalog.tags import tags_ensure
from retrieval.enrichment.detection import forget_indexes
from retrieval.mcp import calls
from retrieval.mcp.server import build_server
from retrieval.models import Trace
from tests.factories import agent_with_token, import_documents, person

pytestmark = pytest.mark.django_db

SOURCES = ("vault", "notes", "rules", "leaf")
MODES = {"vault": ReferenceSource.Mode.PRESELECTED, "notes": ReferenceSource.Mode.SELECTABLE,
         "rules": ReferenceSource.Mode.AUTO, "leaf": ReferenceSource.Mode.SELECTABLE}
# Each source's text names another (discovery follows these only through allowed content).
MENTIONS = {"vault": "@leaf", "notes": "@vault", "rules": "@notes", "leaf": ""}
AGENTS = ("bot", "other-bot")  # preload with notes preselected; rag
TAG = "secret"
SEARCH_MODES = ("bm25", "vector", "hybrid", "bm25_tiebreak")
READS = (*(f"search:{mode}" for mode in SEARCH_MODES), "conversation:approximate", "conversation:exact", "select",
         "list", "enrich:prompt", "enrich:tool_result", *(f"file:{source}" for source in SOURCES), "instructions",
         "chat")
PROMPT = "Before the secret rotation, follow @vault, @notes, @rules and @leaf."
TOOL_RESULT = "cat vault.md: done"
_LETTERS = "abcdefghijklmnopqrstuvw"  # no x or z: a marker's "zx" and "xz" occur nowhere else


def marker(source: str, version: int) -> str:
    """The canary of one version of one source's content."""
    return f"zx{source}{_LETTERS[version // len(_LETTERS)]}{_LETTERS[version % len(_LETTERS)]}xz"


def documents(source: str, version: int) -> list[DocumentInput]:
    """A source's content at `version`: its main file (the same path in every version)
    and an appendix whose path carries the marker (file listings show it)."""
    canary = marker(source, version)
    main = f"{source.title()} guidance {canary}: rotate keys every ninety days. {MENTIONS[source]}\n"
    extra = f"Appendix {canary}: keep the root token offline.\n"
    return [DocumentInput(f"{source}.md", f"{source} guidance {canary}", main, len(main.encode())),
            DocumentInput(f"{source}-{canary}.md", f"{source} appendix {canary}", extra, len(extra.encode()))]


# --- the steps ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Policy:
    scope: str  # catalog | tag | a source
    agents: str  # all | an agent
    required: int
    lifetime: int | None  # hours
    disclose: bool = False  # disclose_matches


@dataclass(frozen=True)
class DropPolicy:
    index: int


@dataclass(frozen=True)
class ChangePolicy:
    index: int
    required: int
    lifetime: int | None


@dataclass(frozen=True)
class Flag:
    source: str


@dataclass(frozen=True)
class Retag:
    source: str


@dataclass(frozen=True)
class Edit:
    source: str
    back: int | None  # None: new content; else back to content it had before (index into those)


@dataclass(frozen=True)
class Read:
    agent: str
    what: str  # one of READS
    mcp: bool


@dataclass(frozen=True)
class Ask:
    agent: str
    source: str


@dataclass(frozen=True)
class Decide:
    index: int  # into the pending requests
    reviewer: str  # rita | rob
    verdict: str  # approve | reject


@dataclass(frozen=True)
class Revoke:
    index: int  # into the approved requests


@dataclass(frozen=True)
class Advance:
    hours: int


@dataclass(frozen=True)
class Expire:
    pass


sources = st.sampled_from(SOURCES)
agents = st.sampled_from(AGENTS)
lifetimes = st.sampled_from([2, None, 5])  # hours (None: forever); the first is drawn most
picks = st.integers(0, 5)  # an index, taken modulo what there is to pick from then
STEPS = {
    "policy": st.builds(Policy, st.sampled_from(["catalog", "tag", *SOURCES]), st.sampled_from(["all", *AGENTS]),
                        st.integers(1, 2), lifetimes, st.booleans()),
    "drop": st.builds(DropPolicy, picks),
    "change": st.builds(ChangePolicy, picks, st.integers(1, 2), lifetimes),
    "flag": st.builds(Flag, sources),
    "retag": st.builds(Retag, sources),
    "edit": st.builds(Edit, st.sampled_from(["vault", "notes", *SOURCES]), st.none() | picks),  # approved ones
    "read": st.builds(Read, agents, st.sampled_from(READS), st.booleans()),
    "ask": st.builds(Ask, agents, sources),
    "decide": st.builds(Decide, picks, st.sampled_from(["rita", "rob"]),
                        st.sampled_from(["approve", "approve", "reject"])),
    "revoke": st.builds(Revoke, picks),
    "expire": st.builds(Expire),
}
# How often a kind of step comes up (1 unless named).
WEIGHTS = {"edit": 3, "decide": 3, "ask": 2, "read": 2, "policy": 2}


@st.composite
def plans(draw: st.DrawFn) -> list[object]:
    """Up to a dozen steps, kinds drawn by WEIGHTS; the clock moves on after some."""
    step = st.sampled_from([kind for kind in STEPS for _ in range(WEIGHTS.get(kind, 1))]).flatmap(STEPS.__getitem__)
    later = st.sampled_from([0, 0, 1, 3]).map(lambda hours: [Advance(hours)] if hours else [])
    return [item for first, then in draw(st.lists(st.tuples(step, later), min_size=2, max_size=12))
            for item in (first, *then)]


# --- the model and the oracle ---------------------------------------------------------------


@dataclass
class PolicyModel:
    pk: int
    scope: str
    agents: str
    required: int
    lifetime: int | None
    disclose: bool = False


@dataclass
class RequestModel:
    agent: str
    source: str
    fingerprint: str
    state: str = "pending"
    approvals: int = 0
    reviewers: set[str] = field(default_factory=set)
    decided_at: int | None = None  # hours on the clock
    expires_at: int | None = None


@dataclass
class Model:
    """What the steps did, in plain Python."""

    flags: dict[str, bool]
    tagged: set[str]
    current: dict[str, int]  # source -> version
    versions: dict[str, list[int]]  # source -> every version it has had
    fingerprints: dict[tuple[str, int], str]
    policies: list[PolicyModel] = field(default_factory=list)
    requests: dict[int, RequestModel] = field(default_factory=dict)
    hour: int = 0

    def fingerprint(self, source: str) -> str:
        return self.fingerprints[(source, self.current[source])]

    def covering(self, agent: str, source: str) -> list[PolicyModel]:
        return [p for p in self.policies
                if (p.scope in ("catalog", source) or (p.scope == "tag" and source in self.tagged))
                and p.agents in ("all", agent)]

    def required(self, agent: str, source: str) -> int:
        return max([1, *(p.required for p in self.covering(agent, source))])

    def lifetime(self, agent: str, source: str) -> int | None:
        return min([p.lifetime for p in self.covering(agent, source) if p.lifetime is not None], default=None)

    def over(self, r: RequestModel) -> bool:
        """An approval whose time is up: its own expiry, or the shortest lifetime the
        policies covering it for its agent give now, counted from its decision."""
        lifetime = self.lifetime(r.agent, r.source)
        return r.state == "approved" and (
            (r.expires_at is not None and r.expires_at <= self.hour)
            or (lifetime is not None and r.decided_at is not None and r.decided_at + lifetime <= self.hour))

    def allowed(self, agent: str, source: str) -> bool:
        """The rule: a source nothing governs for this agent reaches it; a governed one only
        while one of the agent's requests for its content as it is now is approved by as
        many reviewers as the policies require, and neither its own expiry nor the
        shortest lifetime the policies give now has run out."""
        if not self.flags[source] and not self.covering(agent, source):
            return True
        lifetime = self.lifetime(agent, source)
        return any(r.agent == agent and r.source == source and r.fingerprint == self.fingerprint(source)
                   and r.state == "approved" and r.approvals >= self.required(agent, source)
                   and (r.expires_at is None or r.expires_at > self.hour)
                   and (lifetime is None or r.decided_at is None or r.decided_at + lifetime > self.hour)
                   for r in self.requests.values())

    def governed(self, agent: str, source: str) -> bool:
        return self.flags[source] or bool(self.covering(agent, source))

    def disclosed(self, agent: str, source: str) -> bool:
        """Whether a read may say that a query matches the source while it is withheld:
        a policy covers it for the agent and every one that does discloses (the flag
        has no say)."""
        covering = self.covering(agent, source)
        return bool(covering) and all(p.disclose for p in covering)

    def hidden(self, agent: str, allowed: set[str]) -> set[str]:
        """The sources withheld from `agent` whose matches nothing discloses."""
        return {source for source in SOURCES if source not in allowed and not self.disclosed(agent, source)}

    def markers(self) -> Iterator[tuple[str, int, str]]:
        for source, versions in self.versions.items():
            for version in versions:
                yield source, version, marker(source, version)

    def in_state(self, state: str) -> list[int]:
        return sorted(pk for pk, r in self.requests.items() if r.state == state)


# --- the world: catalog, agents, people, clock ----------------------------------------------


class Clock:
    """timezone.now() for the whole test: a fixed start, plus the hours the steps moved
    it, plus a microsecond per call (so every write still gets a later timestamp than
    the last one, as the detection index's cache stamp expects). Nothing sleeps."""

    def __init__(self, start: datetime) -> None:
        self.start, self.hours, self.ticks = start, 0, itertools.count(1)

    def __call__(self) -> datetime:
        return self.start + timedelta(hours=self.hours, microseconds=next(self.ticks))


@dataclass
class World:
    catalog: Catalog
    sources: dict[str, ReferenceSource]
    agents: dict[str, Agent]
    rest: dict[str, APIClient]
    mcp: dict[str, Any]  # agent -> its MCP server (LecternServer)
    curator: User
    reviewers: dict[str, User]
    tag: Tag
    clock: Clock
    approved: dict[tuple[str, str], int]  # (agent, source) -> the request approved as it starts


@pytest.fixture
def world(make_catalog, monkeypatch) -> World:
    clock = Clock(timezone.now())
    monkeypatch.setattr(timezone, "now", clock)
    # Django's test client keeps its requests from closing the connection (and with it
    # the test's transaction); an MCP call does what a request does, so the same here.
    monkeypatch.setattr(calls, "close_old_connections", lambda: None)
    catalog = make_catalog("kb")
    made = {name: import_documents(catalog=catalog, slug=name, documents=documents(name, 0)) for name in SOURCES}
    for name, source in made.items():
        ReferenceSource.objects.filter(pk=source.pk).update(
            name=f"{name.title()} handbook", description=f"How we handle {name}.", mode=MODES[name],
            requires_approval=name == "vault")
    (tag,) = tags_ensure(names=[TAG])
    made["notes"].tags.add(tag)
    bot, bot_token = agent_with_token(name="bot", catalogs=[catalog], strategy="preload", preselected=[made["notes"]])
    other, other_token = agent_with_token(name="other-bot", catalogs=[catalog], strategy="rag")
    rest = {}
    for name, token in (("bot", bot_token), ("other-bot", other_token)):
        rest[name] = APIClient()
        rest[name].credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    agents = {"bot": bot, "other-bot": other}
    reviewers = {"rita": person("rita", "reviewer"), "rob": person("rob", "reviewer")}
    approved = {}
    for reader, slug, reviewer in (("bot", "vault", "rita"), ("other-bot", "notes", "rob")):
        approved[(reader, slug)] = request_raise(source=made[slug], agent=agents[reader], by=agents[reader]).pk
        request_decide(request_id=approved[(reader, slug)], reviewer=reviewers[reviewer], verdict="approve")
    return World(catalog=catalog, sources={name: ReferenceSource.objects.get(pk=s.pk) for name, s in made.items()},
                 agents=agents, rest=rest,
                 mcp={name: build_server(token_hash=agent.token_hash) for name, agent in agents.items()},
                 curator=person("cora", "curator"), reviewers=reviewers, tag=tag, clock=clock, approved=approved)


def initial_model(world: World) -> Model:
    """The world as the fixture made it: vault flagged and approved for bot (by rita, at
    hour 0, forever); notes tagged, governed by nothing yet and approved for other-bot
    all the same (by rob: what a policy may govern later); every source at version 0."""
    fingerprints = {(name, 0): source.fingerprint for name, source in world.sources.items()}
    reviewer = {"bot": "rita", "other-bot": "rob"}
    approved = {pk: RequestModel(agent, source, fingerprints[(source, 0)], state="approved", approvals=1,
                                 reviewers={reviewer[agent]}, decided_at=0)
                for (agent, source), pk in world.approved.items()}
    return Model(flags={name: name == "vault" for name in SOURCES}, tagged={"notes"},
                 current=dict.fromkeys(SOURCES, 0), versions={name: [0] for name in SOURCES},
                 fingerprints=fingerprints, requests=approved)


# --- running the steps ------------------------------------------------------------------------


class Run:
    def __init__(self, world: World, model: Model) -> None:
        self.world, self.model = world, model
        self.seen = max(model.requests, default=0)  # the highest request id the model knows
        self.sweeping = False  # a sweep selects every reference before it reads their files
        self.sync_requests()

    # mutations ------------------------------------------------------------------------

    def apply(self, step: object) -> None:
        w, m = self.world, self.model
        if isinstance(step, Policy):
            target: dict[str, Any] = {"catalog": w.catalog} if step.scope == "catalog" else \
                {"tag": w.tag} if step.scope == "tag" else {"source": w.sources[step.scope]}
            named = None if step.agents == "all" else [w.agents[step.agents]]
            policy = policy_create(by=w.curator, agents=named, required_approvals=step.required,
                                   lifetime=_hours(step.lifetime), disclose_matches=step.disclose, **target)
            m.policies.append(PolicyModel(policy.pk, step.scope, step.agents, step.required, step.lifetime,
                                          step.disclose))
        elif isinstance(step, DropPolicy) and m.policies:
            policy_delete(policy_id=m.policies.pop(step.index % len(m.policies)).pk, by=w.curator)
        elif isinstance(step, ChangePolicy) and m.policies:
            changed = m.policies[step.index % len(m.policies)]
            policy_update(policy_id=changed.pk, by=w.curator, required_approvals=step.required,
                          lifetime=_hours(step.lifetime))
            changed.required, changed.lifetime = step.required, step.lifetime
        elif isinstance(step, Flag):  # as the admin saves it
            source = ReferenceSource.objects.get(pk=w.sources[step.source].pk)
            source.requires_approval = m.flags[step.source] = not m.flags[step.source]
            source.save()
            source_changed_by(source=source, by=w.curator, fields=["requires_approval"])
        elif isinstance(step, Retag):
            source = w.sources[step.source]
            if step.source in m.tagged:
                source.tags.remove(w.tag)
                m.tagged.discard(step.source)
            else:
                source.tags.add(w.tag)
                m.tagged.add(step.source)
        elif isinstance(step, Edit):
            self.edit(step)
        elif isinstance(step, Read):
            self.read(step.agent, step.what, mcp=step.mcp)
        elif isinstance(step, Ask):
            request_raise(source=w.sources[step.source], agent=w.agents[step.agent], by=w.agents[step.agent])
        elif isinstance(step, Decide) and (pending := m.in_state("pending")):
            self.decide(pending[step.index % len(pending)], step.reviewer, step.verdict)
        elif isinstance(step, Revoke) and (approved := m.in_state("approved")):
            pk = approved[step.index % len(approved)]
            if m.over(m.requests[pk]):  # its time is up, marked or not: nothing left to revoke
                with pytest.raises(ApplicationError) as refused:
                    approval_revoke(request_id=pk, by=w.reviewers["rita"])
                assert refused.value.code == "not_approved"
            else:
                approval_revoke(request_id=pk, by=w.reviewers["rita"])
                m.requests[pk].state = "revoked"
        elif isinstance(step, Advance):
            w.clock.hours = m.hour = m.hour + step.hours
        elif isinstance(step, Expire):  # what the gate refuses by time, marked
            approvals_expire()
            for r in m.requests.values():
                if m.over(r):
                    r.state = "expired"
        self.sync_requests()

    def decide(self, pk: int, reviewer: str, verdict: str) -> None:
        m, r = self.model, self.model.requests[pk]
        try:
            request_decide(request_id=pk, reviewer=self.world.reviewers[reviewer], verdict=verdict)
        except ApplicationError as exc:
            assert reviewer in r.reviewers and exc.code == "already_decided", exc
            return
        assert reviewer not in r.reviewers, f"{reviewer} decided request {pk} twice"
        r.reviewers.add(reviewer)
        if verdict == "reject":
            r.state, r.decided_at = "rejected", m.hour
            return
        r.approvals += 1
        if r.approvals >= m.required(r.agent, r.source):  # the rule as it is now (1 if nothing governs it)
            lifetime = m.lifetime(r.agent, r.source)
            r.state, r.decided_at = "approved", m.hour
            r.expires_at = None if lifetime is None else m.hour + lifetime

    def edit(self, step: Edit) -> None:
        m, source = self.model, step.source
        had = m.versions[source]
        earlier = [version for version in had if version != m.current[source]]
        version = max(had) + 1 if step.back is None or not earlier else earlier[step.back % len(earlier)]
        run = source_import(catalog=self.world.catalog, slug=source, documents=documents(source, version),
                            trigger=IndexRun.Trigger.API)
        assert run.status == IndexRun.Status.SUCCEEDED, run.error
        fingerprint = ReferenceSource.objects.values_list("fingerprint", flat=True).get(pk=run.source_id)
        assert m.fingerprints.setdefault((source, version), fingerprint) == fingerprint, "same content, new fingerprint"
        if version not in had:
            had.append(version)
        if fingerprint != m.fingerprint(source):  # the switch lapses what was approved or pending for the old one
            for r in m.requests.values():  # (an approval whose time was up already is marked expired)
                if r.source == source and r.state in ("approved", "pending") and r.fingerprint != fingerprint:
                    r.state = "expired" if m.over(r) else "lapsed"
        m.current[source] = version

    def sync_requests(self) -> None:
        """Requests raised by the last step join the model (pending, for the content as it
        is now); every request's state must be the model's."""
        m = self.model
        names = {agent.pk: name for name, agent in self.world.agents.items()}
        slugs = {source.pk: name for name, source in self.world.sources.items()}
        rows = ApprovalRequest.objects.values_list("pk", "agent_id", "source_id", "fingerprint", "state", "approvals")
        for pk, agent_id, source_id, fingerprint, state, approvals in rows.order_by("pk"):
            if pk > self.seen:
                assert state == "pending" and approvals == 0, (pk, state)
                assert fingerprint == m.fingerprint(slugs[source_id]), f"request {pk} raised for other content"
                m.requests[pk] = RequestModel(names[agent_id], slugs[source_id], fingerprint)
                self.seen = pk
            r = m.requests[pk]
            assert (state, approvals) == (r.state, r.approvals), f"request {pk}: {state}/{approvals}, model {r}"

    # reads -----------------------------------------------------------------------------------

    def read(self, agent: str, what: str, *, mcp: bool) -> None:
        """One read path for one agent, checked against the oracle."""
        allowed = {source for source in SOURCES if self.model.allowed(agent, source)}
        kind, _, arg = what.partition(":")
        check = getattr(self, f"check_{kind}")
        if mcp:
            tool, arguments = self.tool_call(kind, arg)
            result = self.call_tools(agent, [(tool, arguments)])[0]
            check(agent, allowed, arg, Answer.of_tool(result))
        else:
            check(agent, allowed, arg, self.rest_call(agent, kind, arg))

    def sweep(self, mcp_agent: str) -> None:
        """Every read path for every agent: one agent's over MCP, the other's over REST
        (each transport hands the same services the same agent; which agent goes over
        which is drawn per example)."""
        self.sweeping = True
        for agent in AGENTS:
            allowed = {source for source in SOURCES if self.model.allowed(agent, source)}
            governed = {source for source in SOURCES if self.model.governed(agent, source)}
            event(f"sweep: governed sources allowed for an agent: {len(governed & allowed)}")
            event(f"sweep: sources withheld from an agent: {len(governed - allowed)}")
            reads = [what.partition(":")[::2] for what in READS]
            if agent == mcp_agent:
                results = self.call_tools(agent, [self.tool_call(kind, arg) for kind, arg in reads])
                answers = [Answer.of_tool(result) for result in results]
            else:
                answers = [self.rest_call(agent, kind, arg) for kind, arg in reads]
            for (kind, arg), answer in zip(reads, answers, strict=True):
                getattr(self, f"check_{kind}")(agent, allowed, arg, answer)
            self.probe(agent)
            # its conversation traces, read again now: what they held must not outlive the approval
            # (an enrich trace is the record of the references sent then: names, paths, links)
            for trace_id in Trace.objects.filter(agent__name=agent, surface="conversation").values_list("pk",
                                                                                                       flat=True):
                trace = self.world.rest[agent].get(f"/api/v1/traces/{trace_id}")
                assert trace.status_code == 200, trace.content
                self.clean(agent, allowed, "an earlier trace, read again", trace.json())
            approvals = self.world.rest[agent].get("/api/v1/approvals", {"limit": 200})
            assert approvals.status_code == 200, approvals.content
            # a search's request keeps the head of the query (the agent's own words: markers)
            self.clean(agent, allowed, "approvals", [{k: v for k, v in r.items()
                                                      if k != "context" or r["raised_via"] != "search"}
                                                     for r in approvals.json()["results"]])
            # each state as the gate sees it now (an approval whose time is up: expired, marked or not)
            for listed in approvals.json()["results"]:
                r = self.model.requests.get(listed["id"])  # None: raised by this sweep's reads (pending)
                expected = "pending" if r is None else "expired" if self.model.over(r) else r.state
                assert listed["state"] == expected, (listed, r)
        self.sweeping = False
        self.sync_requests()

    def search_query(self) -> str:
        return " ".join(marker(source, self.model.current[source]) for source in SOURCES) + " guidance"

    def conversation(self, mode: str) -> dict[str, Any]:
        """A conversation about every source (its markers), every document it finds shown."""
        talk = [{"role": "user", "content": self.search_query()},
                {"role": "assistant", "content": "Sure, happy to help with that."},
                {"role": "user", "content": "And what does the guidance say about rotating keys?"}]
        return {"messages": talk, "mode": mode, "top_k": 50, "min_similarity": -1}

    def rest_call(self, agent: str, kind: str, arg: str) -> Answer:
        client = self.world.rest[agent]
        if kind == "search":
            response = client.post("/api/v1/search", {"catalog": "kb", "query": self.search_query(), "mode": arg,
                                                      "top_k": 50}, format="json")
        elif kind == "conversation":
            response = client.post("/api/v1/search/conversation", {"catalog": "kb", **self.conversation(arg)},
                                   format="json")
        elif kind == "select":
            response = client.post("/api/v1/references/select", {"ids": list(SOURCES)}, format="json")
        elif kind == "list":
            response = client.get("/api/v1/references")
        elif kind == "enrich":
            body = {"text": PROMPT, "surface": "prompt"} if arg == "prompt" else \
                {"text": TOOL_RESULT, "surface": "tool_result", "paths": ["vault.md"]}
            response = client.post("/api/v1/enrich", body, format="json")
        elif kind == "file":
            response = client.get(f"/api/v1/references/kb/{arg}/file", {"path": f"{arg}.md"})
        elif kind == "chat":
            response = client.post("/api/v1/enrich/conversation", self.chat(), format="json")
        else:
            response = client.get("/api/v1/agent/instructions")
        return Answer(status=response.status_code, body=response.json(), text="")

    def tool_call(self, kind: str, arg: str) -> tuple[str, dict[str, Any]]:
        if kind == "search":
            return "rag_search", {"query": self.search_query(), "mode": arg, "top_k": 50}
        if kind == "conversation":
            return "search_conversation", self.conversation(arg)
        if kind == "select":
            return "select_references", {"ids": list(SOURCES)}
        if kind == "list":
            return "list_references", {}
        if kind == "enrich":
            if arg == "prompt":
                return "enrich", {"text": PROMPT, "surface": "prompt"}
            return "enrich", {"text": TOOL_RESULT, "surface": "tool_result", "paths": ["vault.md"]}
        if kind == "file":
            return "read_reference_file", {"catalog": "kb", "source_id": arg, "path": f"{arg}.md"}
        if kind == "chat":
            return "enrich_conversation", self.chat()
        return "agent_instructions", {}

    def chat(self) -> dict[str, Any]:
        """A conversation to enrich, whose newest user message is about every source (in words, not
        markers: the messages come back, so they must hold none), every passage kept
        (relevance 0 and up, as many as allowed: each of the catalog's few chunks)."""
        return {"messages": [{"role": "system", "content": "Answer from the references."},
                             {"role": "user", "content": PROMPT}, {"role": "assistant", "content": "Noted."},
                             {"role": "user", "content": "Which guidance applies: rotate the keys, keep the root "
                                                         "token offline?"}],
                "user_id": "end-user", "options": {"rag_relevance_threshold": 0.0, "rag_max_results": 20}}

    def call_tools(self, agent: str, batch: list[tuple[str, dict[str, Any]]]) -> list[CallToolResult]:
        """The tools called through the SDK's client and the agent's server, in memory."""
        server = self.world.mcp[agent]

        async def run() -> list[CallToolResult]:
            async with Client(server, mode="legacy") as client:
                return [await client.call_tool(name, arguments) for name, arguments in batch]

        return async_to_sync(run)()

    # what each read must (not) show ----------------------------------------------------------

    def clean(self, agent: str, allowed: set[str], label: str, *received: object) -> str:
        """Everything the agent received, as one text, with no marker of content it may
        not have now, and no trace of reading such content (a reference it points at)."""
        text = "\n".join(item if isinstance(item, str) else json.dumps(item) for item in received)
        for source, version, canary in self.model.markers():
            if canary in text and not (source in allowed and version == self.model.current[source]):
                live = "its content now" if version == self.model.current[source] else f"version {version}"
                pytest.fail(f"{label}: {agent} received {source} ({live}, {canary}) without a live approval; "
                            f"allowed: {sorted(allowed)}\n{text[:3000]}")
        for item in received:
            for parent in _parents(item):
                assert parent["source_id"] in allowed, f"{label}: {agent} was led through {parent} (withheld)"
        return text

    def check_search(self, agent: str, allowed: set[str], mode: str, answer: Answer) -> None:
        assert answer.status == 200, answer.body
        text = self.clean(agent, allowed, f"search {mode}", answer.body, answer.text)
        hits = {hit["source"] for hit in answer.body["results"]}
        withheld = {entry["source"] for entry in answer.body["withheld"]["sources"]}
        assert hits <= allowed and withheld == set(SOURCES) - allowed, (mode, hits, withheld, allowed)
        self.uncounted(agent, allowed, f"search {mode}", answer.body["withheld"]["sources"], "source")
        for source in allowed:
            assert marker(source, self.model.current[source]) in text, f"search {mode}: {agent} misses {source}"

    def check_conversation(self, agent: str, allowed: set[str], mode: str, answer: Answer) -> None:
        assert answer.status == 200, answer.body
        # each hit's query chunk is the agent's own words (the conversation names every marker)
        hits = [{k: v for k, v in hit.items() if k != "query_chunk"} for hit in answer.body["results"]]
        text = self.clean(agent, allowed, f"conversation {mode}", {**answer.body, "results": hits}, answer.text)
        shown = {hit["source"] for hit in hits}
        withheld = {entry["source"] for entry in answer.body["withheld"]["sources"]}
        assert shown <= allowed and withheld == set(SOURCES) - allowed, (mode, shown, withheld, allowed)
        self.uncounted(agent, allowed, f"conversation {mode}", answer.body["withheld"]["sources"], "source")
        for source in allowed:  # every document found: fewer than top_k, no similarity floor
            assert marker(source, self.model.current[source]) in text, f"conversation {mode}: {agent} misses {source}"

    def uncounted(self, agent: str, allowed: set[str], label: str, entries: list[dict[str, Any]], key: str) -> None:
        """A withheld source whose matches no policy discloses is named with no count."""
        hidden = self.model.hidden(agent, allowed)
        for entry in entries:
            assert (entry["count"] is None) == (entry[key] in hidden), (label, agent, entry, hidden)

    def unmatched(self, agent: str, allowed: set[str], label: str, hints: list[dict[str, Any]],
                  steps: list[dict[str, Any]]) -> None:
        """Enrich's semantic detection (whose profiles hold the head of each source's text)
        neither finds nor scores a withheld source whose matches nothing discloses."""
        hidden = {f"kb/{source}" for source in self.model.hidden(agent, allowed)}
        for hint in hints:
            if f"kb/{hint['source_id']}" in hidden:
                assert hint["score"] is None and "semantic" not in {r["via"] for r in hint["reasons"]}, (label, hint)
        (semantic,) = [step for step in steps if step["pass"] == "semantic"]
        assert not hidden & {*semantic.get("candidates", {}), *semantic.get("nearest_below_threshold", {})}, \
            (label, semantic, hidden)

    def probe(self, agent: str) -> None:
        """Search in every mode, conversation retrieval and conversation enrichment, each
        asked about every source and at once again in words no source holds: each
        withheld source that discloses nothing is named with the same entry (the first
        read raised no request for it, so the second sees the same state)."""
        hidden = self.model.hidden(agent, {source for source in SOURCES if self.model.allowed(agent, source)})
        client, nothing = self.world.rest[agent], "qqqq wwww"

        def search(mode: str, words: str | None) -> Any:
            return client.post("/api/v1/search", {"catalog": "kb", "query": words or self.search_query(),
                                                  "mode": mode, "top_k": 50}, format="json")

        def conversation(mode: str, words: str | None) -> Any:
            talk = self.conversation(mode) | ({"messages": [{"role": "user", "content": words}]} if words else {})
            return client.post("/api/v1/search/conversation", {"catalog": "kb", **talk}, format="json")

        def chat(_: str, words: str | None) -> Any:
            said = {"messages": [{"role": "user", "content": words}]} if words else {}
            return client.post("/api/v1/enrich/conversation", self.chat() | said, format="json")

        def named(response: Any) -> dict[str, Any]:
            assert response.status_code == 200, response.content
            withheld = response.json()["withheld"]
            entries = withheld if isinstance(withheld, list) else withheld["sources"]
            return {slug: entry for entry in entries if (slug := entry.get("source") or entry["source_id"]) in hidden}

        reads = [(search, mode) for mode in SEARCH_MODES] + [(conversation, "approximate"), (conversation, "exact"),
                                                             (chat, "")]
        for read, arg in reads:  # the same read, matching then not
            assert named(read(arg, None)) == named(read(arg, nothing)), (read.__name__, arg, agent, hidden)

    def check_select(self, agent: str, allowed: set[str], _: str, answer: Answer) -> None:
        assert answer.status == 200, answer.body
        text = self.clean(agent, allowed, "select", answer.body, answer.text)
        assert {r["source_id"] for r in answer.body["selected"]} == allowed, (answer.body, allowed)
        assert {r["source_id"] for r in answer.body["withheld"]} == set(SOURCES) - allowed
        for source in allowed:
            assert marker(source, self.model.current[source]) in text, f"select: {agent} misses {source}'s files"

    def check_list(self, agent: str, allowed: set[str], _: str, answer: Answer) -> None:
        assert answer.status == 200, answer.body
        self.clean(agent, allowed, "list", answer.body, answer.text)
        assert {r["source_id"] for r in answer.body["references"] if not r["withheld"]} == allowed

    def check_enrich(self, agent: str, allowed: set[str], surface: str, answer: Answer) -> None:
        assert answer.status == 200, answer.body
        trace = self.world.rest[agent].get(f"/api/v1/traces/{answer.body['trace_id']}")
        assert trace.status_code == 200, trace.content
        text = self.clean(agent, allowed, f"enrich {surface}", answer.body, answer.text, trace.json())
        self.unmatched(agent, allowed, f"enrich {surface}", answer.body["hints"], trace.json()["steps"])
        others = [name for name in AGENTS if name != agent]
        assert all(self.world.rest[name].get(f"/api/v1/traces/{answer.body['trace_id']}").status_code == 404
                   for name in others)
        if surface == "prompt":  # each @id expands (its files listed) or is hinted as withheld
            mentioned = {h["source_id"]: h for h in answer.body["hints"] if h["via"] == "mention"}
            assert {s for s, h in mentioned.items() if not h["withheld"]} == allowed, (mentioned, allowed)
            for source in allowed:
                assert marker(source, self.model.current[source]) in text, f"enrich: {agent} misses @{source}"
        elif "vault" in self.model.hidden(agent, allowed):  # whether vault holds the path is its content
            assert answer.body["pinned_reference"] is None, answer.body["pinned_reference"]
        else:
            pinned = answer.body["pinned_reference"]
            assert pinned["source_id"] == "vault" and pinned["withheld"] == ("vault" not in allowed), pinned

    def check_chat(self, agent: str, allowed: set[str], _: str, answer: Answer) -> None:
        assert answer.status == 200, answer.body
        trace = self.world.rest[agent].get(f"/api/v1/traces/{answer.body['trace_id']}")
        assert trace.status_code == 200, trace.content
        self.clean(agent, allowed, "conversation enrichment", answer.body, answer.text, trace.json())
        assert all(self.world.rest[name].get(f"/api/v1/traces/{answer.body['trace_id']}").status_code == 404
                   for name in AGENTS if name != agent)
        passages = {item["source_id"] for item in answer.body["context"] if item["kind"] == "passage"}
        withheld = {entry["source_id"] for entry in answer.body["withheld"]}
        assert passages <= allowed and withheld == set(SOURCES) - allowed, (passages, withheld, allowed)
        self.uncounted(agent, allowed, "conversation enrichment", answer.body["withheld"], "source_id")
        assert answer.body["messages"][:3] == self.chat()["messages"][:3]  # the newest user message only
        for source in allowed:  # every source matches the message: an allowed one is added as context
            assert marker(source, self.model.current[source]) in answer.body["messages"][3]["content"], \
                f"conversation enrichment: {agent} misses {source}"

    def check_file(self, agent: str, allowed: set[str], source: str, answer: Answer) -> None:
        self.clean(agent, allowed, f"file of {source}", answer.body, answer.text)
        if source not in allowed:
            assert answer.status == 403 and answer.body["error"]["code"] == "withheld", answer.body
        elif answer.status != 200:  # allowed, not selected yet (a sweep selects first)
            assert not self.sweeping and answer.status == 403, answer.body
            assert answer.body["error"]["code"] == "not_selected", answer.body
        else:
            assert marker(source, self.model.current[source]) in answer.body["text"]

    def check_instructions(self, agent: str, allowed: set[str], _: str, answer: Answer) -> None:
        assert answer.status == 200, answer.body
        text = self.clean(agent, allowed, "instructions", answer.body, answer.text)
        for entry in answer.body["sources"]:
            assert (entry["included"] == "withheld") == (entry["source_id"] not in allowed), entry
        # auto and preselected references: their content (preload, or auto) or their files (rag)
        shown = {"rules", "vault", *(["notes"] if agent == "bot" else [])} & allowed
        for source in shown:
            assert marker(source, self.model.current[source]) in text, f"instructions: {agent} misses {source}"


@dataclass
class Answer:
    """A read's answer: status, JSON body (MCP: structuredContent) and, for MCP, the text."""

    status: int
    body: Any
    text: str

    @classmethod
    def of_tool(cls, result: CallToolResult) -> Answer:
        assert result.content and all(isinstance(content, TextContent) for content in result.content), result
        text = "\n".join(content.text for content in result.content if isinstance(content, TextContent))
        body = result.structured_content or {}
        status = 200
        if result.is_error:  # the REST error body: its status is the code's
            status = {"withheld": 403, "not_selected": 403}.get(body.get("error", {}).get("code"), 400)
        return cls(status=status, body=body, text=text)


def _parents(item: object) -> Iterator[dict[str, Any]]:
    """Every `parents` entry (a reference pointing at another) anywhere in a JSON value."""
    if isinstance(item, dict):
        for key, value in item.items():
            if key == "parents" and isinstance(value, list):
                yield from (p for p in value if isinstance(p, dict))
            yield from _parents(value)
    elif isinstance(item, list):
        for value in item:
            yield from _parents(value)


def _hours(hours: int | None) -> timedelta | None:
    return None if hours is None else timedelta(hours=hours)


# --- the property ---------------------------------------------------------------------------


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(plan=plans(), mcp_agent=st.sampled_from(AGENTS))
# Runs every time, beside the random plans: the ways an approval ends.
# Content edited, then back to what was approved: that approval lapsed with the first edit.
@example(plan=[Edit("vault", None), Edit("vault", 0)], mcp_agent="bot")
# A policy's lifetime, shorter than the time since the approval, ends it at once.
@example(plan=[Policy("vault", "all", 1, 2), Advance(3)], mcp_agent="other-bot")
# Two approvals required now: bot's one no longer does; a new request approved twice does.
@example(plan=[Policy("catalog", "bot", 2, None), Read("bot", "select", False), Decide(0, "rita", "approve"),
               Decide(0, "rob", "approve")], mcp_agent="other-bot")
# An approval with a lifetime, read, then past its expiry (marked by the expiry task).
@example(plan=[Policy("notes", "other-bot", 1, 2), Ask("other-bot", "notes"), Decide(0, "rita", "approve"),
               Read("other-bot", "select", True), Advance(3), Expire()], mcp_agent="bot")
# Revoked; and a tag's policy for one agent: over an approval granted before (notes), over none (leaf).
@example(plan=[Revoke(0), Retag("leaf"), Policy("tag", "other-bot", 1, None)], mcp_agent="other-bot")
def test_nothing_that_needs_approval_reaches_an_agent_without_a_live_approval(world, plan, mcp_agent):
    note(f"steps: {plan}")
    with transaction.atomic():
        forget_indexes()  # the detection cache outlives a rolled-back example
        world.clock.hours = 0
        run = Run(world, initial_model(world))
        for step in plan:
            run.apply(step)
        run.sweep(mcp_agent)
        transaction.set_rollback(True)
    forget_indexes()
