from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from retrieval.models import EvaluationRun, EvaluationSet, Selection, Trace


@admin.register(Trace)
class TraceAdmin(admin.ModelAdmin[Trace]):
    """Why each enrichment injected, hinted or withheld what it did (read-only)."""

    list_display = ["created_at", "caller", "surface", "hint_count", "took_ms", "degraded"]
    list_filter = ["surface", "agent"]
    search_fields = ["id", "caller", "text"]
    readonly_fields = ["id", "agent", "caller", "surface", "text", "steps", "hints", "degraded", "took_ms",
                       "created_at"]

    @admin.display(description="hints")
    def hint_count(self, trace: Trace) -> int:
        return len(trace.hints)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Trace | None = None) -> bool:
        return False


@admin.register(Selection)
class SelectionAdmin(admin.ModelAdmin[Selection]):
    list_display = ["agent", "source", "via", "updated_at"]
    list_filter = ["via", "agent"]
    readonly_fields = ["agent", "source", "via", "fingerprint", "trace", "created_at", "updated_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(EvaluationSet)
class EvaluationSetAdmin(admin.ModelAdmin[EvaluationSet]):
    """Stored test sets (made on the evaluation page or the API); read-only here. A set
    some run used cannot be deleted while that run is kept."""

    list_display = ["name", "query_count", "judgement_count", "unjudged_count", "created_by", "created_at"]
    search_fields = ["name"]
    readonly_fields = ["name", "description", "query_count", "judgement_count", "unjudged_count", "created_by",
                       "created_at"]
    exclude = ["queries", "qrels"]  # thousands of lines: the counts say enough here

    def get_queryset(self, request: HttpRequest) -> QuerySet[EvaluationSet]:
        return super().get_queryset(request).defer("queries", "qrels")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: EvaluationSet | None = None) -> bool:
        return False


@admin.register(EvaluationRun)
class EvaluationRunAdmin(admin.ModelAdmin[EvaluationRun]):
    """Evaluation runs (read-only; the dashboard shows them whole)."""

    list_display = ["id", "catalog", "query_set", "modes", "status", "progress", "created_by", "created_at"]
    list_filter = ["status", "catalog"]
    readonly_fields = ["catalog", "query_set", "modes", "top_k", "status", "stage", "progress", "queries_done",
                       "queries_total", "metrics", "withheld", "judged_documents", "missing_documents", "error",
                       "created_by", "created_at", "started_at", "finished_at"]
    list_select_related = ["catalog", "query_set"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[EvaluationRun]:
        return super().get_queryset(request).defer("query_set__queries", "query_set__qrels")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: EvaluationRun | None = None) -> bool:
        return False
