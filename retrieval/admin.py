from django.contrib import admin

from retrieval.models import Agent


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    """Tokens are created with `manage.py create_agent` (shown once); here only the
    scope and the active flag are edited."""

    list_display = ["name", "token_hint", "is_active", "created_at", "last_used_at"]
    filter_horizontal = ["catalogs"]
    readonly_fields = ["token_hint", "created_at", "last_used_at"]

    def has_add_permission(self, request) -> bool:
        return False
