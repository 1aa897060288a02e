"""A catalog's ranking settings: checked, audited, shown and edited on its page, and
what its search ranks with. BM25 under a catalog's k1 and b is still rank_bm25's
exact scores and order (with those k1 and b); a catalog's fusion settings are the ones
hybrid fuses with; a search naming no mode runs the catalog's."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from rank_bm25 import BM25Okapi

from catalog.analysis import analyze
from catalog.audit.log import Action
from catalog.catalogs import catalog_ranking_update
from catalog.models import AuditEntry, Catalog, Chunk, Term
from catalog.ranking import NORMALISATIONS, RankingSettings, ranking_problems
from retrieval.search import fusion
from retrieval.search.selectors import SearchOptions, chunk_ranking, chunk_search
from tests.factories import import_documents
from tests.retrieval.test_bm25_exact import corpus_documents

QUERIES = ["cache retry", "mango kiwi", "platform cache cache", "vector lexical fusion ranking", "zebra"]


@pytest.fixture
def corpus(make_catalog):
    catalog = make_catalog("tuned", chunk_size=200, chunk_overlap=30)
    import_documents(catalog=catalog, slug="corpus", documents=corpus_documents())
    catalog.refresh_from_db()
    return catalog


def _ranking_audits(catalog: Catalog) -> list[AuditEntry]:
    return list(AuditEntry.objects.filter(action=Action.RANKING_CHANGED, payload__catalog=catalog.slug)
                .order_by("seq"))


# --- the settings, checked and audited --------------------------------------------------------


def test_defaults_are_the_constants_every_catalog_ranked_with_and_store_as_nothing():
    settings = RankingSettings()
    assert (settings.mode, settings.fusion, settings.rrf_k, settings.k1, settings.b, settings.fusion_depth) == \
        ("hybrid", "rrf", fusion.RRF_K, 1.2, 0.75, 100)
    assert settings.stored() == {}
    assert set(NORMALISATIONS) == set(fusion.NORMALISERS)
    assert RankingSettings.from_stored({"k1": 0.9, "from_a_later_version": 1}) == RankingSettings(k1=0.9)


@pytest.mark.parametrize(("values", "field"), [
    ({"k1": -0.1}, "k1"), ({"b": 1.5}, "b"), ({"rrf_k": 0}, "rrf_k"), ({"rrf_k": 2.5}, "rrf_k"),
    ({"fusion_depth": 5000}, "fusion_depth"), ({"mode": "fuzzy"}, "mode"), ({"fusion": "max"}, "fusion"),
    ({"normalization": "l2"}, "normalization"), ({"k1": "1.2"}, "k1"), ({"b": True}, "b"),
    ({"semantic_margin": 2}, "semantic_margin"), ({"shiny": 1}, "shiny"), ({"k1": None}, "k1"),
])
def test_a_bad_setting_is_named_and_changes_nothing(corpus, cora, values, field):
    with pytest.raises(ValidationError) as refused:
        catalog_ranking_update(catalog=corpus, values=values, by=cora)
    assert field in refused.value.message_dict
    corpus.refresh_from_db()
    assert corpus.ranking == {} and _ranking_audits(corpus) == []


def test_both_weights_zero_is_refused_even_when_one_was_zero_before(corpus, cora):
    catalog_ranking_update(catalog=corpus, values={"vector_weight": 0.0}, by=cora)
    with pytest.raises(ValidationError):
        catalog_ranking_update(catalog=corpus, values={"bm25_weight": 0.0}, by=cora)
    corpus.refresh_from_db()
    assert corpus.ranking_settings.bm25_weight == 1.0
    assert ranking_problems({"bm25_weight": 0.0, "vector_weight": 0.0}) == {
        "vector_weight": "At least one weight must be positive."}


def test_a_change_is_stored_as_its_difference_and_audited_with_who_and_what(corpus, cora):
    changed = catalog_ranking_update(catalog=corpus, values={"k1": 0.9, "b": 0.75, "rrf_k": 20}, by=cora)
    assert changed == {"k1": [1.2, 0.9], "rrf_k": [60, 20]}
    corpus.refresh_from_db()
    assert corpus.ranking == {"k1": 0.9, "rrf_k": 20}
    [entry] = _ranking_audits(corpus)
    assert (entry.actor_name, entry.payload) == ("cora", {"catalog": "tuned", "changed": changed})

    # Setting back to the default stores nothing; saving the same values audits nothing
    catalog_ranking_update(catalog=corpus, values={"k1": 1.2, "rrf_k": 60}, by=cora)
    catalog_ranking_update(catalog=corpus, values={"k1": 1.2}, by=cora)
    corpus.refresh_from_db()
    assert corpus.ranking == {} and len(_ranking_audits(corpus)) == 2


# --- what search ranks with -------------------------------------------------------------------


@pytest.mark.parametrize(("k1", "b"), [(0.5, 0.3), (2.0, 0.95), (1.2, 0.0)])
def test_bm25_under_a_catalogs_k1_and_b_is_rank_bm25s_with_them(corpus, cora, k1, b):
    # (b 1 is allowed, but rank_bm25 divides by the empty chunk's length then: no reference)
    catalog_ranking_update(catalog=corpus, values={"k1": k1, "b": b}, by=cora)
    corpus.refresh_from_db()
    chunks = list(Chunk.objects.filter(catalog=corpus).order_by("pk"))
    okapi = BM25Okapi([analyze(c.indexed_text) for c in chunks], k1=k1, b=b)
    for query in QUERIES:
        expected = dict(zip([c.pk for c in chunks], okapi.get_scores(analyze(query)).tolist(), strict=True))
        hits = chunk_search(catalog=corpus, query=query, options=SearchOptions(mode="bm25", top_k=60)).hits
        assert hits, query
        for hit in hits:
            assert hit.scores["bm25"] == pytest.approx(expected[hit.chunk_pk], abs=1e-6), query
        # The best chunks in order: equal scores (to rounding) may come in either order
        best = sorted((score for score in expected.values() if score > 0), reverse=True)[: len(hits)]
        assert [expected[hit.chunk_pk] for hit in hits] == pytest.approx(best, abs=1e-6), query


def test_the_default_k1_and_b_differ_from_a_catalogs_own(corpus, cora):
    before = chunk_search(catalog=corpus, query="cache retry", options=SearchOptions(mode="bm25")).hits
    catalog_ranking_update(catalog=corpus, values={"k1": 0.3, "b": 0.1}, by=cora)
    corpus.refresh_from_db()
    after = chunk_search(catalog=corpus, query="cache retry", options=SearchOptions(mode="bm25")).hits
    assert [h.scores["bm25"] for h in before] != [h.scores["bm25"] for h in after]


def test_hybrid_fuses_with_the_catalogs_rrf_k_weights_and_depth(corpus, cora):
    catalog_ranking_update(catalog=corpus, values={"rrf_k": 7, "vector_weight": 2.5, "fusion_depth": 12}, by=cora)
    corpus.refresh_from_db()
    for query in QUERIES:
        ranking = chunk_ranking(catalog=corpus, query=query, options=SearchOptions(top_k=3))
        assert (ranking.options.mode, ranking.options.rrf_k, ranking.depth) == ("hybrid", 7, 12)
        expected = fusion.rrf({name: [(row.chunk, row.score) for row in rows] for name, rows in ranking.lists.items()},
                              k=7, weights={"bm25": 1.0, "vector": 2.5})
        assert ranking.fused == expected
        assert all(len(rows) <= 12 for rows in ranking.lists.values())


def test_convex_weights_are_divided_by_their_sum(corpus, cora):
    catalog_ranking_update(catalog=corpus, values={"fusion": "convex", "bm25_weight": 3.0, "vector_weight": 1.0},
                           by=cora)
    corpus.refresh_from_db()
    ranking = chunk_ranking(catalog=corpus, query="cache retry backoff", options=SearchOptions(top_k=5))
    rankings = {name: [(row.chunk, row.score) for row in rows] for name, rows in ranking.lists.items()}
    assert ranking.fused == fusion.convex(rankings, weights={"bm25": 0.75, "vector": 0.25})
    assert max(score for _, score in ranking.fused) <= 1.0 + 1e-9


def test_a_request_naming_one_weight_keeps_the_catalogs_other(corpus, cora):
    catalog_ranking_update(catalog=corpus, values={"fusion": "convex", "bm25_weight": 3.0, "vector_weight": 1.0},
                           by=cora)
    corpus.refresh_from_db()
    ranking = chunk_ranking(catalog=corpus, query="cache retry backoff",
                            options=SearchOptions(top_k=5, weights={"vector": 3.0}))
    assert ranking.options.weights == {"bm25": 3.0, "vector": 3.0}
    rankings = {name: [(row.chunk, row.score) for row in rows] for name, rows in ranking.lists.items()}
    assert ranking.fused == fusion.convex(rankings, weights={"bm25": 0.5, "vector": 0.5})


def test_a_search_naming_no_mode_runs_the_catalogs_and_one_naming_it_runs_its_own(corpus, cora):
    catalog_ranking_update(catalog=corpus, values={"mode": "bm25"}, by=cora)
    corpus.refresh_from_db()
    assert chunk_search(catalog=corpus, query="cache", options=SearchOptions()).mode == "bm25"
    assert chunk_search(catalog=corpus, query="cache", options=SearchOptions(mode="vector")).mode == "vector"


def test_the_search_api_runs_the_catalogs_mode_when_the_request_names_none(corpus, cora, agent_token):
    from rest_framework.test import APIClient

    catalog_ranking_update(catalog=corpus, values={"mode": "bm25"}, by=cora)
    client, token = APIClient(), agent_token("tuner", [corpus])
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    body = client.post("/api/v1/search", {"catalog": "tuned", "query": "cache retry"}, format="json").json()
    assert body["mode"] == "bm25" and all(hit["scores"]["vector"] is None for hit in body["results"])
    body = client.post("/api/v1/search", {"catalog": "tuned", "query": "cache retry", "mode": "hybrid"},
                       format="json").json()
    assert body["mode"] == "hybrid"


# --- the catalog page ---------------------------------------------------------------------------


def test_the_catalog_page_shows_the_settings_and_a_curator_edits_them(corpus, cora, client_for):
    client = client_for(cora)
    page = client.get("/catalogs/tuned/").content.decode()
    assert "Ranking" in page and "rrf, k 60" in page and "The defaults" in page

    form = client.get("/catalogs/tuned/ranking").content.decode()
    assert 'name="k1"' in form and 'value="1.2"' in form
    posted = {**RankingSettings().__dict__, "k1": "0.9", "rrf_k": "30", "semantic_threshold": "",
              "semantic_margin": "0.05"}
    response = client.post("/catalogs/tuned/ranking", posted)
    assert response.status_code == 302
    corpus.refresh_from_db()
    assert corpus.ranking == {"k1": 0.9, "rrf_k": 30, "semantic_margin": 0.05}
    [entry] = _ranking_audits(corpus)
    assert entry.payload["changed"]["semantic_margin"] == [None, 0.05]
    page = client.get("/catalogs/tuned/").content.decode()
    assert "rrf, k 30" in page and "k1, rrf_k, semantic_margin" in page


def test_a_bad_value_on_the_page_is_shown_beside_its_field_and_saves_nothing(corpus, cora, client_for):
    client = client_for(cora)
    posted = {**RankingSettings().__dict__, "b": "1.7", "semantic_threshold": "", "semantic_margin": ""}
    response = client.post("/catalogs/tuned/ranking", posted, HTTP_HX_REQUEST="true")
    assert response.status_code == 400
    assert "Not saved" in response.content.decode() and "1" in response.content.decode()
    corpus.refresh_from_db()
    assert corpus.ranking == {} and _ranking_audits(corpus) == []


def test_a_viewer_may_not_edit_the_ranking(corpus, client_for):
    from tests.factories import person

    viewer = person("vic", "reviewer")
    assert client_for(viewer).post("/catalogs/tuned/ranking", {"k1": "0.5"}).status_code in (403, 404)
    corpus.refresh_from_db()
    assert corpus.ranking == {}


# --- vector feedback ------------------------------------------------------------------------------


def test_vector_feedback_moves_the_query_toward_the_best_hits_the_caller_may_be_shown(corpus, cora):
    from catalog.models import ReferenceSource
    from catalog.sources.documents import DocumentInput
    from retrieval.search.vector import feedback_vector, vector_scores_for

    text = "Cache retry backoff. Cache retry backoff jitter."
    governed = import_documents(catalog=corpus, slug="governed", documents=[
        DocumentInput("near.md", "Near", text, len(text))])
    ReferenceSource.objects.filter(pk=governed.pk).update(requires_approval=True)  # withheld from a person
    held = set(Chunk.objects.filter(source=governed).values_list("pk", flat=True))
    catalog_ranking_update(catalog=corpus, values={"vector_feedback": 3, "feedback_weight": 0.5}, by=cora)
    corpus.refresh_from_db()

    first = chunk_ranking(catalog=corpus, query="cache retry backoff",
                          options=SearchOptions(mode="vector", top_k=10, vector_feedback=0))
    moved = chunk_ranking(catalog=corpus, query="cache retry backoff", options=SearchOptions(mode="vector", top_k=10))
    assert held and not held & {row.chunk for row in first.lists["vector"]}
    assert moved.vector == feedback_vector(catalog=corpus, vector=first.vector or "",
                                           rows=first.lists["vector"][:3], weight=0.5) != first.vector
    similarity = vector_scores_for(catalog=corpus, vector=moved.vector or "",
                                   chunk_pks=[row.chunk for row in moved.lists["vector"]])
    assert [row.score for row in moved.lists["vector"]] == pytest.approx(
        [similarity[row.chunk] for row in moved.lists["vector"]], abs=1e-6)
    assert not held & {row.chunk for row in moved.lists["vector"]}
    hits = chunk_search(catalog=corpus, query="cache retry backoff", options=SearchOptions(mode="vector")).hits
    assert [hit.chunk_pk for hit in hits] == [row.chunk for row in moved.lists["vector"]][: len(hits)]


def test_with_feedback_a_hits_score_does_not_depend_on_how_many_hits_were_asked(corpus, cora):
    catalog_ranking_update(catalog=corpus, values={"vector_feedback": 3}, by=cora)
    corpus.refresh_from_db()
    for query in QUERIES:
        one = chunk_search(catalog=corpus, query=query, options=SearchOptions(mode="vector", top_k=1)).hits
        ten = chunk_search(catalog=corpus, query=query, options=SearchOptions(mode="vector", top_k=10)).hits
        assert [(h.chunk_pk, round(h.score, 6)) for h in one] == [(h.chunk_pk, round(h.score, 6)) for h in ten[:1]]


def test_the_api_names_an_unknown_setting_and_changes_nothing(corpus, cora):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(cora)
    response = client.patch("/api/v1/catalogs/tuned/ranking", {"k_1": 0.9, "b": 0.5}, format="json")
    assert response.status_code == 400 and "k_1" in response.json()["error"]["details"]["fields"]
    corpus.refresh_from_db()
    assert corpus.ranking == {}
    response = client.patch("/api/v1/catalogs/tuned/ranking", {"b": 0.5}, format="json")
    assert response.status_code == 200 and response.json()["changed"] == ["b"]


def test_a_stale_ranking_form_does_not_revert_another_curators_change(corpus, cora, client_for):
    from catalog.catalogs import ranking_stamp

    client = client_for(cora)
    form = client.get("/catalogs/tuned/ranking").content.decode()
    stamp = ranking_stamp(corpus)
    assert f'value="{stamp}"' in form
    catalog_ranking_update(catalog=corpus, values={"k1": 0.9}, by=cora)  # another curator, meanwhile
    posted = {**RankingSettings().__dict__, "rrf_k": "30", "semantic_threshold": "", "semantic_margin": "",
              "seen": stamp}  # the old form still says k1 1.2

    response = client.post("/catalogs/tuned/ranking", posted, HTTP_HX_REQUEST="true")

    assert response.status_code == 400 and "was saved since this form was opened" in response.content.decode()
    corpus.refresh_from_db()
    assert corpus.ranking == {"k1": 0.9}
    response = client.post("/catalogs/tuned/ranking", {**posted, "k1": "0.9", "seen": ranking_stamp(corpus)})
    assert response.status_code == 302
    corpus.refresh_from_db()
    assert corpus.ranking == {"k1": 0.9, "rrf_k": 30}


# --- BM25 feedback (RM3) --------------------------------------------------------------------------


def test_the_relevance_model_weighs_each_hits_typical_terms_by_its_score():
    from retrieval.search.bm25 import FeedbackChunk, relevance_model

    chunks = [FeedbackChunk(3.0, [1, 2, 3], [2, 1, 1], 4), FeedbackChunk(1.0, [2, 4], [1, 1], 2),
              FeedbackChunk(0.0, [5], [9], 9)]  # a hit scoring 0 says nothing
    # chunk 1: 1 -> .5, 2 -> .25, 3 -> .25 (the best 2 kept, the tie to the lower id: 1, 2;
    # summed to 1: 2/3, 1/3), times its score 3: 1 -> 2, 2 -> 1; chunk 2: 2 -> .5, 4 -> .5,
    # times 1. Summed: 1 -> 2, 2 -> 1.5, 4 -> .5; the best 2, summed to 1.
    assert relevance_model(chunks, 2, lambda term: True) == pytest.approx({1: 4 / 7, 2: 3 / 7})
    # without term 1: 2 -> 1.5 + .5, 3 -> 1.5, 4 -> .5
    assert relevance_model(chunks, 2, lambda term: term != 1) == pytest.approx({2: 4 / 7, 3: 3 / 7})
    assert relevance_model([], 10, lambda term: True) == {}


def test_bm25_feedback_at_weight_zero_ranks_as_the_query_alone(corpus, cora):
    for query in QUERIES:
        plain = chunk_ranking(catalog=corpus, query=query, options=SearchOptions(mode="bm25", top_k=20))
        zero = chunk_ranking(catalog=corpus, query=query, options=SearchOptions(
            mode="bm25", top_k=20, bm25_feedback=3, bm25_feedback_weight=0.0))
        assert [row.chunk for row in zero.lists["bm25"]] == [row.chunk for row in plain.lists["bm25"]], query
        assert [row.score for row in zero.lists["bm25"]] == pytest.approx(
            [row.score for row in plain.lists["bm25"]], abs=1e-6)


def test_bm25_feedback_expands_the_query_from_the_best_hits_the_caller_may_be_shown(corpus, cora):
    from catalog.models import ReferenceSource, Term
    from catalog.sources.documents import DocumentInput
    from retrieval.search.lexical import bm25_scores

    text = "Cache retry backoff. Cache retry backoff zeppelin quokka."  # the best hit, were it not withheld
    governed = import_documents(catalog=corpus, slug="governed", documents=[
        DocumentInput("near.md", "Near", text, len(text))])
    ReferenceSource.objects.filter(pk=governed.pk).update(requires_approval=True)
    corpus.refresh_from_db()
    held_terms = set(Term.objects.filter(catalog=corpus, text__in=["zeppelin", "quokka"]).values_list("pk", flat=True))
    catalog_ranking_update(catalog=corpus, values={"bm25_feedback": 3}, by=cora)
    corpus.refresh_from_db()

    plain = chunk_ranking(catalog=corpus, query="cache retry backoff",
                          options=SearchOptions(mode="bm25", top_k=10, bm25_feedback=0))
    expanded = chunk_ranking(catalog=corpus, query="cache retry backoff", options=SearchOptions(mode="bm25", top_k=10))
    own = {term.term_id for term in plain.terms}
    added = {term.term_id for term in expanded.terms} - own
    assert len(held_terms) == 2 and added and not added & held_terms
    assert all(term.repeats == 0 for term in expanded.terms if term.term_id in added)
    assert all(term.repeats >= 1 for term in expanded.terms if term.term_id in own)
    assert expanded.query_terms == plain.terms  # what a withheld source is matched by
    # the added terms are those of the first hits (the allowed ones): each is held by one of them
    first = [row.chunk for row in plain.lists["bm25"][:3]]
    holders = set(Chunk.objects.filter(pk__in=first, postings__terms__overlap=list(added)).values_list("pk", flat=True))
    assert holders
    # the list is ranked by the expanded query: each score is its BM25 score over those terms
    scores = bm25_scores(corpus, expanded.terms, [row.chunk for row in expanded.lists["bm25"]])
    assert [row.score for row in expanded.lists["bm25"]] == pytest.approx(
        [scores[row.chunk] for row in expanded.lists["bm25"]], abs=1e-6)
    assert expanded.lists["bm25"] != plain.lists["bm25"]
    hits = chunk_search(catalog=corpus, query="cache retry backoff", options=SearchOptions(mode="bm25")).hits
    assert [hit.chunk_pk for hit in hits] == [row.chunk for row in expanded.lists["bm25"]][: len(hits)]
    assert not {hit.source for hit in hits} & {"governed"}


def test_the_catalog_page_and_api_show_and_set_bm25_feedback(corpus, cora, client_for):
    client = client_for(cora)
    posted = {**RankingSettings().__dict__, "bm25_feedback": "10", "bm25_feedback_terms": "12",
              "semantic_threshold": "", "semantic_margin": ""}
    assert client.post("/catalogs/tuned/ranking", posted).status_code == 302
    corpus.refresh_from_db()
    assert corpus.ranking == {"bm25_feedback": 10, "bm25_feedback_terms": 12}
    assert "12 terms from the best 10 chunks, weight 0.5" in client.get("/catalogs/tuned/").content.decode()
    body = client.get("/api/v1/catalogs/tuned/ranking").json()
    assert body["settings"]["bm25_feedback"] == 10 and body["settings"]["bm25_feedback_weight"] == 0.5
    refused = client.patch("/api/v1/catalogs/tuned/ranking", {"bm25_feedback_weight": 1.5},
                           content_type="application/json")
    assert refused.status_code == 400 and "bm25_feedback_weight" in refused.content.decode()


def test_a_withheld_source_is_matched_by_the_querys_own_terms_not_feedbacks(corpus, cora, monkeypatch):
    from catalog.models import ReferenceSource
    from catalog.sources.documents import DocumentInput
    from retrieval.search import selectors

    catalog_ranking_update(catalog=corpus, values={"bm25_feedback": 3}, by=cora)
    corpus.refresh_from_db()
    expanded = chunk_ranking(catalog=corpus, query="cache retry backoff", options=SearchOptions(mode="bm25"))
    added = {term.term_id for term in expanded.terms} - {term.term_id for term in expanded.query_terms}
    text = " ".join(Term.objects.filter(pk__in=added).values_list("text", flat=True))  # stems, as words
    governed = import_documents(catalog=corpus, slug="governed", documents=[
        DocumentInput("only-feedback.md", "Only feedback", text, len(text))])
    ReferenceSource.objects.filter(pk=governed.pk).update(requires_approval=True)
    corpus.refresh_from_db()
    asked: list[set[int]] = []
    real = selectors.withheld_hits

    def recorded(catalog, withheld, terms, **kwargs):
        asked.append({term.term_id for term in terms})
        return real(catalog, withheld, terms, **kwargs)

    monkeypatch.setattr(selectors, "withheld_hits", recorded)
    chunk_search(catalog=corpus, query="cache retry backoff", options=SearchOptions(mode="bm25"))
    own = {term.term_id for term in expanded.query_terms}
    assert asked == [own] and not own & added


def test_bm25_feedback_at_weight_one_adds_no_chunk_scoring_zero(corpus, cora):
    for query in QUERIES:
        ranking = chunk_ranking(catalog=corpus, query=query, options=SearchOptions(
            mode="bm25", top_k=50, bm25_feedback=3, bm25_feedback_weight=1.0))
        assert all(row.score > 0 for row in ranking.lists["bm25"]), query
        assert all(term.weight > 0 for term in ranking.terms), query
