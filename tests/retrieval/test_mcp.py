"""`manage.py mcp`: the agent API as MCP tools over stdio, driven by the SDK's own client.

One server process serves the whole module (it loads Django and the embedder once). It
runs for an agent whose token is fixed for the module, and starts during the first test
that asks for it; each test creates that agent again over its own committed data (the
server sees only committed rows, hence transactional tests), and the server reads the
agent by the token's hash on every call. Processes that must refuse to start run alone.

Tool results are compared with what the REST endpoints answer the same agent.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, asynccontextmanager
from datetime import timedelta
from pathlib import Path

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from django.conf import settings as django_settings
from django.utils import timezone
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult, TextContent, Tool
from rest_framework.test import APIClient

from approvals.models import ApprovalRequest
from approvals.services.decisions import request_decide
from approvals.services.policies import policy_create
from catalog.agents import hash_token, new_token
from catalog.indexing.runs import source_index_now
from catalog.models import Agent, IndexRun, ReferenceSource
from catalog.sources.documents import DocumentInput
from retrieval.models import Selection, Trace
from tests.approvals.builders import raised
from tests.config.servers import child_env
from tests.factories import agent_with_token, import_documents, person

BASE_DIR = Path(__file__).resolve().parents[2]
TOKEN = new_token()
RESULT_HEADER = re.compile(r"^--- Result (\d+) \(score: (\d+\.\d{3}), source: (\S+)\) ---$", re.MULTILINE)
pytestmark = pytest.mark.django_db(transaction=True)
# How a tool names a withheld reference no read has raised a request for (search raises
# none where no policy discloses matches: issue 20).
NO_REQUEST = ("requires approval; no reviewer has approved it for this agent; no request yet: select_references "
              "asks a reviewer")


def server_env(token: str) -> dict[str, str]:
    """This environment, pointed at pytest-django's test database, with the agent's token."""
    return {**os.environ, **child_env(LECTERN_AGENT_TOKEN=token)}


class McpServer:
    """`manage.py mcp` under the SDK's stdio client, on a thread of its own (an anyio
    blocking portal), so that sync tests can call its tools."""

    def __init__(self, log: Path, source_root: Path) -> None:
        self.log, self.source_root, self.stack = log, source_root, ExitStack()
        self.portal: BlockingPortal | None = None
        self.session: ClientSession | None = None
        self.stream_errors: list[Exception] = []  # lines on stdout that were not protocol

    def start(self) -> None:
        if self.session is not None:
            return
        params = StdioServerParameters(
            command=sys.executable, args=["manage.py", "mcp"], cwd=BASE_DIR, env={
                **server_env(TOKEN),
                "LECTERN_SOURCE_ROOTS": os.pathsep.join(map(str, [*django_settings.LECTERN_SOURCE_ROOTS,
                                                                   self.source_root]))}
        )
        errlog = self.stack.enter_context(open(self.log, "w"))
        portal = self.stack.enter_context(start_blocking_portal())
        self.session = self.stack.enter_context(portal.wrap_async_context_manager(self._connect(params, errlog)))
        self.portal = portal

    @asynccontextmanager
    async def _connect(self, params: StdioServerParameters, errlog):
        async def on_message(message) -> None:
            if isinstance(message, Exception):
                self.stream_errors.append(message)

        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write, read_timeout_seconds=60, message_handler=on_message) as session,
        ):
            await session.initialize()
            yield session

    def _started(self) -> tuple[BlockingPortal, ClientSession]:
        assert self.portal is not None and self.session is not None, "start() the server first"
        return self.portal, self.session

    def list_tools(self) -> dict[str, Tool]:
        portal, session = self._started()
        return {tool.name: tool for tool in portal.call(lambda: session.list_tools()).tools}

    def call(self, name: str, **arguments) -> CallToolResult:
        portal, session = self._started()
        return portal.call(functools.partial(session.call_tool, name, arguments))

    def close(self) -> None:
        self.stack.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The server, reading glob sources under one more source root of its own (`source_root`)."""
    server = McpServer(tmp_path_factory.mktemp("mcp") / "server-stderr.log", tmp_path_factory.mktemp("mcp-root"))
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def agent(indexed_catalog) -> Agent:
    agent, _ = agent_with_token(name="mcp-agent", catalogs=[indexed_catalog], token=TOKEN)
    return agent


@pytest.fixture
def mcp(server, agent) -> Iterator[McpServer]:
    server.start()
    yield server
    assert server.stream_errors == [], "the server wrote something other than the protocol to stdout"


@pytest.fixture
def rest() -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    return client


def text_of(result: CallToolResult) -> str:
    """The result's text: the first content item, which every tool result carries."""
    content = result.content[0]
    assert isinstance(content, TextContent), content
    return content.text


def note_of(result: CallToolResult) -> str:
    """The second text item, naming what was withheld: '' when there is none."""
    assert len(result.content) <= 2, result.content
    if len(result.content) < 2:
        return ""
    note = result.content[1]
    assert isinstance(note, TextContent), note
    return note.text


def ok(result: CallToolResult) -> dict:
    assert not result.is_error, text_of(result)
    return result.structured_content


def error(result: CallToolResult, code: str) -> dict:
    """The REST error body the result carries, as text and as structuredContent."""
    assert result.is_error
    body = result.structured_content
    assert json.loads(text_of(result)) == body
    assert set(body) == {"error"} and body["error"]["code"] == code and body["error"]["message"]
    return body["error"]


