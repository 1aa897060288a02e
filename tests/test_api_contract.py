"""The published API contract holds: schemathesis reads the schema the app serves at
/api/v1/schema/, generates requests for every operation (schema examples, boundary
cases, then random valid and invalid data) and checks each answer: never a 5xx, only
documented statuses and content types, bodies that match the documented shapes.

Requests go to the WSGI app in-process, inside the test's transaction, over the demo
catalog plus an inline and an upload source, as a reader agent (a curator agent for
the catalog-editing operations). Generation is derandomized with a fixed seed, and
bounded per operation, so every run sends the same requests.
"""

from __future__ import annotations

import os

import pytest
import schemathesis
from django.conf import settings as django_settings
from django.core.management import call_command
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from django.test import Client as DjangoClient
from hypothesis import HealthCheck, settings
from werkzeug.test import Client

from catalog.agents import new_token
from catalog.indexing.runs import index_run_execute
from catalog.models import Agent, ReferenceSource
from catalog.sources.documents import DocumentInput
from retrieval.evaluation.runs import evaluation_execute
from tests.contract import contract_config
from tests.factories import agent_with_token, import_documents, person

READER_TOKEN, CURATOR_TOKEN = new_token(), new_token()
CONFIG = contract_config(reader_token=READER_TOKEN, curator_token=CURATOR_TOKEN, max_examples=40)

schema = schemathesis.openapi.from_wsgi("/api/v1/schema/", get_wsgi_application(), config=CONFIG)


@pytest.fixture(scope="module")
def world(demo, django_db_blocker):
    """The demo catalog with an inline and an upload source, and the two agents."""
    with django_db_blocker.unblock():
        catalog = demo.catalog
        ReferenceSource.objects.create(catalog=catalog, slug="notes", name="Notes", kind="inline",
                                       content="Rotate the on-call pager weekly.")
        import_documents(catalog=catalog, slug="faq", documents=[
            DocumentInput("q1", "Refunds", "Refunds are paid within five days.", 34)])
        for name, token, curator in (("contract-reader", READER_TOKEN, False),
                                     ("contract-curator", CURATOR_TOKEN, True)):
            agent_with_token(name=name, catalogs=[catalog], token=token, is_curator=curator)
    return demo


@pytest.fixture
def in_test_transaction(world, db):
    """Requests reach the WSGI app on this thread: keep Django from closing the
    connection that holds the test's transaction (what its test client does too)."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@schema.parametrize()
# One transaction per operation, not per example: what an operation's examples write
# (selections, uploads, queued runs) stays for its later examples, as on a live server.
# too_slow measures this machine, not the API: a loaded CI runner must not fail the test.
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
def test_every_operation_keeps_its_contract(case, in_test_transaction):
    case.call_and_validate()


# --- real success bodies, including those random requests rarely reach ------------------


@pytest.fixture
def conforming(in_test_transaction):
    """call(method, template, ...) -> the JSON of a real response, after checking its
    status and validating it against the served schema's operation."""
    client = Client(get_wsgi_application())

    def call(method: str, template: str, *, token: str = READER_TOKEN, status: int = 200, json: dict | None = None,
             query: dict | None = None, session: str = "", **params: object) -> dict:
        cookie = django_settings.SESSION_COOKIE_NAME
        if session:  # a person signed in, for this call only
            client.set_cookie(cookie, session)
        response = client.open(template.format(**params), method=method, json=json, query_string=query,
                               headers={} if session else {"Authorization": f"Bearer {token}"})
        client.delete_cookie(cookie)
        assert response.status_code == status, response.get_data(as_text=True)
        schema[template][method].validate_response(response)
        body = response.json
        assert body is not None, "not a JSON response"
        return body

    return call


def test_enrich_responses_and_their_traces_match_the_schema(conforming, settings):
    prompt = conforming("POST", "/api/v1/enrich", json={"text": "Our circuit breaker trips; see @caching",
                                                        "surface": "prompt"})
    settings.LECTERN_TRACE_STORE_TEXT = False
    pinned = conforming("POST", "/api/v1/enrich", json={"text": "# New service template\n...",
                                                        "surface": "tool_result",
                                                        "paths": ["service-template/README.md"]})
    wordless = conforming("POST", "/api/v1/enrich", json={"text": "[1, 2, 3] 2024-01-05", "surface": "tool_result"})

    steps = [step for body in (prompt, pinned, wordless)
             for step in conforming("GET", "/api/v1/traces/{trace_id}", trace_id=body["trace_id"])["steps"]]
    # Each variant of the shapes was among those checked:
    assert conforming("GET", "/api/v1/traces/{trace_id}", trace_id=pinned["trace_id"])["text"] is None
    assert pinned["pinned_reference"]["context"]
    semantic = [step for step in steps if step["pass"] == "semantic"]
    assert any("skipped" in step for step in semantic) and any("threshold" in step for step in semantic)
    assert any(step["pass"] == "link" and step["discovered"] for step in steps)
    assert any(step["pass"] == "mention" and step["candidates"] for step in steps)


