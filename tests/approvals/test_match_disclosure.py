"""Issue 20, item 4: what an agent is told about content withheld from it must not depend
on whether its query matches that content, on any read path, unless a policy covering
the source opts in (`disclose_matches`).

The catalog holds only governed content: `vault` (selectable: its profile, which
semantic detection compares prompts with, opens with its text) and `ledger`
(preselected for the agent: the path pass looks at its documents' paths), both saying
"hunter2". Each read is made once with that word and once with "hunter3", which
nothing holds, each time from the same state (the probe rolls back): the answers, the
traces the agent reads, the approval requests that exist after it and the playground's
run as the agent must be the same, the probed word aside. No allowed content means no
allowed hit whose score the word would move.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.db import transaction
from django.test import Client
from mcp import Client as McpClient
from mcp.types import TextContent
from rest_framework.test import APIClient

from approvals.models import ApprovalPolicy, ApprovalRequest
from approvals.services.policies import policy_create, policy_update
from catalog.models import Agent, AuditEntry, Catalog, ReferenceSource
from retrieval.enrichment.detection import forget_indexes
from retrieval.mcp import calls
from retrieval.mcp.server import build_server
from tests.approvals.builders import document
from tests.factories import agent_with_token, import_documents

pytestmark = pytest.mark.django_db

MATCHING, MISSING = "hunter2", "hunter3"
SEARCH_MODES = ("bm25", "vector", "hybrid", "bm25_tiebreak")
CONVERSATION_MODES = ("approximate", "exact")
VAULT_TEXT = f"The admin password is {MATCHING}. Rotate it every ninety days.\n"
LEDGER_TEXT = f"Payments ledger: the {MATCHING} account pays the vendors.\n"
# Timings and ids of what each read stored: they differ between any two calls.
VOLATILE = {"took_ms", "ms", "embed_ms", "trace_id", "id", "created_at"}


@pytest.fixture
def governed(make_catalog) -> tuple[Catalog, Agent, str]:
    catalog = make_catalog("kb")
    import_documents(catalog=catalog, slug="vault", documents=[document("rotation.md", VAULT_TEXT)])
    ledger = import_documents(catalog=catalog, slug="ledger", documents=[document(f"{MATCHING}.md", LEDGER_TEXT)])
    ReferenceSource.objects.filter(catalog=catalog).update(requires_approval=True)
    ReferenceSource.objects.filter(pk=ledger.pk).update(mode=ReferenceSource.Mode.PRESELECTED)
    agent, token = agent_with_token(name="bot", catalogs=[catalog])
    return catalog, agent, token


def normalised(value: Any, word: str) -> Any:
    """`value` without its volatile fields, the probed word written WORD."""
    if isinstance(value, dict):
        return {key: normalised(item, word) for key, item in value.items() if key not in VOLATILE}
    if isinstance(value, list):
        return [normalised(item, word) for item in value]
    if isinstance(value, str):
        return value.replace(word, "WORD")
    return value


def _json_or_text(text: str) -> Any:
    """A tool's text, parsed when it is the JSON answer (its volatile fields go then)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


class Reads:
    """Every read path an agent has that takes a query, as the agent (REST and MCP) and
    as a curator's playground run as the agent; each returns what the caller received."""

    def __init__(self, agent: Agent, token: str, curator: Client) -> None:
        self.rest = APIClient()
        self.rest.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
        self.server = build_server(token_hash=agent.token_hash)
        self.curator = curator

    def post(self, path: str, body: dict[str, Any]) -> Any:
        response = self.rest.post(path, body, format="json")
        assert response.status_code == 200, response.content
        return response.json()

    def traced(self, path: str, body: dict[str, Any]) -> Any:
        """An enrichment's answer and its trace, as the agent reads it back."""
        answer = self.post(path, body)
        trace = self.rest.get(f"/api/v1/traces/{answer['trace_id']}")
        assert trace.status_code == 200, trace.content
        return {"answer": answer, "trace": trace.json()}

    def tool(self, name: str, arguments: dict[str, Any]) -> Any:
        async def call() -> Any:
            async with McpClient(self.server, mode="legacy") as client:
                return await client.call_tool(name, arguments)

        result = async_to_sync(call)()
        assert not result.is_error, result
        texts = [_json_or_text(content.text) for content in result.content if isinstance(content, TextContent)]
        return {"text": texts, "structured": result.structured_content}

    def playground(self, **fields: str) -> str:
        response = self.curator.get("/playground/", {"catalog": "kb", "agent": "bot", **fields},
                                    HTTP_HX_REQUEST="true")
        assert response.status_code == 200, response.content
        run = response.content.decode().split('id="run"', 1)[1].split("</section>", 1)[0]
        return re.sub(r"[0-9.]+ ms", "N ms", run)

    def every(self, word: str) -> dict[str, Callable[[], Any]]:
        talk = [{"role": "user", "content": f"What is {word}?"}]
        prompt: dict[str, Any] = {"text": f"Is the password {word}?", "surface": "prompt"}
        tool_result: dict[str, Any] = {"text": f"cat {word}.md", "surface": "tool_result", "paths": [f"{word}.md"]}
        chat = {"messages": talk, "user_id": "end-user", "options": {"rag_relevance_threshold": 0.0}}
        reads: dict[str, Callable[[], Any]] = {}
        for mode in SEARCH_MODES:
            search = {"catalog": "kb", "query": word, "mode": mode}
            reads[f"search {mode}"] = partial(self.post, "/api/v1/search", search)
            reads[f"rag_search {mode}"] = partial(self.tool, "rag_search", search)
            reads[f"playground search {mode}"] = partial(self.playground, kind="search", text=word, mode=mode)
        for mode in CONVERSATION_MODES:
            conversation = {"catalog": "kb", "messages": talk, "mode": mode}
            reads[f"conversation {mode}"] = partial(self.post, "/api/v1/search/conversation", conversation)
            reads[f"search_conversation {mode}"] = partial(self.tool, "search_conversation", conversation)
        return reads | {
            "enrich prompt": partial(self.traced, "/api/v1/enrich", prompt),
            "enrich tool_result": partial(self.traced, "/api/v1/enrich", tool_result),
            "enrich conversation": partial(self.traced, "/api/v1/enrich/conversation", chat),
            "enrich (mcp) prompt": partial(self.tool, "enrich", prompt),
            "enrich (mcp) tool_result": partial(self.tool, "enrich", tool_result),
            "enrich_conversation (mcp)": partial(self.tool, "enrich_conversation", chat),
            "playground prompt": partial(self.playground, kind="prompt", text=prompt["text"]),
            "playground tool_result": partial(self.playground, kind="tool_result", text=tool_result["text"]),
            "references": lambda: self.rest.get("/api/v1/references", {"q": word}).json(),
        }