def recorded() -> tuple[int, int]:
    return Selection.objects.count(), Trace.objects.count()


# --- tools ------------------------------------------------------------------------------


def offered(schema: dict) -> dict:
    """An optional argument's schema without its `null` alternative (null counts as omitted)."""
    alternatives = [arm for arm in schema.get("anyOf", [schema]) if arm.get("type") != "null"]
    assert len(alternatives) == 1, schema
    return alternatives[0]


def test_lists_the_tools_with_the_rest_limits(mcp):
    tools = mcp.list_tools()

    assert set(tools) == {"rag_search", "explain_search", "search_conversation", "list_references",
                          "select_references", "enrich", "explain_enrichment", "read_reference_file",
                          "agent_instructions",
                          "approval_requests", "enrich_conversation", "store_memory"}
    search = tools["rag_search"].input_schema
    assert search["required"] == ["query"]
    assert set(search["properties"]) == {"query", "catalog", "top_k", "mode", "fusion", "normalization", "weights",
                                         "dedup"}
    top_k = offered(search["properties"]["top_k"])
    assert (top_k["type"], top_k["minimum"], top_k["maximum"]) == ("integer", 1, 1000)
    assert search["properties"]["top_k"].get("default") is None  # the agent's default_top_k
    dedup = search["properties"]["dedup"]
    assert (dedup["type"], dedup["default"]) == ("boolean", False)
    assert tools["rag_search"].annotations.read_only_hint is True
    assert tools["enrich"].input_schema["required"] == ["text", "surface"]
    assert tools["enrich"].input_schema["properties"]["surface"]["enum"] == ["prompt", "tool_result"]
    assert offered(tools["select_references"].input_schema["properties"]["ids"])["maxItems"] == 100
    read = tools["read_reference_file"]
    assert read.input_schema["required"] == ["catalog", "source_id", "path"] and read.annotations.read_only_hint
    assert read.input_schema["properties"]["path"]["maxLength"] == 1024
    assert tools["agent_instructions"].input_schema["properties"] == {}
    approvals = tools["approval_requests"]
    assert approvals.annotations.read_only_hint and not approvals.input_schema.get("required")
    assert set(approvals.input_schema["properties"]) == {"state", "limit", "offset"}


def test_rag_search_answers_in_seed_003_format_with_the_agent_defaults(mcp, agent, rest):
    agent.default_top_k = 2
    agent.save()

    result = mcp.call("rag_search", query="how should transient failures be retried?")

    data = ok(result)
    text = text_of(result)
    headers = RESULT_HEADER.findall(text)
    assert [int(n) for n, _, _ in headers] == [1, 2]  # top_k: the agent's default
    assert headers[0][2] == "retries.md"
    assert [score for _, score, _ in headers] == [f"{hit['score']:.3f}" for hit in data["results"]]
    blocks = RESULT_HEADER.split(text)[1:]  # number, score, source, content; again
    assert [blocks[i + 3].strip() for i in range(0, len(blocks), 4)] == [
        hit["content"].strip() for hit in data["results"]
    ]
    expected = rest.post(
        "/api/v1/search",
        {"catalog": "ops", "query": "how should transient failures be retried?", "top_k": 2},
        format="json",
    ).json()
    assert data["results"] == expected["results"]
    assert (data["mode"], data["degraded"]) == ("hybrid", None)
    assert {"chunk_id", "scores", "ranks"} <= set(data["results"][0])


def test_rag_search_modes_and_an_empty_answer(mcp):
    lexical = ok(mcp.call("rag_search", query="cache invalidation on write", mode="bm25", top_k=1))
    nothing = mcp.call("rag_search", query="zyzzyva quokka", mode="bm25")

    assert [hit["document_id"] for hit in lexical["results"]] == ["caching.md"]
    assert lexical["mode"] == "bm25"
    assert text_of(nothing) == "No relevant documentation found for your query."
    assert ok(nothing)["results"] == []


def without_timing(body: dict) -> dict:
    return {key: value for key, value in body.items() if key != "took_ms"}


@pytest.mark.parametrize("options", [
    {"fusion": "convex", "normalization": "zscore", "weights": {"bm25": 0.8, "vector": 0.2}},
    {"fusion": "convex", "weights": {"vector": 1}},
    {"weights": {"bm25": 3, "vector": 0.5}},  # RRF's
    {"mode": "bm25_tiebreak", "dedup": True},
])
def test_rag_search_takes_every_rest_option_and_answers_as_rest_does(mcp, rest, options):
    body = {"catalog": "ops", "query": "log failures", "top_k": 10, **options}

    result = mcp.call("rag_search", **body)

    expected = rest.post("/api/v1/search", body, format="json").json()
    assert without_timing(ok(result)) == without_timing(expected)
    assert text_of(result).count("--- Result ") == len(expected["results"]) > 0


def test_rag_search_weights_decide_which_component_leads(mcp):
    def leader(weights: dict) -> str:
        result = mcp.call("rag_search", query="log failures", mode="hybrid", fusion="convex", weights=weights)
        return ok(result)["results"][0]["document_id"]

    assert leader({"bm25": 1, "vector": 0}) == "logging.md"  # the only chunk with "log"
    assert leader({"bm25": 0, "vector": 1}) == "retries.md"  # the nearest in meaning


