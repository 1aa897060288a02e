"""A citation in every answer: each search hit and each passage injected into a
conversation carries its cite, the fingerprint of the text served, its bytes and the
approval that let it through; a curator of its catalog resolves the cite to the exact
text served (GET /api/v1/cite, and the cite page), after the source changed too.

Named callers: `bot` (an agent reading `kb`, approved by rita for the governed `vault`),
`carl` (a curator agent of `kb`, approved for nothing), `otto` (a curator agent of
another catalog), cora (a curator), rita (a reviewer)."""

from __future__ import annotations

import hashlib

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from approvals.services.decisions import request_decide
from catalog.models import Agent, Catalog, Document, ReferenceSource
from catalog.sources.documents import DocumentInput
from retrieval.citations.grammar import CiteError, byte_range, cite_string, fingerprint, parse_cite
from retrieval.models import ServedPassage, ServedText, Trace
from tests.approvals.builders import raised
from tests.factories import agent_with_token, import_documents, person

pytestmark = pytest.mark.django_db

VAULT = "Rotate the vault keys every ninety days.\nKeep the root token offline.\n"
VAULT_CHANGED = "Rotate the vault keys every thirty days.\nKeep the root token in the safe.\n"
NOTES = "Plain notes about the vault rotation schedule.\n"
FIELDS = ("cite", "fingerprint", "byte_start", "byte_end", "approval_id")


def doc(path: str, text: str) -> DocumentInput:
    return DocumentInput(path, path.removesuffix(".md").title(), text, len(text.encode()))


@pytest.fixture
def kb(make_catalog) -> Catalog:
    catalog = make_catalog("kb")
    import_documents(catalog=catalog, slug="vault", documents=[doc("ops/rotation.md", VAULT)])
    import_documents(catalog=catalog, slug="notes", documents=[doc("notes.md", NOTES)])
    ReferenceSource.objects.filter(catalog=catalog, slug="vault").update(requires_approval=True)
    return catalog


@pytest.fixture
def rita(db):
    return person("rita", "reviewer")


@pytest.fixture
def bot(kb, rita) -> tuple[Agent, str, int]:
    """The reading agent, its token, and the id of its approval for `vault`."""
    agent, token = agent_with_token(name="bot", catalogs=[kb])
    vault = ReferenceSource.objects.get(catalog=kb, slug="vault")
    request_id = raised(agent, vault)
    request_decide(request_id=request_id, reviewer=rita, verdict="approve")
    return agent, token, request_id


def api(token: str | None = None, user=None) -> APIClient:
    client = APIClient()
    if token:
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    if user is not None:
        client.force_login(user)
    return client


