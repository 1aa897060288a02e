"""Query counts of the agent endpoints, pinned (NetBox's query_counts): enrich, the
startup instructions, selectReferences and search take the same number of SQL
statements whether they touch 2 references or 8, so an N+1 coming back fails here.

Each catalog holds `n` chains root-i -> mid-i -> leaf-i: a root links to its mid (a
markdown link), a mid links to and mentions its leaf (@leaf-i), so discovery from the
roots walks two levels of edges; mids carry the tag `lantern`, leaves are `auto`, and
`atlas` is an auto reference too large for a small token budget."""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from catalog.models import Agent, Catalog, ReferenceSource
from catalog.sources.documents import DocumentInput
from catalog.tags import tags_ensure
from retrieval.enrichment.detection import catalog_index
from retrieval.models import Selection, Trace
from tests.factories import agent_with_token, import_documents

pytestmark = pytest.mark.django_db

SIZES = (2, 8)
ATLAS = "Atlas of every service. " * 600  # ~14 kB: more than a 1,000-token budget reads (12 bytes a token)


def _document(slug: str, text: str) -> list[DocumentInput]:
    return [DocumentInput(f"{slug}.md", slug.replace("-", " ").title(), text, len(text.encode()))]


def _chains(slug: str, n: int) -> Catalog:
    catalog = Catalog.objects.create(slug=slug, name=slug.title())
    lantern = tags_ensure(names=["lantern"])
    for i in range(n):
        import_documents(catalog=catalog, slug=f"root-{i}", documents=_document(
            f"root-{i}", f"Root {i} of the quartz procedure. Read [the middle](mid-{i}.md) next."))
        mid = import_documents(catalog=catalog, slug=f"mid-{i}", documents=_document(
            f"mid-{i}", f"Middle {i} of the quartz procedure. Finish with @leaf-{i} ([the leaf](leaf-{i}.md))."))
        mid.tags.add(*lantern)
        import_documents(catalog=catalog, slug=f"leaf-{i}", documents=_document(
            f"leaf-{i}", f"Leaf {i}: the quartz procedure ends here."))
    import_documents(catalog=catalog, slug="atlas", documents=_document("atlas", ATLAS))
    ReferenceSource.objects.filter(catalog=catalog, slug__startswith="leaf-").update(
        mode=ReferenceSource.Mode.AUTO, updated_at=timezone.now())
    ReferenceSource.objects.filter(catalog=catalog, slug="atlas").update(
        mode=ReferenceSource.Mode.AUTO, updated_at=timezone.now())
    catalog.refresh_from_db()
    catalog_index(catalog)  # built once per process in use: not what a request costs
    return catalog


@pytest.fixture(scope="module")
def chains(django_db_setup, django_db_blocker):
    """n -> a catalog of n chains, built once per module inside a transaction rolled back
    when the module is done (as the `demo` fixture does); each test runs in a savepoint."""
    with django_db_blocker.unblock():
        outer = transaction.atomic()
        outer.__enter__()
        try:
            yield {n: _chains(f"chains-{n}", n) for n in SIZES}
        finally:
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)


_serial = itertools.count()

Request = Callable[[], Any]  # the test client's response


def _agent(catalog: Catalog, **profile) -> APIClient:
    """A new agent reading `catalog`, the roots preselected for it."""
    agent, token = agent_with_token(name=f"agent-{next(_serial)}", catalogs=[catalog], **profile)
    agent.preselected.set(ReferenceSource.objects.filter(catalog=catalog, slug__startswith="root-"))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def _enrich(catalog: Catalog, n: int) -> Request:
    """@root-0 ... @root-(n-1): n expanded and granted, 2n discovered through them."""
    client, mentions = _agent(catalog), " ".join(f"@root-{i}" for i in range(n))
    return lambda: client.post("/api/v1/enrich", {"text": f"Follow {mentions} with the lantern.",
                                                  "surface": "prompt"}, format="json")


def _instructions(catalog: Catalog, n: int) -> Request:
    """n preselected roots, n auto leaves and n mids discovered: 3n loaded or listed."""
    client = _agent(catalog, token_budget=1000)
    return lambda: client.get("/api/v1/agent/instructions")


def _rag_instructions(catalog: Catalog, n: int) -> Request:
    """A rag agent: the n roots and n mids listed with their files."""
    client = _agent(catalog, strategy=Agent.Strategy.RAG)
    return lambda: client.get("/api/v1/agent/instructions")


def _select(catalog: Catalog, n: int) -> Request:
    """n roots by id and n mids by their tag."""
    client = _agent(catalog)
    return lambda: client.post("/api/v1/references/select",
                               {"ids": [f"root-{i}" for i in range(n)], "tags": ["lantern"]}, format="json")


def _search(mode: str) -> Callable[[Catalog, int], Request]:
    def search(catalog: Catalog, n: int) -> Request:
        """n hits (top_k) of the largest catalog."""
        client = _agent(catalog)
        return lambda: client.post("/api/v1/search", {"catalog": catalog.slug, "query": "quartz procedure",
                                                      "mode": mode, "top_k": n}, format="json")
    return search


SCENARIOS: dict[str, Callable[[Catalog, int], Request]] = {
    "enrich": _enrich, "instructions": _instructions, "instructions-rag": _rag_instructions, "select": _select,
    "search-hybrid": _search("hybrid"), "search-bm25": _search("bm25"), "search-vector": _search("vector")}