def test_rag_search_dedup_keeps_one_passage_per_document(mcp, agent, make_catalog):
    guides = make_catalog("guides", chunk_size=100, chunk_overlap=0)
    texts = {"retry-guide.md": "Retry idempotent calls. Retry with exponential backoff. Retry at most five times. "
                               "Log each retry with its attempt number. Give up after the retry budget is spent.",
             "tls.md": "Rotate certificates before they expire."}
    import_documents(catalog=guides, slug="guides",
                     documents=[DocumentInput(path, path, text, len(text)) for path, text in texts.items()])
    agent.catalogs.add(guides)

    plain = ok(mcp.call("rag_search", query="retry backoff", catalog="guides", mode="bm25", top_k=10))
    deduped = ok(mcp.call("rag_search", query="retry backoff", catalog="guides", mode="bm25", top_k=10, dedup=True))

    assert [hit["document_id"] for hit in plain["results"]].count("retry-guide.md") > 1
    assert [hit["document_id"] for hit in deduped["results"]] == ["retry-guide.md"]


@pytest.mark.parametrize("arguments, field", [
    ({"weights": {"x": 1}}, "weights"),
    ({"weights": {"bm25": 0, "vector": 0}}, "weights"),
    ({"weights": {"bm25": "1"}}, "weights"),
    ({"weights": '{"bm25": 1}'}, "weights"),  # JSON in a string is a string, as over REST
    ({"mode": "nope"}, "mode"),
    ({"fusion": "borda"}, "fusion"),
    ({"normalization": "l2"}, "normalization"),
    ({"dedup": "true"}, "dedup"),
    ({"top_k": "5"}, "top_k"),
])
def test_a_bad_search_option_is_the_rest_error(mcp, rest, arguments, field):
    body = {"catalog": "ops", "query": "retry", **arguments}

    result = mcp.call("rag_search", **body)

    assert set(error(result, "invalid_input")["details"]["fields"]) == {field}
    assert result.structured_content == rest.post("/api/v1/search", body, format="json").json()


@pytest.mark.parametrize("tool, arguments, url", [
    ("rag_search", {"catalog": "ops"}, "/api/v1/search"),
    ("enrich", {"text": "Please expand @handbook."}, "/api/v1/enrich"),
])
def test_a_missing_required_argument_is_the_rest_error(mcp, rest, tool, arguments, url):
    result = mcp.call(tool, **arguments)

    assert result.structured_content == rest.post(url, arguments, format="json").json()
    assert error(result, "invalid_input")["details"]["fields"]


@pytest.fixture
def vault(indexed_catalog) -> ReferenceSource:
    """A reference of `ops` that needs an approval."""
    vault = import_documents(catalog=indexed_catalog, slug="vault", documents=[
        DocumentInput("vault.md", "Vault", "Rotate the vault credentials every ninety days.", 47)])
    ReferenceSource.objects.filter(pk=vault.pk).update(requires_approval=True)
    vault.refresh_from_db()
    return vault


def test_rag_search_withholds_what_needs_approval_and_names_it(mcp, vault, rest, cora):
    result = mcp.call("rag_search", query="rotate vault credentials", mode="bm25")

    data = ok(result)
    assert data["results"] == [] and data["withheld"]["count"] == 0
    (entry,) = data["withheld"]["sources"]
    assert (entry["source"], entry["count"], entry["request_id"]) == ("vault", None, None)  # whatever the query
    expected = rest.post("/api/v1/search", {"catalog": "ops", "query": "rotate vault credentials", "mode": "bm25"},
                         format="json").json()
    assert data["withheld"] == expected["withheld"]
    text = text_of(result)
    assert text.startswith("No relevant documentation found for your query.")
    assert text.endswith("\n\nWithheld: references that need an approval "
                         "(approval_requests lists your requests and their states):\n"
                         f"- @vault: {NO_REQUEST}")
    assert "ninety days" not in text

    policy_create(by=cora, source=vault, disclose_matches=True)  # a policy that discloses matches
    result = mcp.call("rag_search", query="rotate vault credentials", mode="bm25")

    (entry,) = ok(result)["withheld"]["sources"]
    assert text_of(result).endswith("\n\nWithheld: 1 matching passage in references that need an approval "
                                    "(approval_requests lists your requests and their states):\n"
                                    f"- @vault: 1 (requires approval; request {entry['request_id']} awaits a "
                                    "reviewer)")


def test_explain_search_answers_what_the_rest_api_does_its_sentences_as_text(mcp, rest):
    body = {"catalog": "ops", "query": "retry with backoff, or cache the zeppelin", "source": "handbook",
            "document": "caching.md", "mode": "hybrid", "top_k": 1}

    result = mcp.call("explain_search", **{k: v for k, v in body.items() if k != "catalog"})  # its only catalog

    data = ok(result)
    assert data == rest.post("/api/v1/explain", body, format="json").json()
    assert data["outcome"] == "below_top_k" and data["rank"] > 1
    assert text_of(result) == "\n".join(data["sentences"])
    assert text_of(result).endswith(f"Verdict: ranked {data['rank']}: below top_k 1.")
    assert note_of(result) == ""


