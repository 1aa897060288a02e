"""The retrieval API under /api/v1/: each feature's REST views (its `apis` module)."""

from django.urls import path

from retrieval.citations import apis as citations
from retrieval.conversations import apis as conversations
from retrieval.enrichment import apis as enrichment
from retrieval.evaluation import apis as evaluation
from retrieval.evaluation import tuning_apis as tuning
from retrieval.explain import apis as explain
from retrieval.memory import apis as memory
from retrieval.search import apis as search
from retrieval.status import apis as status
from retrieval.traces import apis as traces

urlpatterns = [
    path("search", search.SearchApi.as_view(), name="api-search"),
    path("search/conversation", conversations.ConversationSearchApi.as_view(), name="api-search-conversation"),
    path("explain", explain.ExplainApi.as_view(), name="api-explain"),
    path("explain/enrichment", explain.EnrichmentExplainApi.as_view(), name="api-explain-enrichment"),
    path("catalogs", search.CatalogListApi.as_view(), name="api-catalogs"),
    path("status", status.StatusApi.as_view(), name="api-status"),
    path("status/reset", status.StatusResetApi.as_view(), name="api-status-reset"),
    path("enrich", enrichment.EnrichApi.as_view(), name="api-enrich"),
    path("enrich/conversation", conversations.EnrichConversationApi.as_view(), name="api-enrich-conversation"),
    path("references", enrichment.ReferenceListApi.as_view(), name="api-references"),
    path("references/select", enrichment.ReferenceSelectApi.as_view(), name="api-references-select"),
    path("references/<slug:catalog>/<slug:source_id>/file", enrichment.ReferenceFileApi.as_view(),
         name="api-reference-file"),
    path("traces/<uuid:trace_id>", traces.TraceApi.as_view(), name="api-trace"),
    path("cite", citations.CiteApi.as_view(), name="api-cite"),
    path("evaluations", evaluation.EvaluationsApi.as_view(), name="api-evaluations"),
    path("evaluations/<int:pk>", evaluation.EvaluationApi.as_view(), name="api-evaluation"),
    path("tuning-runs", tuning.TuningRunsApi.as_view(), name="api-tuning-runs"),
    path("tuning-runs/<int:pk>", tuning.TuningRunApi.as_view(), name="api-tuning-run"),
    path("tuning-runs/<int:pk>/apply", tuning.TuningApplyApi.as_view(), name="api-tuning-apply"),
    path("facts", memory.FactsApi.as_view(), name="api-facts"),
    path("memory", memory.MemoryApi.as_view(), name="api-memory"),
    path("memory/export", memory.MemoryExportApi.as_view(), name="api-memory-export"),
    path("agent/instructions", enrichment.InstructionsApi.as_view(), name="api-agent-instructions"),
]