def test_reference_responses_match_the_schema(conforming):
    listed = conforming("GET", "/api/v1/references", query={"tag": "resilience"})
    selection = conforming("POST", "/api/v1/references/select",
                           json={"ids": ["service-template", "secrets-management"]})
    file = conforming("GET", "/api/v1/references/{catalog}/{source_id}/file", catalog="demo",
                      source_id="service-template", query={"path": "service-template/templates/health-endpoint.md"})

    assert listed["count"] > 1
    assert selection["selected"][0]["contents"] and selection["withheld"]
    assert file["sha256"]


def test_instructions_search_status_and_catalogs_match_the_schema(conforming):
    preload = conforming("GET", "/api/v1/agent/instructions")
    Agent.objects.filter(name="contract-reader").update(strategy=Agent.Strategy.RAG)
    rag = conforming("GET", "/api/v1/agent/instructions")
    search = conforming("POST", "/api/v1/search", json={"catalog": "demo", "query": "transient failures",
                                                        "mode": "bm25_tiebreak", "dedup": True})
    basic = conforming("GET", "/api/v1/status")
    scoped = conforming("GET", "/api/v1/status", token=CURATOR_TOKEN)
    reset = conforming("POST", "/api/v1/status/reset", token=CURATOR_TOKEN)
    signed_in = DjangoClient()
    signed_in.force_login(person("contract-reviewer", "reviewer"))
    after = conforming("GET", "/api/v1/status", session=signed_in.cookies[django_settings.SESSION_COOKIE_NAME].value)
    catalogs = conforming("GET", "/api/v1/catalogs")

    assert basic["view"] == "basic" and scoped["view"] == "catalogs" and scoped["catalogs"][0]["slug"] == "demo"
    assert after["view"] == "full" and after["catalogs"][0]["slug"] == "demo"
    assert reset["reset"]["by"] == "contract-curator" and after["last_reset"] == reset["reset"]

    assert any("parents" in source for source in preload["sources"]) and rag["rag_hint"]
    assert search["results"] and catalogs[0]["slug"] == "demo"


def test_curator_responses_and_index_runs_match_the_schema(conforming):
    queued = conforming("POST", "/api/v1/catalogs/{slug}/reindex", token=CURATOR_TOKEN, status=202, slug="demo",
                        query={"source": "faq"})
    run_id = queued["runs"][0]["id"]
    conforming("GET", "/api/v1/index-runs/{id}", id=run_id)
    index_run_execute(run_id=run_id)
    done = conforming("GET", "/api/v1/index-runs/{id}", id=run_id)
    conforming("PUT", "/api/v1/catalogs/{slug}/sources/{source}/content", token=CURATOR_TOKEN, status=202,
               slug="demo", source="notes", json={"content": "Page the secondary after ten minutes."})
    conforming("PUT", "/api/v1/catalogs/{slug}/sources/{source}/files", token=CURATOR_TOKEN, status=202,
               slug="demo", source="faq", json={"path": "q2", "text": "Parcels ship on weekdays."})
    conforming("DELETE", "/api/v1/catalogs/{slug}/sources/{source}/files", token=CURATOR_TOKEN, status=202,
               slug="demo", source="faq", query={"path": "q2"})

    assert done["status"] == "succeeded" and done["counts"] and done["timings"]


def test_evaluation_responses_match_the_schema(conforming):
    started = conforming("POST", "/api/v1/evaluations", token=CURATOR_TOKEN, status=202, json={
        "catalog": "demo", "modes": ["bm25", "hybrid"], "name": "contract set",
        "queries": '{"_id": "q1", "text": "transient failures"}\n{"_id": "q2", "text": "cache invalidation"}\n',
        "qrels": "q1\tretry-backoff.md\t1\nq2\tcaching.md\t1\n"})
    queued = conforming("GET", "/api/v1/evaluations/{id}", token=CURATOR_TOKEN, id=started["id"])
    evaluation_execute(run_id=started["id"])  # what the worker does (the test's transaction holds the commit)
    done = conforming("GET", "/api/v1/evaluations/{id}", token=CURATOR_TOKEN, id=started["id"],
                      query={"metric": "recall_at_100"})
    again = conforming("POST", "/api/v1/evaluations", token=CURATOR_TOKEN, status=202, json={
        "catalog": "demo", "query_set": started["query_set"]["id"]})

    assert queued["status"] == "queued" and queued["pairwise"] == []
    assert done["status"] == "succeeded" and len(done["metrics"]) == 2
    assert done["pairwise"][0]["metric"] == "recall_at_100"
    assert again["modes"] == ["bm25", "vector", "hybrid"]