def test_explain_search_tells_nothing_of_a_withheld_source_and_names_the_request_to_follow(mcp, vault, rest):
    ask = {"query": "rotate the vault credentials", "source": "vault"}

    result = mcp.call("explain_search", **ask, document="vault.md")
    missing = mcp.call("explain_search", **ask, document="nothing-here.md")

    data = ok(result)
    assert data["outcome"] == "withheld" and data["bm25"] is None and data["catalog"]["document_found"] is None
    assert data == rest.post("/api/v1/explain", {"catalog": "ops", **ask, "document": "vault.md"},
                             format="json").json()
    assert ok(missing) == data  # whether the path exists is not told either
    assert note_of(result) == ("Withheld for want of an approval (approval_requests lists your requests and their "
                               f"states):\n- @vault: {NO_REQUEST}")
    assert "ninety" not in json.dumps(data) + text_of(result)
    assert ApprovalRequest.objects.count() == 0  # explain reads only


@pytest.mark.parametrize("arguments, field", [
    ({"query": "retry", "source": "handbook"}, "document"),
    ({"query": "retry", "source": "hand book", "document": "retries.md"}, "source"),
    ({"query": "retry", "source": "handbook", "document": "retries.md", "top_k": 0}, "top_k"),
])
def test_a_bad_explain_search_argument_is_the_rest_error(mcp, rest, arguments, field):
    result = mcp.call("explain_search", **arguments)

    assert set(error(result, "invalid_input")["details"]["fields"]) == {field}
    assert result.structured_content == rest.post("/api/v1/explain", {"catalog": "ops", **arguments},
                                                  format="json").json()


def test_explain_enrichment_answers_what_the_rest_api_does_and_records_nothing(mcp, rest, vault):
    arguments = {"prompt": "Please expand @handbook and rotate the vault credentials.", "reference": "handbook"}

    result = mcp.call("explain_enrichment", **arguments)
    withheld = mcp.call("explain_enrichment", prompt="rotate the vault credentials", reference="vault")

    data = ok(result)
    assert data == rest.post("/api/v1/explain/enrichment", arguments, format="json").json()
    assert data["outcome"] == "expanded" and data["verdict"] == "expanded (the mention pass)"
    assert text_of(result) == "\n".join(data["sentences"]) and note_of(result) == ""
    assert ok(withheld)["outcome"] == "withheld" and "ninety" not in json.dumps(ok(withheld))
    assert note_of(withheld) == ("Withheld for want of an approval (approval_requests lists your requests and "
                                 f"their states):\n- @vault: {NO_REQUEST}")
    assert recorded() == (0, 0) and ApprovalRequest.objects.count() == 0


def test_rag_search_hits_carry_their_cite_and_the_approval_that_let_them_through(mcp, agent, vault, rest):
    request_id = raised(agent, vault)
    request_decide(request_id=request_id, reviewer=person("rita", "reviewer"), verdict="approve")

    data = ok(mcp.call("rag_search", query="rotate vault credentials after failures", mode="bm25", top_k=10))

    hits = {hit["source"]: hit for hit in data["results"]}
    cited = hits["vault"]
    assert cited["approval_id"] == request_id
    assert cited["fingerprint"] == hashlib.sha256(cited["content"].encode()).hexdigest()
    assert cited["byte_end"] - cited["byte_start"] == len(cited["content"].encode())
    assert cited["cite"] == (f"[lectern:ops/vault/vault.md#b{cited['byte_start']}-{cited['byte_end']}"
                             f"@{cited['fingerprint'][:12]}]")
    assert hits["handbook"]["approval_id"] is None and hits["handbook"]["cite"].startswith("[lectern:ops/handbook/")
    assert Trace.objects.filter(agent=agent, surface="search").exists()  # what a curator resolves it by


CONVERSATION = [{"role": "user", "content": "Our calls to the billing service time out. How should transient "
                                            "failures be retried?"},
                {"role": "assistant", "content": "Sure, happy to help with that."},
                {"role": "user", "content": "And when must a cached response be invalidated?"}]
CONVERSATION_HEADER = re.compile(
    r"^--- Result (\d+) \(similarity: (\d+\.\d{3}), source: (\S+), query chunk (\d+)\) ---$", re.MULTILINE)


def test_search_conversation_answers_what_the_rest_api_does_a_block_per_passage(mcp, rest):
    result = mcp.call("search_conversation", messages=CONVERSATION, top_k=2, mmr_lambda=0.5)

    data = ok(result)
    expected = rest.post("/api/v1/search/conversation", {"catalog": "ops", "messages": CONVERSATION, "top_k": 2,
                                                         "mmr_lambda": 0.5}, format="json").json()
    assert without_timing(data) == without_timing(expected)
    assert {hit["document_id"] for hit in data["results"]} == {"retries.md", "caching.md"}
    headers = CONVERSATION_HEADER.findall(text_of(result))
    assert [(int(n), sim, doc, int(chunk)) for n, sim, doc, chunk in headers] == [
        (hit["rank"], f"{hit['similarity']:.3f}", hit["document_id"], hit["query_chunk"]["index"])
        for hit in data["results"]]
    assert data["counts"] == {"chunks": 1, "results": data["counts"]["results"],
                              "deduplicated": data["counts"]["deduplicated"], "final": 2}