def search(token: str, query: str = "vault rotation keys", **body) -> dict:
    response = api(token).post("/api/v1/search", {"catalog": "kb", "query": query, "mode": "bm25", "top_k": 5,
                                                  **body}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def by_source(hits: list[dict]) -> dict[str, dict]:
    return {hit["source"]: hit for hit in hits}


def resolve(client: APIClient, cite: str):
    return client.get("/api/v1/cite", {"c": cite})


def assert_cited(hit: dict, *, catalog: str, approval_id: int | None) -> None:
    """The hit's citation names exactly the text it carries, where its document holds it."""
    text = Document.objects.get(source__catalog__slug=catalog, source__slug=hit["source"],
                                path=hit["document_id"]).text
    assert text.encode()[hit["byte_start"]:hit["byte_end"]].decode() == hit["content"]
    assert hit["byte_start"] == hit["byte_offset"]
    assert hit["fingerprint"] == hashlib.sha256(hit["content"].encode()).hexdigest()
    assert hit["cite"] == (f"[lectern:{catalog}/{hit['source']}/{hit['document_id']}"
                           f"#b{hit['byte_start']}-{hit['byte_end']}@{hit['fingerprint'][:12]}]")
    assert hit["approval_id"] == approval_id
    assert hit["citation"]  # the one-line place is still there


# --- the grammar ------------------------------------------------------------------------------


@pytest.mark.unit
@pytest.mark.parametrize("path", ["notes.md", "ops/run book#2 [draft]@v1.md", "dé/100%.txt", "a\tb\nc.md"])
def test_a_cite_reads_back_as_what_it_names_whatever_the_path(path):
    printed = fingerprint("Rotate the keys.")
    written = cite_string(catalog="kb", source="vault", path=path, start=10, end=26, fingerprint=printed)

    assert " " not in written and "\n" not in written and written.count("#b") == 1
    cite = parse_cite(written)
    assert (cite.catalog, cite.source, cite.path, cite.start, cite.end, cite.fingerprint) == \
        ("kb", "vault", path, 10, 26, printed[:12])
    assert parse_cite(written.strip("[]")) == cite  # brackets are optional
    assert parse_cite(written.replace(printed[:12], printed)).fingerprint == printed  # a longer prefix resolves too


@pytest.mark.unit
def test_byte_range_counts_utf8_bytes():
    assert byte_range(5, "dé") == (5, 8)


@pytest.mark.unit
@pytest.mark.parametrize(("raw", "says"), [
    ("", "no cite given"),
    ("lectern:kb/vault", "not a cite"),
    ("[lectern:kb/vault/a.md#b10-20@XYZ]", "not a cite"),
    ("[lectern:kb/vault/a.md#b10-20@0123456789ab", "not a cite"),
    ("[lectern:kb/vault/a.md#b20-10@0123456789ab]", "is empty"),
    ("[lectern:kb/vault/a%FF.md#b1-2@0123456789ab]", "not UTF-8"),
    ("[lectern:kb/vault/a%00.md#b1-2@0123456789ab]", "NUL"),
    ("[lectern:kb/vault/a\x00.md#b1-2@0123456789ab]", "not a cite"),
    ("[lectern:kb/vault/" + "a" * 3000 + "#b1-2@0123456789ab]", "at most"),
])
def test_a_bad_cite_says_why_in_one_line(raw, says):
    with pytest.raises(CiteError) as raised_error:
        parse_cite(raw)
    assert says in str(raised_error.value) and "\n" not in str(raised_error.value)


# --- what every answer carries ------------------------------------------------------------------


def test_search_hits_carry_cite_fingerprint_bytes_and_the_approval_that_let_them_through(bot):
    agent, token, request_id = bot

    hits = by_source(search(token)["results"])

    assert set(hits) == {"vault", "notes"}
    assert_cited(hits["vault"], catalog="kb", approval_id=request_id)
    assert_cited(hits["notes"], catalog="kb", approval_id=None)  # ungoverned: no approval
    trace = Trace.objects.get(agent=agent, surface=Trace.Surface.SEARCH)
    assert trace.text == "vault rotation keys"
    assert {(p.source, p.byte_start, p.byte_end, p.text_id, p.approval_id) for p in trace.passages.all()} == {
        (hit["source"], hit["byte_start"], hit["byte_end"], hit["fingerprint"], hit["approval_id"])
        for hit in hits.values()}
    assert "ninety days" not in str(trace.steps) + str(trace.hints)  # the trace keeps passages by reference


def test_a_person_searching_gets_cites_with_no_approval(kb):
    cora = person("cora", "curator")

    response = api(user=cora).post("/api/v1/search", {"catalog": "kb", "query": "vault rotation", "mode": "bm25"},
                                   format="json")

    (hit,) = response.json()["results"]  # the governed vault is withheld from people
    assert_cited(hit, catalog="kb", approval_id=None)
    assert hit["source"] == "notes"


def test_conversation_search_hits_carry_them_too(bot):
    _, token, request_id = bot

    response = api(token).post("/api/v1/search/conversation", {
        "catalog": "kb", "messages": [{"role": "user", "content": "How often are the vault keys rotated?"}],
        "top_k": 5}, format="json")

    assert response.status_code == 200, response.content
    hits = by_source(response.json()["results"])
    assert_cited(hits["vault"], catalog="kb", approval_id=request_id)
    assert_cited(hits["notes"], catalog="kb", approval_id=None)
    assert ServedPassage.objects.filter(trace__surface="search", source="vault").exists()


def test_passages_injected_into_a_conversation_carry_them_and_are_kept_for_curators(bot):
    agent, token, request_id = bot

    response = api(token).post("/api/v1/enrich/conversation", {
        "messages": [{"role": "user", "content": "How often are the vault keys rotated?"}],
        "user_id": "steve", "memory": False, "options": {"rag_relevance_threshold": 0.0, "rag_max_results": 5},
    }, format="json")

    assert response.status_code == 200, response.content
    body = response.json()
    passages = {item["source_id"]: item for item in body["context"] if item["kind"] == "passage"}
    vault = passages["vault"]
    assert vault["approval_id"] == request_id and passages["notes"]["approval_id"] is None
    assert vault["fingerprint"] == fingerprint(vault["text"])
    assert parse_cite(vault["cite"]).path == "ops/rotation.md"
    trace = Trace.objects.get(pk=body["trace_id"])
    (step,) = [s for s in trace.steps if s["pass"] == "conversation"]
    assert all(item["cite"] == "" and item["text"] == "" for item in step["context"])  # by reference only
    assert ServedText.objects.get(fingerprint=vault["fingerprint"]).text == vault["text"]
    assert trace.passages.filter(source="vault", approval_id=request_id).exists()


# --- resolving a cite ---------------------------------------------------------------------------


def reindex_vault(kb: Catalog, text: str = VAULT_CHANGED) -> None:
    import_documents(catalog=kb, slug="vault", documents=[doc("ops/rotation.md", text)])


def test_a_curator_resolves_a_cite_to_the_text_served_after_the_source_changed(kb, bot):
    agent, token, request_id = bot
    served = by_source(search(token)["results"])["vault"]
    reindex_vault(kb)
    assert not Document.objects.filter(text__contains="ninety").exists()
    cora = person("cora", "curator")

    response = resolve(api(user=cora), served["cite"])

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["text"] == served["content"] and "ninety days" in body["text"]
    assert body["fingerprint"] == served["fingerprint"] and body["changed"] is True
    assert body["current_fingerprint"] != served["fingerprint"]
    assert (body["catalog"], body["source"], body["path"]) == ("kb", "vault", "ops/rotation.md")
    (serving,) = body["served"]
    trace = Trace.objects.get(agent=agent, surface="search")
    assert serving["trace_id"] == str(trace.pk) and serving["agent"] == "bot" and serving["caller"] == "bot"
    assert serving["approval_id"] == request_id and serving["surface"] == "search"


def test_an_unchanged_cite_resolves_unchanged_and_a_playground_cite_from_the_document(kb, bot):
    _, token, _ = bot
    served = by_source(search(token)["results"])["notes"]
    cora = person("cora", "curator")

    body = resolve(api(user=cora), served["cite"]).json()

    assert body["text"] == served["content"] and body["changed"] is False and len(body["served"]) == 1
    ServedPassage.objects.all().delete()  # as for a hit no trace recorded (the playground's)
    body = resolve(api(user=cora), served["cite"]).json()
    assert body["text"] == served["content"] and body["changed"] is False and body["served"] == []


def assert_refused(response, status: int, code: str) -> None:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["error"]["code"] == code
    assert "ninety" not in response.content.decode()


def test_who_may_not_resolve_gets_a_json_error_and_never_the_text(kb, bot, rita):
    _, token, _ = bot
    cite = by_source(search(token)["results"])["vault"]["cite"]
    reindex_vault(kb)
    other = Catalog.objects.create(slug="other", name="Other")
    _, otto = agent_with_token(name="otto", catalogs=[other], is_curator=True)
    plain = person("pat")

    assert_refused(resolve(api(token), cite), 403, "forbidden")  # the agent it was served to: no curator
    assert_refused(resolve(api(user=rita), cite), 403, "forbidden")  # a reviewer sees, does not curate
    assert_refused(resolve(api(otto), cite), 404, "not_found")  # a curator of another catalog
    assert_refused(resolve(api(user=plain), cite), 404, "not_found")  # no role: no catalog at all
    assert_refused(resolve(api(), cite), 401, "unauthenticated")


def test_a_curator_agent_resolves_only_what_the_gate_lets_it_read(kb, bot):
    _, token, _ = bot
    hits = by_source(search(token)["results"])
    reindex_vault(kb)
    _, carl = agent_with_token(name="carl", catalogs=[kb], is_curator=True)  # approved for nothing

    assert_refused(resolve(api(carl), hits["vault"]["cite"]), 404, "not_found")
    response = resolve(api(carl), hits["notes"]["cite"])
    assert response.status_code == 200 and response.json()["text"] == hits["notes"]["content"]


def test_a_bad_cite_is_a_json_400_with_a_one_line_message(kb):
    cora = person("cora", "curator")

    for raw in ("", "nonsense", "[lectern:kb/vault/a.md#b9-3@0123456789ab]"):
        response = resolve(api(user=cora), raw)

        assert_refused(response, 400, "invalid_cite")
        message = response.json()["error"]["message"]
        assert message.startswith("c: ") and "\n" not in message


def test_a_cite_nobody_served_whose_text_changed_is_404(kb, bot):
    _, token, _ = bot
    cite = by_source(search(token)["results"])["vault"]["cite"]
    reindex_vault(kb)
    cora = person("cora", "curator")

    call_command("purge_traces", "--days", "0", stdout=open("/dev/null", "w"))  # noqa: SIM115

    assert not ServedPassage.objects.exists() and not ServedText.objects.exists()
    assert_refused(resolve(api(user=cora), cite), 404, "not_found")


# --- the curators' page -----------------------------------------------------------------------------


def test_the_cite_page_shows_a_curator_the_text_served_and_who_got_it(kb, bot, client_for, rita):
    _, token, _ = bot
    cite = by_source(search(token)["results"])["vault"]["cite"]
    reindex_vault(kb)
    cora = person("cora", "curator")

    empty = client_for(cora).get("/cite/")
    response = client_for(cora).get("/cite/", {"c": cite})
    bad = client_for(cora).get("/cite/", {"c": "nonsense"})

    assert empty.status_code == 200 and b'name="c"' in empty.content
    page = response.content.decode()
    assert response.status_code == 200
    assert "Rotate the vault keys every ninety days." in page and "changed since" in page and "bot" in page
    assert bad.status_code == 400 and "not a cite" in bad.content.decode()
    assert client_for(rita).get("/cite/", {"c": cite}).status_code == 403


def test_the_playground_shows_each_hit_its_cite_and_stores_nothing(kb, bot, client_for):
    agent, _, request_id = bot
    cora = person("cora", "curator")

    response = client_for(cora).post("/playground/", {"kind": "search", "agent": agent.name, "catalog": "kb",
                                                      "text": "vault rotation keys", "mode": "bm25"},
                                     HTTP_HX_REQUEST="true")

    page = response.content.decode()
    assert response.status_code == 200
    assert "[lectern:kb/vault/ops/rotation.md#b0-" in page and f"approved by request #{request_id}" in page
    assert "[lectern:kb/notes/notes.md#b0-" in page
    assert not Trace.objects.exists() and not ServedPassage.objects.exists()


# --- a reference file read whole ----------------------------------------------------------------


def test_a_file_an_agent_reads_is_cited_whole_and_resolves_after_the_source_changed(kb, bot):
    agent, token, request_id = bot
    api(token).post("/api/v1/references/select", {"ids": ["vault"]}, format="json")

    read = api(token).get("/api/v1/references/kb/vault/file", {"path": "ops/rotation.md"})

    body = read.json()
    assert read.status_code == 200 and body["text"] == VAULT
    assert (body["byte_start"], body["byte_end"]) == (0, len(VAULT.encode()))
    assert body["fingerprint"] == hashlib.sha256(VAULT.encode()).hexdigest()
    assert body["approval_id"] == request_id
    assert body["cite"] == f"[lectern:kb/vault/ops/rotation.md#b0-{len(VAULT.encode())}@{body['fingerprint'][:12]}]"
    trace = Trace.objects.get(agent=agent, surface="file")
    assert ServedPassage.objects.get(trace=trace).text_id == body["fingerprint"]

    reindex_vault(kb)
    cora = person("cora", "curator")
    resolved = resolve(api(user=cora), body["cite"]).json()
    assert resolved["text"] == VAULT and resolved["changed"] is True
    assert [s["surface"] for s in resolved["served"]] == ["file"]
    assert api(user=cora).get(f"/traces/{trace.pk}/").status_code == 200


def test_a_person_reading_a_file_gets_its_cite_and_leaves_no_trace(kb):
    cora = person("cora", "curator")
    body = api(user=cora).get("/api/v1/references/kb/notes/file", {"path": "notes.md"}).json()
    assert body["cite"].startswith("[lectern:kb/notes/notes.md#b0-") and body["approval_id"] is None
    assert not Trace.objects.filter(surface="file").exists()


def test_references_enrich_injects_name_the_approval_that_let_them_through(bot, kb):
    _, token, request_id = bot
    fingerprints = dict(ReferenceSource.objects.filter(catalog=kb).values_list("slug", "fingerprint"))

    response = api(token).post("/api/v1/enrich", {"text": "Follow @vault and @notes for the rotation.",
                                                  "surface": "prompt"}, format="json")

    assert response.status_code == 200, response.content
    hints = {hint["source_id"]: hint for hint in response.json()["hints"]}
    assert hints["vault"]["injected"] == "expand" and hints["vault"]["approval_id"] == request_id
    assert hints["notes"]["injected"] == "expand" and hints["notes"]["approval_id"] is None  # ungoverned
    assert {slug: hint["source_fingerprint"] for slug, hint in hints.items()} == fingerprints


def test_a_withheld_reference_names_its_request_and_no_approval(kb):
    _, token = agent_with_token(name="newcomer", catalogs=[kb])

    response = api(token).post("/api/v1/enrich", {"text": "Follow @vault.", "surface": "prompt"}, format="json")

    hint = next(hint for hint in response.json()["hints"] if hint["source_id"] == "vault")
    assert hint["withheld"] and hint["approval_id"] is None and hint["request_id"] is not None
    assert hint["source_fingerprint"] is None  # whether governed content changed is not the caller's to know