def test_empty_query_parameters_are_read_as_absent_as_the_schema_says(conforming):
    everything = conforming("GET", "/api/v1/references")
    blank = conforming("GET", "/api/v1/references", query={"tag": "", "q": "", "catalog": ""})
    queued = conforming("POST", "/api/v1/catalogs/{slug}/reindex", token=CURATOR_TOKEN, status=202, slug="demo",
                        query={"source": ""})

    assert blank == everything
    assert len(queued["runs"]) == ReferenceSource.objects.filter(catalog__slug="demo").count()


# --- the schema itself -------------------------------------------------------------------------


def test_the_schema_builds_without_warnings_and_validates():
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", os.devnull)


def _resolve(node: dict) -> dict:
    while "$ref" in node:
        node = schema.raw_schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]]
    return node


def _request_body(path: str, method: str) -> dict:
    body = schema.raw_schema["paths"][path][method]["requestBody"]
    assert body["required"]
    return _resolve(body["content"]["application/json"]["schema"])


def test_each_operation_publishes_its_own_request_body():
    search = _request_body("/api/v1/search", "post")
    select = _request_body("/api/v1/references/select", "post")
    enrich = _request_body("/api/v1/enrich", "post")

    assert set(search["required"]) == {"catalog", "query"} and "top_k" in search["properties"]
    assert set(select["properties"]) == {"ids", "tags", "catalogs"} and len(select["anyOf"]) == 2
    assert set(enrich["required"]) == {"text", "surface"}


def _free_form_objects(node: object, where: str, seen: set[str]) -> list[str]:
    """Places in a response schema that say "some object" without saying which."""
    if isinstance(node, list):
        return [found for i, item in enumerate(node) for found in _free_form_objects(item, f"{where}[{i}]", seen)]
    if not isinstance(node, dict):
        return []
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[1]
        if name in seen:
            return []
        seen.add(name)
        return _free_form_objects(_resolve(node), name, seen)
    found = []
    untyped_values = node.get("additionalProperties") in (None, {}, True)
    if node.get("type") == "object" and "properties" not in node and untyped_values:
        found.append(where)
    for key, child in node.items():
        if key != "additionalProperties" or child not in ({}, True):
            found += _free_form_objects(child, f"{where}.{key}", seen)
    return found


def test_every_response_is_typed_and_every_error_is_the_error_body():
    for path, item in schema.raw_schema["paths"].items():
        for method, operation in item.items():
            responses = operation["responses"]
            assert {"400", "406", "408", "411", "413", "414", "431", "503"} <= set(responses), f"{method} {path}"
            for status, response in responses.items():
                body = response["content"]["application/json"]["schema"]
                if status.startswith("2"):
                    assert _free_form_objects(body, f"{method} {path} {status}", {"ErrorContent"}) == []
                elif operation["operationId"] != "health":  # its 503 is its status body
                    assert body == {"$ref": "#/components/schemas/Error"}, f"{method} {path} {status}"


NUL_FREE = {"pattern": "^[^\\u0000]*$"}


def _request_schemas(node: object, where: str, seen: set[str]) -> list[tuple[str, dict]]:
    """(where, schema) of every string and object schema a request may carry, through
    $refs (each component once)."""
    if isinstance(node, list):
        return [found for i, item in enumerate(node) for found in _request_schemas(item, f"{where}[{i}]", seen)]
    if not isinstance(node, dict):
        return []
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[1]
        if name in seen:
            return []
        seen.add(name)
        return _request_schemas(_resolve(node), name, seen)
    declared = node.get("type")
    types: list = declared if isinstance(declared, list) else [declared]
    found = [(where, node)] if ("string" in types and "enum" not in node) or "object" in types else []
    for key, child in node.items():
        if key not in ("description", "default", "example", "examples", "enum"):
            found += _request_schemas(child, f"{where}.{key}", seen)
    return found


def test_the_schema_says_that_no_string_or_key_of_a_request_may_hold_a_nul():
    """What the fuzzing above relies on: the server refuses a NUL in any string or key of
    a body, path or query (config/parsers.py, config/middleware.py), and the schema says
    so of each one, so that no schema-valid request is refused for one."""
    places = []
    for path, item in schema.raw_schema["paths"].items():
        for method, operation in item.items():
            seen: set[str] = set()
            for media in operation.get("requestBody", {}).get("content", {}).values():
                places += _request_schemas(media["schema"], f"{method} {path} body", seen)
            for parameter in operation.get("parameters", []):
                places += _request_schemas(parameter["schema"], f"{method} {path} {parameter['name']}", seen)
    strings = [(where, node) for where, node in places if "string" in str(node.get("type"))]
    objects = [(where, node) for where, node in places if "object" in str(node.get("type"))]

    assert len(strings) > 50 and len(objects) > 10
    for where, node in strings:  # (an empty query value, `maxLength: 0`, holds nothing)
        nul_free = node.get("pattern") == NUL_FREE["pattern"] or NUL_FREE in node.get("allOf", [])
        assert nul_free or node.get("maxLength") == 0, where
    for where, node in objects:
        assert node.get("propertyNames") == NUL_FREE, where
        assert node.get("additionalProperties") not in (None, True, {}), where