def test_search_conversation_withholds_what_needs_approval_and_names_it(mcp, vault, rest):
    talk = [{"role": "user", "content": "When should we rotate the vault credentials?"}]

    result = mcp.call("search_conversation", messages=talk, min_similarity=-1)

    data = ok(result)
    assert {hit["source"] for hit in data["results"]} == {"handbook"}
    (entry,) = data["withheld"]["sources"]
    assert (entry["source"], entry["state"], entry["count"]) == ("vault", "missing", None)
    assert f"- @vault: {NO_REQUEST}" in text_of(result)
    assert "ninety days" not in text_of(result) + json.dumps(data)
    rest_body = rest.post("/api/v1/search/conversation", {"catalog": "ops", "messages": talk, "min_similarity": -1},
                          format="json").json()
    assert rest_body["withheld"] == data["withheld"]


@pytest.mark.parametrize("arguments, field", [
    ({"messages": []}, "messages"),
    ({"messages": [{"role": "robot", "content": "hi"}]}, "messages"),
    ({"messages": CONVERSATION, "mmr_lambda": 2}, "mmr_lambda"),
    ({"messages": CONVERSATION, "mode": "ann"}, "mode"),
    ({"top_k": 5}, "messages"),
])
def test_a_bad_search_conversation_argument_is_the_rest_error(mcp, rest, arguments, field):
    result = mcp.call("search_conversation", **arguments)

    assert set(error(result, "invalid_input")["details"]["fields"]) == {field}
    assert result.structured_content == rest.post("/api/v1/search/conversation", {"catalog": "ops", **arguments},
                                                  format="json").json()


def test_rag_search_needs_a_catalog_when_the_agent_has_several(mcp, agent, make_catalog):
    agent.catalogs.add(make_catalog("empty"))

    refused = mcp.call("rag_search", query="retry")
    named = mcp.call("rag_search", query="retry", catalog="ops", top_k=1)

    assert "catalog" in error(refused, "invalid_input")["details"]["fields"]
    assert RESULT_HEADER.findall(text_of(named))[0][2] == "retries.md"


def test_list_and_select_references_answer_what_the_rest_api_does(mcp, rest):
    listed = ok(mcp.call("list_references", q="handbook"))
    selected = ok(mcp.call("select_references", ids=["ops/handbook"]))

    assert listed == rest.get("/api/v1/references", {"q": "handbook"}).json()
    assert [ref["source_id"] for ref in listed["references"]] == ["handbook"]
    assert selected == rest.post("/api/v1/references/select", {"ids": ["ops/handbook"]}, format="json").json()
    assert [ref["source_id"] for ref in selected["selected"]] == ["handbook"]
    assert Selection.objects.filter(agent__name="mcp-agent", source__slug="handbook").exists()


def test_enrich_answers_what_the_rest_api_does_and_keeps_a_trace(mcp, rest):
    body = {"text": "Please expand @handbook before we change the retry policy.", "surface": "prompt"}

    enriched = ok(mcp.call("enrich", **body))

    expected = rest.post("/api/v1/enrich", body, format="json").json()
    assert {k: v for k, v in enriched.items() if k not in ("trace_id", "took_ms")} == {
        k: v for k, v in expected.items() if k not in ("trace_id", "took_ms")
    }
    assert enriched["text"].startswith(body["text"]) and len(enriched["text"]) > len(body["text"])
    assert Trace.objects.filter(pk=enriched["trace_id"], agent__name="mcp-agent", surface="prompt").exists()


def test_store_memory_and_enrich_conversation_answer_what_the_rest_api_does(mcp, rest, vault):
    stored = mcp.call("store_memory", user_id="steve", content="Steve wants a circuit breaker on every call out.")
    again = mcp.call("store_memory", user_id="steve", content="steve wants a circuit breaker on every call out.")

    assert text_of(stored) == "Remembered." and ok(stored)["created"] is True
    assert text_of(again) == "Already remembered; stored again (2 times)." and ok(again)["created"] is False
    assert rest.get("/api/v1/memory", {"user_id": "steve"}).json()["count"] == 1
    messages = [{"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Should a circuit breaker open, and when do we rotate the vault keys?"}]

    enriched = mcp.call("enrich_conversation", messages=messages, user_id="steve")

    body = ok(enriched)
    expected = rest.post("/api/v1/enrich/conversation", {"messages": messages, "user_id": "steve"},
                         format="json").json()
    assert {k: v for k, v in body.items() if k not in ("trace_id", "took_ms")} == {
        k: v for k, v in expected.items() if k not in ("trace_id", "took_ms")}
    assert body["messages"][0] == messages[0] and body["injected_into"] == 1
    assert "Steve wants a circuit breaker" in body["messages"][1]["content"]
    assert "ninety days" not in json.dumps(body) + note_of(enriched)
    (withheld,) = body["withheld"]
    assert withheld["request_id"] is None  # named whatever the message; raised by nothing here (issue 20)
    assert note_of(enriched).endswith(f"- @vault: {NO_REQUEST}")
    assert Trace.objects.filter(pk=body["trace_id"], agent__name="mcp-agent", surface="conversation").exists()
    refused = mcp.call("enrich_conversation", messages=[], user_id="steve")
    assert error(refused, "invalid_input")["details"]["fields"]["messages"]


