from django.urls import path

from retrieval import apis, enrich_apis, evaluation_apis, memory_apis, status_apis

urlpatterns = [
    path("search", apis.SearchApi.as_view(), name="api-search"),
    path("search/conversation", apis.ConversationSearchApi.as_view(), name="api-search-conversation"),
    path("catalogs", apis.CatalogListApi.as_view(), name="api-catalogs"),
    path("status", status_apis.StatusApi.as_view(), name="api-status"),
    path("status/reset", status_apis.StatusResetApi.as_view(), name="api-status-reset"),
    path("enrich", enrich_apis.EnrichApi.as_view(), name="api-enrich"),
    path("enrich/conversation", enrich_apis.EnrichConversationApi.as_view(), name="api-enrich-conversation"),
    path("references", enrich_apis.ReferenceListApi.as_view(), name="api-references"),
    path("references/select", enrich_apis.ReferenceSelectApi.as_view(), name="api-references-select"),
    path("references/<slug:catalog>/<slug:source_id>/file", enrich_apis.ReferenceFileApi.as_view(),
         name="api-reference-file"),
    path("traces/<uuid:trace_id>", enrich_apis.TraceApi.as_view(), name="api-trace"),
    path("evaluations", evaluation_apis.EvaluationsApi.as_view(), name="api-evaluations"),
    path("evaluations/<int:pk>", evaluation_apis.EvaluationApi.as_view(), name="api-evaluation"),
    path("facts", memory_apis.FactsApi.as_view(), name="api-facts"),
    path("memory", memory_apis.MemoryApi.as_view(), name="api-memory"),
    path("memory/export", memory_apis.MemoryExportApi.as_view(), name="api-memory-export"),
    path("agent/instructions", enrich_apis.InstructionsApi.as_view(), name="api-agent-instructions"),
]
