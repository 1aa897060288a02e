from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import ForeignKey
from django.http import HttpRequest

from catalog.agents import agent_changes_audit, agent_snapshot, preselected_outside
from catalog.models import Agent, Catalog, Chunk, Document, IndexRun, ReferenceSource, Tag, UploadedFile
from catalog.sources.editing import source_changed_by, upload_put
from catalog.web import person_or_none


@admin.register(Catalog)
class CatalogAdmin(admin.ModelAdmin[Catalog]):
    list_display = ["slug", "name", "chunk_count", "term_count", "embedding_model", "updated_at"]
    search_fields = ["slug", "name"]
    readonly_fields = ["chunk_count", "token_total", "term_count", "idf_sum", "created_at", "updated_at"]
    prepopulated_fields = {"slug": ["name"]}


@admin.register(Tag)
class TagAdmin(admin.ModelAdmin[Tag]):
    list_display = ["name", "key"]
    search_fields = ["name", "key"]

    def save_model(self, request: HttpRequest, obj: Tag, form: forms.ModelForm[Tag], change: bool) -> None:
        obj.full_clean()
        super().save_model(request, obj, form, change)


@admin.register(ReferenceSource)
class ReferenceSourceAdmin(admin.ModelAdmin[ReferenceSource]):
    list_display = ["slug", "catalog", "name", "mode", "kind", "status", "requires_approval", "indexed_at"]
    list_filter = ["catalog", "mode", "kind", "status", "requires_approval"]
    search_fields = ["slug", "name", "description"]
    filter_horizontal = ["tags"]
    readonly_fields = ["fingerprint", "status", "last_error", "indexed_at", "changed_by", "content_edits", "created_at",
                       "updated_at", "secret_hint", "sync"]
    # A git source's sealed token or key is set and removed in the dashboard or the API
    # only: never shown, not even sealed.
    exclude = ["secret_sealed"]

    def save_model(self, request: HttpRequest, obj: ReferenceSource, form: forms.ModelForm[ReferenceSource],
                   change: bool) -> None:
        super().save_model(request, obj, form, change)
        if form.changed_data:  # who changed it: four eyes bars them from approving it
            source_changed_by(source=obj, by=person_or_none(request.user), fields=form.changed_data)


@admin.register(Document)
class DocumentAdmin(admin.ModelAdmin[Document]):
    list_display = ["path", "source", "title", "size", "content_sha256"]
    list_filter = ["source__catalog"]
    search_fields = ["path", "title"]
    list_select_related = ["source__catalog"]
    readonly_fields = ["catalog", "source", "path", "title", "text", "content_sha256", "size", "mtime", "created_at"]


@admin.register(Chunk)
class ChunkAdmin(admin.ModelAdmin[Chunk]):
    list_display = ["key", "ordinal", "byte_offset", "token_count"]
    list_filter = ["catalog"]
    search_fields = ["key"]
    exclude = ["embedding"]
    readonly_fields = ["key", "catalog", "source", "document", "ordinal", "byte_offset", "content", "token_count"]


@admin.register(IndexRun)
class IndexRunAdmin(admin.ModelAdmin[IndexRun]):
    list_display = ["pk", "source", "trigger", "full", "status", "stage", "progress", "created_at", "finished_at"]
    list_filter = ["status", "trigger", "catalog"]
    list_select_related = ["source__catalog"]
    readonly_fields = [f.name for f in IndexRun._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(UploadedFile)
class UploadedFileAdmin(admin.ModelAdmin[UploadedFile]):
    """Editing a file here moves its source's fingerprint: the next scan reindexes it."""

    list_display = ["path", "source", "title", "size", "updated_at"]
    list_filter = ["source__catalog"]
    search_fields = ["path", "title"]
    readonly_fields = ["sha256", "size", "updated_at"]

    def formfield_for_foreignkey(self, db_field: ForeignKey[Any, Any], request: HttpRequest,
                                 **kwargs: Any) -> forms.ModelChoiceField[Any] | None:
        if db_field.name == "source":
            kwargs["queryset"] = ReferenceSource.objects.filter(kind=ReferenceSource.Kind.UPLOAD)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def save_model(self, request: HttpRequest, obj: UploadedFile, form: forms.ModelForm[UploadedFile],
                   change: bool) -> None:
        upload_put(source=obj.source, path=obj.path, title=obj.title, text=obj.text, by=person_or_none(request.user))


class AgentAdminForm(forms.ModelForm[Agent]):
    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        outside = preselected_outside(data.get("catalogs") or [], data.get("preselected") or [])
        if outside:
            self.add_error("preselected", f"Pinned references must be in the agent's catalogs: {', '.join(outside)}.")
        return data


BEFORE = "_lectern_agent_before"


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin[Agent]):
    """Tokens are issued and revoked on the dashboard's agent pages or with `manage.py
    create_agent` (shown once); here the scope, the profile and the active flag are
    edited, and each change is announced for the audit log as the pages' are."""

    form = AgentAdminForm
    list_display = ["name", "token_hint", "strategy", "token_budget", "is_active", "created_at", "last_used_at"]
    list_filter = ["strategy", "is_active", "is_curator"]
    filter_horizontal = ["catalogs", "preselected"]
    readonly_fields = ["token_hint", "created_at", "last_used_at"]
    fieldsets = [
        (None, {"fields": ["name", "token_hint", "is_active", "is_curator", "catalogs", "created_at",
                           "last_used_at"]}),
        ("Profile", {"fields": ["strategy", "preselected", "token_budget", "default_top_k"]}),
        ("Detection", {"fields": ["semantic_threshold", "semantic_margin", "max_hints"]}),
        ("Conversations", {"fields": ["rag_relevance_threshold", "rag_max_results"]}),
    ]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: Agent, form: forms.ModelForm[Agent], change: bool) -> None:
        if change:  # the stored settings, before this save (the pins are saved after, in save_related)
            setattr(request, BEFORE, agent_snapshot(Agent.objects.get(pk=obj.pk)))
        super().save_model(request, obj, form, change)

    def save_related(self, request: HttpRequest, form: forms.ModelForm[Agent], formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        before = getattr(request, BEFORE, None)
        if before is not None:
            agent_changes_audit(agent=form.instance, before=before, by=person_or_none(request.user))