def test_read_reference_file_and_agent_instructions_answer_what_the_rest_api_does(mcp, rest):
    ok(mcp.call("select_references", ids=["handbook"]))

    read = mcp.call("read_reference_file", catalog="ops", source_id="handbook", path="retries.md")
    instructions = mcp.call("agent_instructions")

    assert ok(read) == rest.get("/api/v1/references/ops/handbook/file", {"path": "retries.md"}).json()
    assert text_of(read) == ok(read)["text"] and text_of(read).startswith("Retry transient failures")
    assert ok(instructions) == rest.get("/api/v1/agent/instructions").json()
    assert text_of(instructions) == ok(instructions)["text"]


@pytest.fixture
def kit(mcp, indexed_catalog, settings) -> Path:
    """A folder reference `kit` of the `ops` catalog on disk, under the server's source
    root, indexed (its README) and selected by the agent."""
    folder = mcp.source_root / "kit"
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "scripts").mkdir(parents=True)
    (folder / "README.md").write_text("# Kit\n\nWhat the kit holds.\n")
    (folder / "scripts" / "run.sh").write_text("#!/bin/sh\necho run\n")
    settings.LECTERN_SOURCE_ROOTS = [*settings.LECTERN_SOURCE_ROOTS, mcp.source_root]
    source = ReferenceSource.objects.create(catalog=indexed_catalog, slug="kit", name="Kit",
                                            location=str(folder / "**" / "*"))
    assert source_index_now(source=source, trigger=IndexRun.Trigger.COMMAND).status == IndexRun.Status.SUCCEEDED
    ok(mcp.call("select_references", ids=["kit"]))
    return folder


@pytest.mark.parametrize("changed", ["README.md", "scripts/run.sh"])
def test_a_file_of_a_reference_changed_on_disk_is_refused_as_the_rest_api_refuses_it(mcp, rest, kit, changed):
    assert ok(mcp.call("read_reference_file", catalog="ops", source_id="kit", path="kit/README.md"))["text"] == \
        "# Kit\n\nWhat the kit holds.\n"
    (kit / changed).write_text("changed on disk since it was indexed\n")

    for path in ("kit/README.md", "kit/scripts/run.sh"):
        read = mcp.call("read_reference_file", catalog="ops", source_id="kit", path=path)
        assert error(read, "reference_changed")
        assert read.structured_content == rest.get("/api/v1/references/ops/kit/file", {"path": path}).json()
        assert "What the kit holds" not in text_of(read)


def test_an_agent_reading_two_catalogs_that_share_an_id_is_hinted_ids_it_can_act_on(mcp, agent, make_catalog):
    lab = make_catalog("lab")
    import_documents(catalog=lab, slug="handbook", documents=[
        DocumentInput("notes.md", "Notes", "The lab's own notes on retries.", 32)])
    agent.catalogs.add(lab)

    bare = ok(mcp.call("enrich", text="Please expand @handbook.", surface="prompt"))
    assert not [h for h in bare["hints"] if h["injected"] == "expand"] and recorded()[0] == 0
    hinted = sorted(h["ref"] for h in bare["hints"] if h["via"] == "mention")
    assert hinted == ["lab/handbook", "ops/handbook"]
    assert all(f"- @{ref}: " in bare["text"] for ref in hinted)

    qualified = ok(mcp.call("enrich", text=f"Please expand @{hinted[1]}.", surface="prompt"))
    assert [(h["catalog"], h["injected"]) for h in qualified["hints"] if h["via"] == "mention"] == [("ops", "expand")]
    selected = ok(mcp.call("select_references", ids=[hinted[0]]))
    assert [(s["catalog"], s["source_id"]) for s in selected["selected"]] == [("lab", "handbook")]
    assert set(Selection.objects.values_list("source__catalog__slug", flat=True)) == {"ops", "lab"}


# --- approvals ----------------------------------------------------------------------------


def test_approval_requests_lists_this_agents_requests_and_no_one_elses_as_rest_does(mcp, agent, rest,
                                                                                     indexed_catalog, vault):
    none_yet = mcp.call("approval_requests")
    assert ok(none_yet) == {"count": 0, "results": []} and text_of(none_yet) == "No approval requests."
    keys = import_documents(catalog=indexed_catalog, slug="keys", documents=[
        DocumentInput("keys.md", "Keys", "Keep the root token offline.", 28)])
    ReferenceSource.objects.filter(pk=keys.pk).update(requires_approval=True)
    rejected = raised(agent, vault)
    request_decide(request_id=rejected, reviewer=person("rita", "reviewer"), verdict="reject",
                   comment="not for bots")
    pending = raised(agent, keys)
    other, _ = agent_with_token(name="other-agent", catalogs=[indexed_catalog])
    theirs = {raised(other, vault), raised(other, keys)}

    result = mcp.call("approval_requests")

    body = ok(result)
    assert body == rest.get("/api/v1/approvals").json()
    assert [r["id"] for r in body["results"]] == [pending, rejected]
    assert not theirs & {r["id"] for r in body["results"]}
    assert text_of(result).splitlines() == [
        "2 approval requests, newest first:",
        f"- request {pending}: @ops/keys pending, 0 of 1 approvals; raised via select at "
        f"{body['results'][0]['created_at']}",
        f"- request {rejected}: @ops/vault rejected; raised via select at {body['results'][1]['created_at']}; "
        "reviewer's comment: \"not for bots\"",
    ]
    assert not any(f"request {other_id}:" in text_of(result) for other_id in theirs)


