"""The agent-facing enrichment API over the demo catalog: enrich, listReferences,
selectReferences, reading selected files, traces and startup instructions; scope,
bad input (4xx JSON, nothing changed) and the governance seam (withheld)."""

from __future__ import annotations

import base64
import hashlib
import os
import re

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from approvals.models import ApprovalRequest
from catalog.demo_loader import DEMO_DIR
from catalog.indexing.runs import source_index_now
from catalog.models import Agent, Catalog, IndexRun, ReferenceSource
from catalog.sources.documents import DocumentInput
from catalog.tags import tags_ensure
from retrieval.models import Selection, Trace
from tests.factories import agent_with_token, import_documents, person

pytestmark = pytest.mark.django_db


def client_for(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


@pytest.fixture
def agent(demo):
    return client_for(demo.token)


@pytest.fixture
def outsider(demo):
    """An agent scoped to another catalog, which has its own circuit-breaker reference."""
    other = Catalog.objects.create(slug="other", name="Other")
    import_documents(catalog=other, slug="circuit-breaker", documents=[
        DocumentInput("cb.md", "Breakers elsewhere", "A different catalog's circuit breaker notes.", 44)])
    agent, token = agent_with_token(name="outsider")
    agent.catalogs.set([other])
    return client_for(token)


@pytest.fixture
def both(demo):
    """An agent reading the demo catalog and another that has a `caching` reference too,
    tagged like demo's."""
    other = Catalog.objects.create(slug="other", name="Other")
    source = import_documents(catalog=other, slug="caching", documents=[
        DocumentInput("caching.md", "Caching elsewhere", "Another catalog's notes on caching with redis.", 46)])
    source.tags.add(*tags_ensure(names=["redis"]))
    agent, token = agent_with_token(name="both")
    agent.catalogs.set([Catalog.objects.get(slug="demo"), other])
    return client_for(token)


def counts() -> tuple[int, int]:
    return Trace.objects.count(), Selection.objects.count()


def error_code(response) -> str:
    return response.json()["error"]["code"]


# --- enrich -------------------------------------------------------------------------------


def test_enrich_returns_text_hints_and_a_stored_trace(agent):
    response = agent.post("/api/v1/enrich", {"text": "Our circuit breaker opens; see @caching",
                                             "surface": "prompt"}, format="json")

    assert response.status_code == 200
    body = response.json()
    assert body["text"].startswith("Our circuit breaker opens; see @caching\n\n---\n**Reference @caching: Caching**")
    # caching links to circuit-breaker, which the text also names: the hint says the more specific
    assert "- @circuit-breaker: Circuit breaker (linked from @caching)" in body["text"]
    hints = {h["source_id"]: h for h in body["hints"]}
    assert hints["caching"]["via"] == "mention" and hints["caching"]["injected"] == "expand"
    assert hints["circuit-breaker"]["via"] == "link" and hints["circuit-breaker"]["matched"] == ["@caching"]
    assert hints["circuit-breaker"]["reasons"][:2] == [{"via": "link", "matched": ["@caching"]},
                                                      {"via": "tag", "matched": ["circuit breaker"]}]
    assert set(hints["circuit-breaker"]) >= {"source_id", "name", "matched", "via", "score"}
    trace = agent.get(f"/api/v1/traces/{body['trace_id']}").json()
    assert [step["pass"] for step in trace["steps"]] == [
        "mention", "tag", "semantic", "link", "rank", "governance", "format"]
    assert trace["hints"] == body["hints"]
    assert Selection.objects.filter(source__slug="caching", via="mention").exists()


def test_enriching_an_enriched_text_does_not_stack_injections(agent):
    first = agent.post("/api/v1/enrich", {"text": "use @caching with redis", "surface": "prompt"}, format="json")
    again = agent.post("/api/v1/enrich", {"text": first.json()["text"], "surface": "prompt"}, format="json")

    assert again.json()["text"] == first.json()["text"]
    assert again.json()["text"].count("**Reference @caching") == 1


def test_tool_result_reading_a_preselected_reference_pins_it(agent):
    response = agent.post("/api/v1/enrich", {"text": "# New service template\n...", "surface": "tool_result",
                                             "paths": ["service-template/README.md"]}, format="json")

    pinned = response.json()["pinned_reference"]
    assert pinned["source_id"] == "service-template" and pinned["path"] == "service-template/README.md"
    assert "templates (service-template/templates/, 2 files)" in pinned["context"]
    assert pinned["context"] in response.json()["text"]


def test_withheld_reference_is_named_with_its_reason_and_never_expanded(agent):
    before = counts()
    response = agent.post("/api/v1/enrich", {"text": "@secrets-management: rotate credentials",
                                             "surface": "prompt"}, format="json")

    body = response.json()
    (hint,) = [h for h in body["hints"] if h["source_id"] == "secrets-management"]
    assert hint["withheld"] and "requires approval" in hint["reason"]
    assert "**Reference @secrets-management" not in body["text"]
    assert "withheld: requires approval" in body["text"]
    assert counts() == (before[0] + 1, before[1])  # a trace, but no selection
    trace = Trace.objects.get(pk=body["trace_id"])
    (gate,) = [s for s in trace.steps if s["pass"] == "governance"]
    request = ApprovalRequest.objects.get(source__slug="secrets-management", state="pending")
    assert (request.raised_via, hint["request_id"]) == ("enrichment", request.pk)
    assert {"source_id": "secrets-management", "catalog": "demo", "allowed": False, "state": "pending",
            "reason": hint["reason"], "request_id": request.pk} in gate["decisions"]


def test_a_tool_result_without_words_skips_only_the_semantic_pass(agent):
    body = agent.post("/api/v1/enrich", {"text": "[1, 2, 3] {\"a\": 42} 2024-01-05", "surface": "tool_result",
                                         "paths": ["logging-policy.md"]}, format="json").json()

    steps = {s["pass"]: s for s in Trace.objects.get(pk=body["trace_id"]).steps}
    assert steps["semantic"]["skipped"] == "empty text" and body["degraded"] is None
    assert body["pinned_reference"]["source_id"] == "logging-policy"  # the path pass still ran


def test_candidates_beyond_max_hints_are_recorded_as_cut_and_not_gated(demo):
    narrow, token = agent_with_token(name="narrow", max_hints=2)
    narrow.catalogs.set(Catalog.objects.filter(slug="demo"))

    body = client_for(token).post("/api/v1/enrich", {
        "text": "resilience for logging of secrets and credentials", "surface": "prompt"}, format="json").json()

    hinted = [h["source_id"] for h in body["hints"] if h["injected"] == "hint"]
    steps = {s["pass"]: s for s in Trace.objects.get(pk=body["trace_id"]).steps}
    assert len(hinted) == 2 and steps["rank"]["kept"] == [f"demo/{slug}" for slug in hinted]
    assert steps["rank"]["max_hints"] == 2 and steps["rank"]["cut"] >= 2  # 4 carry the tags
    assert set(steps["tag"]["tags"]["resilience"]) == {"demo/circuit-breaker", "demo/retry-backoff",
                                                       "demo/rate-limiting"}
    assert steps["tag"]["tags"]["credentials"] == ["demo/secrets-management"]
    assert [d["source_id"] for d in steps["governance"]["decisions"]] == hinted
    assert hinted[0] == "secrets-management" and body["hints"][0]["withheld"]  # two tags matched: first


@pytest.mark.parametrize("payload", [
    {"surface": "prompt"},
    {"text": "   ", "surface": "prompt"},
    {"text": "hello", "surface": "email"},
    {"text": "hello", "surface": "prompt", "selected": ["not a valid id!"]},
    {"text": "hello", "surface": "prompt", "paths": "service-template/README.md"},
    {"text": "hello", "surface": "prompt", "catalogs": ["no-such-catalog"]},
    {"text": 42, "surface": "prompt"},
])
def test_bad_enrich_input_is_a_json_4xx_that_changes_nothing(agent, payload):
    before = counts()
    response = agent.post("/api/v1/enrich", payload, format="json")

    assert 400 <= response.status_code < 500
    assert set(response.json()["error"]) == {"code", "message", "details"}
    assert counts() == before


def test_malformed_json_and_no_token(agent):
    response = agent.post("/api/v1/enrich", "{not json", content_type="application/json")
    assert response.status_code == 400 and error_code(response) == "malformed_request"
    response = APIClient().post("/api/v1/enrich", {"text": "x", "surface": "prompt"}, format="json")
    assert response.status_code == 401


def test_an_agent_never_sees_another_catalogs_references(outsider):
    response = outsider.post("/api/v1/enrich", {"text": "@caching and a circuit breaker", "surface": "prompt"},
                             format="json")
    assert {(h["catalog"], h["source_id"]) for h in response.json()["hints"]} <= {("other", "circuit-breaker")}
    assert "@caching" not in response.json()["text"].split("\n", 1)[1]

    listed = outsider.get("/api/v1/references").json()["references"]
    assert [(r["catalog"], r["source_id"]) for r in listed] == [("other", "circuit-breaker")]
    for catalog in ("demo",):
        assert outsider.get(f"/api/v1/references?catalog={catalog}").status_code == 404
        assert outsider.post("/api/v1/enrich", {"text": "x", "surface": "prompt", "catalogs": [catalog]},
                             format="json").status_code == 404
    refused = outsider.post("/api/v1/references/select", {"ids": ["demo/caching"]}, format="json")
    assert refused.status_code == 400 and refused.json()["error"]["details"]["unknown_ids"] == ["demo/caching"]
    assert outsider.get("/api/v1/references/demo/caching/file?path=caching.md").status_code == 404


def test_traces_are_private_to_their_agent(agent, outsider):
    trace_id = agent.post("/api/v1/enrich", {"text": "hello", "surface": "prompt"}, format="json").json()["trace_id"]
    assert agent.get(f"/api/v1/traces/{trace_id}").status_code == 200
    response = outsider.get(f"/api/v1/traces/{trace_id}")
    assert response.status_code == 404 and error_code(response) == "not_found"


# --- agents reading several catalogs -------------------------------------------------------

HINT_IDS = re.compile(r"^- @(\S+): ", re.MULTILINE)


def granted(name: str) -> set[tuple[str, str]]:
    return set(Selection.objects.filter(agent__name=name).values_list("source__catalog__slug", "source__slug"))


def test_an_agent_reading_several_catalogs_is_hinted_ids_it_can_select(both):
    body = both.post("/api/v1/enrich", {"text": "we use redis", "surface": "prompt"}, format="json").json()

    hinted = HINT_IDS.findall(body["text"])
    assert {"demo/caching", "other/caching"} <= set(hinted)
    assert all("/" in ident for ident in hinted)
    assert [h["ref"] for h in body["hints"]] == [f"{h['catalog']}/{h['source_id']}" for h in body["hints"]]
    for ident in hinted:
        response = both.post("/api/v1/references/select", {"ids": [ident]}, format="json")
        assert response.status_code == 200, response.json()
        (answer,) = response.json()["selected"] + response.json()["withheld"]
        assert f"{answer['catalog']}/{answer['source_id']}" == ident
    selected = both.post("/api/v1/references/select", {"ids": ["other/caching"]}, format="json").json()["selected"]
    assert selected[0]["instructions"].startswith("---\n**Reference @other/caching: ")


def test_a_catalog_qualified_mention_expands_that_reference_only(both):
    body = both.post("/api/v1/enrich", {"text": "see @demo/caching.", "surface": "prompt"}, format="json").json()

    assert [(h["catalog"], h["source_id"]) for h in body["hints"] if h["injected"] == "expand"] == [
        ("demo", "caching")]
    assert "**Reference @demo/caching: Caching**" in body["text"]
    assert granted("both") == {("demo", "caching")}


def test_a_bare_mention_of_an_id_two_catalogs_share_expands_neither_and_says_so(both):
    body = both.post("/api/v1/enrich", {"text": "use @caching here", "surface": "prompt"}, format="json").json()

    assert not [h for h in body["hints"] if h["injected"] == "expand"]
    assert granted("both") == set()
    mentioned = {h["ref"]: h for h in body["hints"] if h["via"] == "mention"}
    assert set(mentioned) == {"demo/caching", "other/caching"}
    assert all(h["injected"] == "hint" and "@caching is in several catalogs" in h["reason"]
               for h in mentioned.values())
    assert "- @demo/caching: Caching (@caching is in several catalogs: write @demo/caching)" in body["text"]
    refused = both.post("/api/v1/references/select", {"ids": ["caching"]}, format="json")
    assert refused.status_code == 400 and refused.json()["error"]["details"]["ambiguous_ids"] == ["caching"]

    # Within one catalog the bare id is unique; the hint ids stay qualified all the same.
    one = both.post("/api/v1/enrich", {"text": "use @caching here", "surface": "prompt", "catalogs": ["other"]},
                    format="json").json()
    assert [h["ref"] for h in one["hints"] if h["injected"] == "expand"] == ["other/caching"]
    assert granted("both") == {("other", "caching")}


def test_an_agent_reading_one_catalog_is_hinted_bare_ids(agent):
    body = agent.post("/api/v1/enrich", {"text": "we use redis", "surface": "prompt"}, format="json").json()

    assert "caching" in HINT_IDS.findall(body["text"])
    assert all(h["ref"] == h["source_id"] for h in body["hints"])


# --- listReferences / selectReferences / files --------------------------------------------


def test_list_references_by_tag_in_any_spelling_and_by_text(agent):
    by_tag = agent.get("/api/v1/references?tag=Fault_Tolerance").json()
    assert [r["source_id"] for r in by_tag["references"]] == ["circuit-breaker"]
    resilience = agent.get("/api/v1/references?tag=resilience").json()["references"]
    assert {r["source_id"] for r in resilience} == {"circuit-breaker", "retry-backoff", "rate-limiting"}
    by_text = agent.get("/api/v1/references?q=half-open").json()["references"]
    assert [r["source_id"] for r in by_text] == ["circuit-breaker"]
    everything = agent.get("/api/v1/references").json()
    assert everything["count"] == 13
    secrets = next(r for r in everything["references"] if r["source_id"] == "secrets-management")
    assert secrets["withheld"] and secrets["requires_approval"]


def test_select_authorises_reading_and_withholds_what_needs_approval(agent):
    # Every demo reference is linked from a preselected one; without those, caching
    # is readable only once selected.
    ReferenceSource.objects.filter(mode="preselected").update(mode="selectable", updated_at=timezone.now())
    assert error_code(agent.get("/api/v1/references/demo/caching/file?path=caching.md")) == "not_selected"

    response = agent.post("/api/v1/references/select", {"ids": ["caching"], "tags": ["security"]}, format="json")

    body = response.json()
    assert response.status_code == 200
    (selected,) = body["selected"]
    assert selected["source_id"] == "caching" and selected["files"] == ["caching.md"]
    assert selected["instructions"].startswith("---\n**Reference @caching: Caching**")
    assert [w["source_id"] for w in body["withheld"]] == ["secrets-management"]
    assert "requires approval" in body["withheld"][0]["reason"]
    read = agent.get("/api/v1/references/demo/caching/file?path=caching.md")
    assert read.status_code == 200 and read.json()["text"].startswith("# Caching")
    withheld = agent.get("/api/v1/references/demo/secrets-management/file?path=secrets-management.md")
    assert withheld.status_code == 403 and error_code(withheld) == "withheld"
    assert not Selection.objects.filter(source__slug="secrets-management").exists()


def test_a_reference_selected_on_the_server_counts_as_selected_for_enrich(agent):
    def hinted(text: str, **fields) -> set[str]:
        body = agent.post("/api/v1/enrich", {"text": text, "surface": "prompt", **fields}, format="json").json()
        return {h["source_id"] for h in body["hints"] if h["injected"] == "hint"}

    text = "Clients get a 429 when the rate limit is hit; how should they back off?"
    assert "rate-limiting" in hinted(text)
    assert "rate-limiting" not in hinted(text, selected=["rate-limiting"])  # the client's word

    assert agent.post("/api/v1/references/select", {"ids": ["rate-limiting"]}, format="json").status_code == 200

    assert "rate-limiting" not in hinted(text)  # the server's record counts the same


def test_a_grant_on_record_is_renewed_in_place(agent):
    expanded = agent.post("/api/v1/enrich", {"text": "see @caching", "surface": "prompt"}, format="json").json()
    first = Selection.objects.get(source__slug="caching")
    assert (first.via, str(first.trace_id)) == ("mention", expanded["trace_id"])

    # the same reference again, twice in one request (by id and by a tag it carries)
    response = agent.post("/api/v1/references/select", {"ids": ["caching"], "tags": ["redis"]}, format="json")

    assert response.status_code == 200
    again = Selection.objects.get(source__slug="caching")
    assert (again.pk, again.created_at) == (first.pk, first.created_at)
    assert (again.via, again.trace_id) == ("select", None) and again.updated_at > first.updated_at


def test_select_with_an_unknown_id_or_tag_selects_nothing(agent):
    before = counts()
    response = agent.post("/api/v1/references/select", {"ids": ["caching", "nope"], "tags": ["no-such-tag"]},
                          format="json")

    assert response.status_code == 400
    assert response.json()["error"]["details"] == {"unknown_ids": ["nope"], "ambiguous_ids": [],
                                                   "unknown_tags": ["no-such-tag"]}
    assert counts() == before
    assert agent.post("/api/v1/references/select", {}, format="json").status_code == 400


def test_profile_references_are_readable_without_selecting(agent):
    assert agent.get("/api/v1/references/demo/python-style/file?path=python-style.md").status_code == 200  # auto
    assert agent.get("/api/v1/references/demo/service-template/file"
                     "?path=service-template/templates/health-endpoint.md").status_code == 200  # preselected
    assert agent.get("/api/v1/references/demo/retry-backoff/file?path=retry-backoff.md").status_code == 200  # linked
    missing = agent.get("/api/v1/references/demo/service-template/file?path=service-template/nope.md")
    assert missing.status_code == 404
    assert agent.get("/api/v1/references/demo/service-template/file").status_code == 400


def test_every_file_a_selection_lists_can_be_read(agent):
    body = agent.post("/api/v1/references/select", {"ids": ["service-template"]}, format="json").json()

    (selected,) = body["selected"]
    assert "service-template/scripts/check-service.sh" in selected["files"]
    assert selected["contents"]["scripts"] == ["service-template/scripts/check-service.sh"]
    for path in selected["files"]:
        read = agent.get("/api/v1/references/demo/service-template/file", {"path": path})
        assert read.status_code == 200, (path, read.json())
    script = agent.get("/api/v1/references/demo/service-template/file",
                       {"path": "service-template/scripts/check-service.sh"}).json()
    on_disk = (DEMO_DIR / "service-template" / "scripts" / "check-service.sh").read_bytes()
    assert script["encoding"] == "utf-8" and script["text"].encode() == on_disk
    assert script["sha256"] == hashlib.sha256(on_disk).hexdigest() and script["title"] == "check-service.sh"


@pytest.fixture
def kit(demo, settings, tmp_path):
    """A folder reference `kit` under a source root of its own: markdown (indexed), a
    script and an image (not indexed), a file over LECTERN_MAX_FILE_BYTES and a symlink
    to a file outside the root."""
    root = tmp_path / "root"
    (root / "kit" / "scripts").mkdir(parents=True)
    (root / "kit" / "README.md").write_text("# Kit\n\nWhat the kit holds.\n")
    (root / "kit" / "scripts" / "run.sh").write_text("#!/bin/sh\necho run\n")
    (root / "kit" / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff")
    (root / "kit" / "huge.bin").write_bytes(b"x" * 2048)
    (tmp_path / "secret.txt").write_text("outside every source root")
    (root / "kit" / "leak.txt").symlink_to(tmp_path / "secret.txt")
    settings.LECTERN_SOURCE_ROOTS = [*settings.LECTERN_SOURCE_ROOTS, root]
    settings.LECTERN_MAX_FILE_BYTES = 1024
    source = ReferenceSource.objects.create(catalog=Catalog.objects.get(slug="demo"), slug="kit", name="Kit",
                                            location=str(root / "kit" / "**" / "*"))
    assert source_index_now(source=source, trigger=IndexRun.Trigger.COMMAND).status == IndexRun.Status.SUCCEEDED
    return root


def read_kit(agent, path: str):
    return agent.get("/api/v1/references/demo/kit/file", {"path": path})


def test_a_folder_reference_lists_and_serves_every_file_inside_its_root_and_no_other(agent, kit):
    body = agent.post("/api/v1/references/select", {"ids": ["kit"]}, format="json").json()

    assert body["selected"][0]["files"] == ["kit/README.md", "kit/logo.png", "kit/scripts/run.sh"]
    readme, logo, script = (read_kit(agent, path).json() for path in body["selected"][0]["files"])
    assert (readme["encoding"], readme["text"]) == ("utf-8", "# Kit\n\nWhat the kit holds.\n")
    assert (script["encoding"], script["text"]) == ("utf-8", "#!/bin/sh\necho run\n")
    assert logo["encoding"] == "base64" and base64.b64decode(logo["text"]) == b"\x89PNG\r\n\x1a\n\x00\xff"
    assert logo["sha256"] == hashlib.sha256(b"\x89PNG\r\n\x1a\n\x00\xff").hexdigest()
    for path in ("kit/leak.txt", "kit/huge.bin", "kit/../kit/README.md", "kit/scripts", "kit/nope.sh",
                 str(kit / "kit" / "scripts" / "run.sh"), "secret.txt"):
        response = read_kit(agent, path)
        assert response.status_code == 404 and error_code(response) == "not_found", path


def assert_changed(response) -> None:
    assert response.status_code == 409 and error_code(response) == "reference_changed", response.content
    assert "text" not in response.json()


def test_a_file_changed_on_disk_is_not_served_until_the_reference_is_reindexed(agent, kit):
    agent.post("/api/v1/references/select", {"ids": ["kit"]}, format="json")
    (kit / "kit" / "scripts" / "run.sh").write_text("#!/bin/sh\necho changed since indexing\n")

    assert_changed(read_kit(agent, "kit/scripts/run.sh"))
    assert_changed(read_kit(agent, "kit/README.md"))  # indexed, unchanged: the reference's files changed
    source_index_now(source=ReferenceSource.objects.get(slug="kit"), trigger=IndexRun.Trigger.COMMAND)
    assert read_kit(agent, "kit/scripts/run.sh").json()["text"] == "#!/bin/sh\necho changed since indexing\n"
    assert read_kit(agent, "kit/README.md").json()["text"] == "# Kit\n\nWhat the kit holds.\n"


def test_an_indexed_document_changed_on_disk_is_not_served_as_it_was_indexed(agent, kit):
    """The indexed text is the database's, but it stands for the file: once the file is
    another, the reference is no longer what was indexed (and approved)."""
    agent.post("/api/v1/references/select", {"ids": ["kit"]}, format="json")
    (kit / "kit" / "README.md").write_text("# Kit\n\nWhat the kit holds now: something else.\n")

    assert_changed(read_kit(agent, "kit/README.md"))
    source_index_now(source=ReferenceSource.objects.get(slug="kit"), trigger=IndexRun.Trigger.COMMAND)
    assert read_kit(agent, "kit/README.md").json()["text"] == "# Kit\n\nWhat the kit holds now: something else.\n"


def test_an_indexed_document_rewritten_in_place_with_its_size_and_mtime_is_not_served(agent, kit):
    """Size and mtime say nothing changed (a copy that keeps times, a coarse clock); the
    content says otherwise."""
    agent.post("/api/v1/references/select", {"ids": ["kit"]}, format="json")
    readme = kit / "kit" / "README.md"
    before = readme.stat()
    readme.write_text("# Kit\n\nWhat the kit holds?\n".replace("?", "!"))
    os.utime(readme, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert readme.stat().st_size == before.st_size and readme.stat().st_mtime_ns == before.st_mtime_ns

    assert_changed(read_kit(agent, "kit/README.md"))
    assert read_kit(agent, "kit/scripts/run.sh").status_code == 200  # the source's stat fingerprint did not move


def test_an_indexed_document_deleted_on_disk_is_not_served(agent, kit):
    agent.post("/api/v1/references/select", {"ids": ["kit"]}, format="json")
    (kit / "kit" / "README.md").unlink()

    assert_changed(read_kit(agent, "kit/README.md"))


# --- startup instructions -----------------------------------------------------------------


def test_preload_instructions_hold_whole_documents_within_the_budget(agent, demo):
    Agent.objects.filter(name="demo-agent").update(token_budget=2500)
    body = agent.get("/api/v1/agent/instructions").json()

    assert body["strategy"] == "preload" and body["rag_hint"] is None
    assert body["tokens"] <= 2500
    by_id = {s["source_id"]: s for s in body["sources"]}
    assert by_id["code-review"]["via"] == "auto" and by_id["code-review"]["included"] == "content"
    assert by_id["service-template"]["via"] == "preselected"
    assert by_id["incident-response"]["included"] == "withheld"
    over = [s for s in body["sources"] if s["included"] == "listed"]
    assert over and all(s["reason"] == "over the token budget" for s in over)
    linked = [s for s in body["sources"] if s["via"] == "link"]
    assert linked and all(s["parents"] for s in linked)
    for source in body["sources"]:  # nothing is cut mid-document
        if source["included"] == "content":
            for document in ReferenceSource.objects.get(slug=source["source_id"]).documents.all():
                assert document.text.strip() in body["text"]
    assert "incident-response.md" not in body["text"]


@pytest.mark.parametrize(("strategy", "budget"), [("preload", 800), ("preload", 100), ("rag", 800), ("rag", 100)])
def test_instructions_never_exceed_the_budget_and_say_what_was_left_out(agent, strategy, budget):
    Agent.objects.filter(name="demo-agent").update(strategy=strategy, token_budget=budget)

    body = agent.get("/api/v1/agent/instructions").json()

    assert body["tokens"] <= budget and not body["over_budget"]
    assert [s for s in body["sources"] if s.get("reason", "").startswith("over the token budget")]
    for source in body["sources"]:  # each is in the text, or the text says it was left out
        if source["included"] == "listed":
            assert f"**Reference @{source['source_id']}: " in body["text"]
        if source.get("reason") == "over the token budget: listed without its files":
            assert f"**Reference @{source['source_id']}: {source['name']}** (listed without its files" in body["text"]
    omitted = [s["source_id"] for s in body["sources"] if s["included"] == "omitted"]
    assert all(s["reason"] == "over the token budget" for s in body["sources"] if s["included"] == "omitted")
    if budget == 100:
        assert omitted
    if omitted:
        line = "Left out for the token budget: "
        assert line + ", ".join(f"@{i}" for i in omitted) + "." in body["text"] or \
            f"{line}{len(omitted)} more references" in body["text"]


def test_listed_references_are_not_said_to_be_selected(agent):
    Agent.objects.filter(name="demo-agent").update(strategy="rag")

    body = agent.get("/api/v1/agent/instructions").json()

    assert [s for s in body["sources"] if s["included"] == "listed"]
    assert "selected; its files are authorised for reading" not in body["text"]


def test_rag_instructions_list_references_and_hint_rag_search(agent):
    Agent.objects.filter(name="demo-agent").update(strategy="rag", default_top_k=7)
    body = agent.get("/api/v1/agent/instructions").json()

    assert "rag_search" in body["rag_hint"] and "up to 7 results" in body["rag_hint"]
    by_id = {s["source_id"]: s for s in body["sources"]}
    assert by_id["python-style"]["included"] == "content"  # auto sources are always loaded
    assert by_id["logging-policy"]["included"] == "listed"
    assert "**Reference @logging-policy: Logging policy**" in body["text"]


def test_a_signed_in_curator_can_enrich_with_the_default_profile(demo):
    client = APIClient()
    client.force_authenticate(person("curator", "curator"))
    response = client.post("/api/v1/enrich", {"text": "we use redis", "surface": "prompt"}, format="json")
    assert response.status_code == 200
    assert [h["source_id"] for h in response.json()["hints"] if h["via"] == "tag"] == ["caching"]


def test_create_agent_sets_the_profile(demo):
    from io import StringIO

    from django.core.management import CommandError, call_command

    out = StringIO()
    call_command("create_agent", "--name", "planner", "--catalogs", "demo", "--strategy", "rag", "--budget", "3000",
                 "--top-k", "8", "--preselect", "caching,demo/sql-migrations", stdout=out)
    agent = Agent.objects.get(name="planner")
    assert (agent.strategy, agent.token_budget, agent.default_top_k) == ("rag", 3000, 8)
    assert {s.slug for s in agent.preselected.all()} == {"caching", "sql-migrations"}
    body = client_for(out.getvalue().strip()).get("/api/v1/agent/instructions").json()
    assert {s["source_id"] for s in body["sources"] if s["via"] == "preselected"} >= {"caching", "sql-migrations"}

    with pytest.raises(CommandError, match="'nope' is unknown"):
        call_command("create_agent", "--name", "other", "--catalogs", "demo", "--preselect", "nope")
    with pytest.raises(CommandError, match="token_budget"):
        call_command("create_agent", "--name", "other", "--catalogs", "demo", "--budget", "5")
    assert not Agent.objects.filter(name="other").exists()


def test_the_catalog_matcher_is_cached_until_tags_change(agent, demo):
    from catalog.tags import tags_ensure
    from retrieval.enrichment.detection import catalog_index

    catalog = Catalog.objects.get(slug="demo")
    first = catalog_index(catalog)
    assert catalog_index(catalog) is first  # nothing changed: the same compiled matcher

    def tagged(text: str) -> set[str]:
        body = agent.post("/api/v1/enrich", {"text": text, "surface": "prompt"}, format="json").json()
        return {h["source_id"] for h in body["hints"] if h["via"] == "tag"}

    assert tagged("a bulkhead around the pool") == set()
    ReferenceSource.objects.get(slug="circuit-breaker").tags.add(*tags_ensure(names=["bulkhead"]))
    assert catalog_index(catalog) is not first
    assert tagged("a bulkhead around the pool") == {"circuit-breaker"}
    tag = ReferenceSource.objects.get(slug="circuit-breaker").tags.get(key="bulkhead")
    tag.name, tag.key = "bulk head", "bulk-head"
    tag.save()
    assert tagged("a bulk-head around the pool") == {"circuit-breaker"}



# --- earlier injections --------------------------------------------------------------------

LOOKALIKE = "Notes\n\n---\n**Reference sources available** my own bold heading\nkeep this line\n---\n\nend"


def test_the_users_own_text_that_looks_like_a_block_is_kept(agent):
    body = agent.post("/api/v1/enrich", {"text": LOOKALIKE, "surface": "prompt"}, format="json").json()

    assert body["text"].startswith(LOOKALIKE)


def test_a_client_echoing_each_text_loses_only_lectern_s_injection_at_its_end(agent):
    # given a client that sends back each text it got, then the same with a turn pasted after it
    turns = ["we use redis for sessions\n", LOOKALIKE, "and see @caching", "what about retries?"]
    for turn in turns:
        enriched = agent.post("/api/v1/enrich", {"text": turn, "surface": "prompt"}, format="json").json()["text"]
        again = agent.post("/api/v1/enrich", {"text": enriched, "surface": "prompt"}, format="json").json()["text"]
        pasted = agent.post("/api/v1/enrich", {"text": f"{enriched}\n\nmore", "surface": "prompt"},
                            format="json").json()["text"]

        # the injection at the end of the text it was appended to is Lectern's; mid-text it is the user's
        assert again == enriched and enriched.startswith(turn)
        assert pasted.startswith(f"{enriched}\n\nmore")