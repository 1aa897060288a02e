from django.contrib import admin
from django.http import HttpRequest

from retrieval.models import Selection, Trace


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