def test_approval_requests_shows_an_approval_past_its_expiry_as_expired_at_once(mcp, agent, rest, vault):
    approval = raised(agent, vault)
    request_decide(request_id=approval, reviewer=person("rita", "reviewer"), verdict="approve")
    ended = timezone.now() - timedelta(seconds=86)
    ApprovalRequest.objects.filter(pk=approval).update(expires_at=ended)  # the expiry task has not run

    expired = mcp.call("approval_requests", state="expired")
    approved = mcp.call("approval_requests", state="approved")

    assert ok(expired) == rest.get("/api/v1/approvals", {"state": "expired"}).json()
    assert [(r["id"], r["state"]) for r in ok(expired)["results"]] == [(approval, "expired")]
    assert f"- request {approval}: @ops/vault expired since " in text_of(expired)
    assert ok(approved) == {"count": 0, "results": []}


@pytest.mark.parametrize("arguments", [{"state": "rejected"}, {"state": "pending"}, {"state": ""},
                                       {"limit": 1}, {"limit": 1, "offset": 1}, {"offset": 5}])
def test_approval_requests_takes_the_rest_filters_and_pages(mcp, agent, rest, indexed_catalog, vault, arguments):
    keys = import_documents(catalog=indexed_catalog, slug="keys", documents=[
        DocumentInput("keys.md", "Keys", "Keep the root token offline.", 28)])
    ReferenceSource.objects.filter(pk=keys.pk).update(requires_approval=True)
    ApprovalRequest.objects.filter(pk=raised(agent, vault)).update(state="rejected")
    raised(agent, keys)
    other, _ = agent_with_token(name="other-agent", catalogs=[indexed_catalog])
    raised(other, vault)

    result = mcp.call("approval_requests", **arguments)

    expected = rest.get("/api/v1/approvals", arguments).json()
    assert ok(result) == expected
    lines = text_of(result).splitlines()
    assert len([line for line in lines if line.startswith("- request ")]) == len(expected["results"])
    if arguments == {"limit": 1}:
        assert lines[0] == "2 approval requests, newest first (1-1 shown):" and lines[-1] == "More from offset 1."
    if arguments == {"offset": 5}:
        assert lines == ["2 approval requests; none from offset 5."]


@pytest.mark.parametrize("arguments, field", [({"state": "maybe"}, "state"), ({"limit": 0}, "limit"),
                                              ({"limit": 201}, "limit"), ({"offset": -1}, "offset")])
def test_a_bad_approval_requests_argument_is_the_rest_error(mcp, rest, arguments, field):
    result = mcp.call("approval_requests", **arguments)

    assert set(error(result, "invalid_input")["details"]["fields"]) == {field}
    assert result.structured_content == rest.get("/api/v1/approvals", arguments).json()


def test_every_tool_names_the_request_of_what_it_withholds_as_approval_requests_shows_it(mcp, agent, rest, vault):
    agent.preselected.add(vault)  # the startup instructions take it up, and withhold it

    selected = mcp.call("select_references", ids=["vault", "handbook"])

    (withheld,) = ok(selected)["withheld"]
    request_id = withheld["request_id"]
    listed = rest.get("/api/v1/approvals").json()
    assert [(r["id"], r["source_id"], r["state"]) for r in listed["results"]] == [(request_id, "vault", "pending")]
    line = f"- @vault: requires approval; request {request_id} awaits a reviewer"
    header = "Withheld for want of an approval (approval_requests lists your requests and their states):"
    assert note_of(selected) == f"{header}\n{line}"
    assert json.loads(text_of(selected)) == ok(selected)  # the first text is the body, as before

    enriched = mcp.call("enrich", text="Follow @vault for the rotation.", surface="prompt")
    (hint,) = [h for h in ok(enriched)["hints"] if h["source_id"] == "vault"]
    assert (hint["withheld"], hint["request_id"]) == (True, request_id)
    assert note_of(enriched) == f"{header}\n{line}"

    searched = mcp.call("rag_search", query="rotate vault credentials", mode="bm25")
    assert ok(searched)["withheld"]["sources"][0]["request_id"] == request_id
    assert line in text_of(searched)

    references = mcp.call("list_references")
    (entry,) = [r for r in ok(references)["references"] if r["source_id"] == "vault"]
    assert (entry["withheld"], entry["request_id"]) == (True, request_id)
    assert note_of(references) == f"{header}\n{line}"

    read = mcp.call("read_reference_file", catalog="ops", source_id="vault", path="vault.md")
    assert error(read, "withheld")["details"] == {"state": "pending", "request_id": request_id}
    assert note_of(read) == f"{header}\n{line}"
    assert "ninety days" not in text_of(read) + note_of(read)

    instructions = mcp.call("agent_instructions")
    (source,) = [s for s in ok(instructions)["sources"] if s["source_id"] == "vault"]
    assert (source["included"], source["request_id"]) == ("withheld", request_id)
    assert text_of(instructions) == ok(instructions)["text"] and note_of(instructions) == f"{header}\n{line}"

    shown = mcp.call("approval_requests")
    assert ok(shown) == rest.get("/api/v1/approvals").json()
    assert [r["id"] for r in ok(shown)["results"]] == [request_id]  # every read path named the one request
    assert text_of(shown).splitlines()[1].startswith(f"- request {request_id}: @ops/vault pending")