def _catalog(chains: dict[int, Catalog], name: str, n: int) -> Catalog:
    """Search asks one catalog for n hits; the others get the catalog of n chains."""
    return chains[max(SIZES)] if name.startswith("search") else chains[n]


def counted(request: Request) -> tuple[int, Any, CaptureQueriesContext]:
    """How many SQL statements a request took, its response (which must be a 200), and
    the statements."""
    with CaptureQueriesContext(connection) as queries:
        response = request()
    assert response.status_code == 200, response.content
    return len(queries), response, queries


# --- the scenarios do touch n references ------------------------------------------------------


def test_enrich_expands_grants_and_discovers_every_chain(chains):
    for n in SIZES:
        _, response, _ = counted(_enrich(chains[n], n))

        hints = {h["source_id"]: h for h in response.json()["hints"]}
        assert [hints[f"root-{i}"]["injected"] for i in range(n)] == ["expand"] * n
        assert Selection.objects.filter(source__catalog=chains[n], via="mention").count() == n
        (link,) = [s for s in Trace.objects.get(pk=response.json()["trace_id"]).steps if s["pass"] == "link"]
        assert Counter(d["depth"] for d in link["discovered"]) == {1: n, 2: n}  # mids, then leaves


def test_instructions_load_every_chain_and_do_not_read_what_cannot_fit(chains):
    for n in SIZES:
        _, response, queries = counted(_instructions(chains[n], n))

        by_id = {s["source_id"]: s for s in response.json()["sources"]}
        assert {by_id[f"{kind}-{i}"]["via"] for kind in ("root", "mid", "leaf") for i in range(n)} \
            == {"preselected", "link", "auto"}
        assert by_id["atlas"]["included"] == "listed" and by_id["atlas"]["reason"] == "over the token budget"
        atlas = ReferenceSource.objects.get(catalog=chains[n], slug="atlas").pk
        texts = [q["sql"] for q in queries.captured_queries if '"catalog_document"."text"' in q["sql"]]
        assert texts and not any(re.search(rf"\b{atlas}\b", sql.partition(" IN ")[2]) for sql in texts)


def test_rag_instructions_list_the_preselected_and_discovered_with_their_files(chains):
    for n in SIZES:
        _, response, _ = counted(_rag_instructions(chains[n], n))

        by_id = {s["source_id"]: s for s in response.json()["sources"]}
        assert {by_id[f"{kind}-{i}"]["included"] for kind in ("root", "mid") for i in range(n)} == {"listed"}
        assert all(f"\n- mid-{i}.md\n" in response.json()["text"] for i in range(n))


def test_select_returns_every_reference_asked_for(chains):
    for n in SIZES:
        _, response, _ = counted(_select(chains[n], n))

        assert len(response.json()["selected"]) == 2 * n
        assert Selection.objects.filter(source__catalog=chains[n], via="select").count() == 2 * n


@pytest.mark.parametrize("mode", ["hybrid", "bm25", "vector"])
def test_search_returns_top_k_hits(chains, mode):
    for n in SIZES:
        _, response, _ = counted(_search(mode)(chains[max(SIZES)], n))

        assert len(response.json()["results"]) == n
        assert response.json()["mode"] == mode  # not degraded: the vector side ran


# --- the counts -----------------------------------------------------------------------------------

# Statements per request: the first (the agent's last use recorded, the references'
# mentions extracted, its selections inserted) and the same request again (nothing to
# extract, the selections updated). Inside a test's transaction, so a write's atomic
# block counts a SAVEPOINT and a RELEASE. Before the batching (issue 11), for 2 references
# and for 8: enrich (36, 25) and (90, 67), instructions (32, 25) and (80, 73), for a rag
# agent (28, 21) and (64, 57), select (34, 25) and (118, 85). The approvals gate (issue 12)
# asks one statement per call, whatever the references: 5 more for enrich, 4 for
# instructions, 1 for select. Enrich's semantic pass asks which sources are withheld
# before it scores any (issue 20: what the profiles hold must not show): 1 more. BM25 over
# packed blocks (issue 21) reads the terms' blocks, then the ranked chunks' documents and
# sources in a second statement (the walk joined them in one): 1 more for a search. The
# HNSW scan sends its settings with its statement, in no transaction of its own (issue
# 21): 3 fewer for a hybrid search (the SAVEPOINT, the settings, the RELEASE). A
# vector search reads its hits' rows and the BM25 scores they lack in one statement: 8
# before, 7 now. Each hit carries the approval that let it through (the gate asked about
# the hits' sources) and the search is stored as a trace with the passages it served: 3
# more for every search.
PINNED = {"enrich": (28, 21), "instructions": (23, 16), "instructions-rag": (23, 16), "select": (9, 8),
          "search-hybrid": (12, 11), "search-bm25": (11, 10), "search-vector": (10, 9)}


@pytest.mark.parametrize("name", PINNED)
def test_query_count_is_pinned_and_the_same_for_2_references_as_for_8(chains, name):
    counts = {}
    for n in SIZES:
        request = SCENARIOS[name](_catalog(chains, name, n), n)
        counts[n] = (counted(request)[0], counted(request)[0])

    assert counts == {n: PINNED[name] for n in SIZES}