def probe(reads: Reads, word: str) -> dict[str, Any]:
    """Each read with `word`, from the same state, with the approval requests and the
    agent's list of them after it; nothing the reads wrote outlives the probe."""
    answers = {}
    for label, read in reads.every(word).items():
        with transaction.atomic():
            forget_indexes()
            answers[label] = normalised(read(), word)
            requests = ApprovalRequest.objects.values("source__slug", "state", "raised_via", "context")
            answers[f"{label}: requests raised"] = normalised(list(requests.order_by("pk")), word)
            answers[f"{label}: GET /api/v1/approvals"] = normalised(reads.rest.get("/api/v1/approvals").json(), word)
            transaction.set_rollback(True)
    forget_indexes()
    return answers


@pytest.fixture
def reads(governed, monkeypatch, cora, client_for) -> Reads:
    # the test's transaction stays open through an MCP call, as through a test client's request
    monkeypatch.setattr(calls, "close_old_connections", lambda: None)
    _, agent, token = governed
    return Reads(agent, token, client_for(cora))


def test_no_read_path_tells_an_agent_whether_its_query_matches_withheld_content(reads):
    matching, missing = probe(reads, MATCHING), probe(reads, MISSING)

    assert matching.keys() == missing.keys()
    differing = [label for label in matching if matching[label] != missing[label]]
    assert not differing, "\n\n".join(
        f"{label}:\n  {MATCHING}: {json.dumps(matching[label])[:1500]}\n"
        f"  {MISSING}: {json.dumps(missing[label])[:1500]}" for label in differing)


def test_search_names_every_withheld_source_without_counts_and_raises_nothing(reads):
    for mode in SEARCH_MODES:
        body = reads.post("/api/v1/search", {"catalog": "kb", "query": MATCHING, "mode": mode})

        assert body["results"] == []
        assert body["withheld"] == {"count": 0, "sources": [
            {"source": slug, "count": None, "state": "missing", "request_id": None,
             "reason": "requires approval; no reviewer has approved it for this agent"}
            for slug in ("ledger", "vault")]}, mode
    assert not ApprovalRequest.objects.exists()


def test_a_policy_may_disclose_matches_where_every_covering_policy_allows_it(governed, reads, cora):
    catalog, agent, _ = governed
    vault = ReferenceSource.objects.get(slug="vault")

    def counts(word: str) -> dict[str, int | None]:
        body = reads.post("/api/v1/search", {"catalog": "kb", "query": word, "mode": "bm25"})
        return {entry["source"]: entry["count"] for entry in body["withheld"]["sources"]}

    policy = policy_create(by=cora, catalog=catalog, disclose_matches=True)
    assert counts(MISSING) == {"ledger": 0, "vault": 0} and not ApprovalRequest.objects.exists()
    assert counts(MATCHING) == {"ledger": 1, "vault": 1}
    assert sorted(ApprovalRequest.objects.values_list("source__slug", "raised_via")) == [
        ("ledger", "search"), ("vault", "search")]  # the agent wanted what matched: its requests, once

    policy_create(by=cora, source=vault)  # a covering policy that does not disclose: vault's count goes
    assert counts(MATCHING) == {"ledger": 1, "vault": None}

    policy_update(policy_id=policy.pk, by=cora, disclose_matches=False)
    assert counts(MATCHING) == {"ledger": None, "vault": None}
    entry = AuditEntry.objects.filter(action="policy.updated", policy_id=policy.pk).get()
    assert (entry.payload["before"]["disclose_matches"], entry.payload["after"]["disclose_matches"]) == (True, False)


def test_the_flag_alone_discloses_nothing(governed, reads):
    assert not ApprovalPolicy.objects.exists()

    body = reads.post("/api/v1/search", {"catalog": "kb", "query": MATCHING, "mode": "bm25"})

    assert [entry["count"] for entry in body["withheld"]["sources"]] == [None, None]


def test_the_policy_admin_edits_disclose_matches(cora, client_for, governed):
    cora.is_staff = True
    cora.save()

    page = client_for(cora).get("/admin/approvals/approvalpolicy/add/").content.decode()

    assert 'name="disclose_matches"' in page