def test_nothing_withheld_adds_no_second_text(mcp):
    for result in (mcp.call("list_references"), mcp.call("select_references", ids=["handbook"]),
                   mcp.call("enrich", text="Please expand @handbook.", surface="prompt"),
                   mcp.call("agent_instructions")):
        ok(result)
        assert note_of(result) == ""


def test_a_rejected_request_is_named_with_its_state_and_a_listing_names_one_not_yet_raised(mcp, agent, vault):
    listed = mcp.call("list_references")  # listing raises no request
    assert note_of(listed).endswith("- @vault: requires approval; no reviewer has approved it for this agent; "
                                    "no request yet: select_references asks a reviewer")
    assert ApprovalRequest.objects.count() == 0
    request_id = raised(agent, vault)
    request_decide(request_id=request_id, reviewer=person("rita", "reviewer"), verdict="reject")

    selected = mcp.call("select_references", ids=["vault"])

    assert ok(selected)["withheld"][0]["state"] == "rejected"
    assert note_of(selected).endswith(f"- @vault: requires approval; request {request_id} was rejected")


def test_an_agent_reading_several_catalogs_is_named_ids_with_their_catalog(mcp, agent, vault, make_catalog):
    agent.catalogs.add(make_catalog("lab"))

    selected = mcp.call("select_references", ids=["ops/vault"])

    request_id = ok(selected)["withheld"][0]["request_id"]
    assert note_of(selected).endswith(f"- @ops/vault: requires approval; request {request_id} awaits a reviewer")
    assert note_of(mcp.call("list_references")).endswith(
        f"- @ops/vault: requires approval; request {request_id} awaits a reviewer")


# --- errors -------------------------------------------------------------------------------


def test_reading_a_file_of_an_unselected_reference_is_a_tool_error(mcp, rest):
    result = mcp.call("read_reference_file", catalog="ops", source_id="handbook", path="retries.md")

    assert error(result, "not_selected")
    assert result.structured_content == rest.get("/api/v1/references/ops/handbook/file",
                                                  {"path": "retries.md"}).json()
    assert error(mcp.call("read_reference_file", catalog="ops", source_id="handbook", path="nope.md"),
                 "not_selected")


def test_an_unknown_reference_is_a_tool_error_and_records_nothing(mcp, rest):
    before = recorded()

    result = mcp.call("select_references", ids=["handbook", "no-such-reference"])

    details = error(result, "unknown_reference")["details"]
    assert details["unknown_ids"] == ["no-such-reference"]
    assert (
        result.structured_content
        == rest.post("/api/v1/references/select", {"ids": ["handbook", "no-such-reference"]}, format="json").json()
    )
    assert recorded() == before
    assert ok(mcp.call("list_references"))["count"] == 1  # the server goes on serving


def test_bad_arguments_are_invalid_input_and_change_nothing(mcp):
    before = recorded()

    out_of_range = mcp.call("rag_search", query="retry", top_k=0)
    unknown = mcp.call("rag_search", query="retry", fuzzy=True)
    blank = mcp.call("enrich", text="   ", surface="prompt")
    no_catalog = mcp.call("rag_search", query="retry", catalog="nope")

    assert set(error(out_of_range, "invalid_input")["details"]["fields"]) == {"top_k"}
    assert error(unknown, "invalid_input")["details"]["fields"] == {
        "fuzzy": ["unknown argument; use catalog, query, top_k, mode, fusion, normalization, weights, dedup"]}
    assert set(error(blank, "invalid_input")["details"]["fields"]) == {"text"}
    assert error(no_catalog, "not_found")["message"] == "No catalog 'nope'."
    assert recorded() == before


def test_a_revoked_token_stops_working_at_once(mcp, agent):
    Agent.objects.filter(pk=agent.pk).update(is_active=False)

    result = mcp.call("list_references")

    assert error(result, "unauthenticated")["message"] == "Invalid or revoked token."


def test_the_token_never_reaches_the_log(mcp):
    ok(mcp.call("list_references"))

    log = mcp.log.read_text()
    assert "mcp-agent" in log  # the startup line
    assert TOKEN not in log and hash_token(TOKEN) not in log


# --- refusing to start ------------------------------------------------------------------


def run_server(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "mcp", *args],
        cwd=BASE_DIR,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_an_unknown_token_exits_before_serving(db):
    unknown = new_token()

    done = run_server(server_env(unknown))

    assert done.returncode != 0
    assert done.stdout == ""
    assert done.stderr.strip().splitlines() == ["CommandError: the agent token is unknown or revoked"]
    assert unknown not in done.stderr


def test_a_revoked_token_in_a_token_file_exits_before_serving(indexed_catalog, agent_token, tmp_path):
    token = agent_token("revoked-agent", [indexed_catalog])
    Agent.objects.filter(name="revoked-agent").update(is_active=False)
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n")
    env = server_env("")
    del env["LECTERN_AGENT_TOKEN"]

    done = run_server(env, "--token-file", str(token_file))

    assert done.returncode != 0
    assert done.stdout == ""
    assert done.stderr.strip().splitlines() == ["CommandError: the agent token is unknown or revoked"]
    assert token not in done.stderr
