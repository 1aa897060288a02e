"""Curator API for reindexing: request runs, watch them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog.models import IndexRun, ReferenceSource
from catalog.paths import upload_path_problem
from catalog.reindex import index_run_request
from catalog.services import SourceError, inline_set, upload_delete, upload_put
from config.api_errors import DomainError
from config.fields import StrictCharField
from retrieval.auth import get_catalog_for_caller, visible_catalogs
from retrieval.models import Agent


def _require_curator(caller) -> None:
    if isinstance(caller, Agent):
        allowed = caller.is_curator
    else:
        allowed = caller.is_staff or caller.groups.filter(name="curator").exists()
    if not allowed:
        raise PermissionDenied("Reindexing needs a curator token or a curator's session.")


class IndexRunSerializer(serializers.ModelSerializer):
    catalog = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    source = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = IndexRun
        fields = ["id", "catalog", "source", "trigger", "full", "status", "stage", "progress", "counts", "timings",
                  "error", "created_at", "started_at", "finished_at"]


class ReindexApi(APIView):
    """Queue a reindex of a catalog's sources (or one with ?source=); ?full=1 re-embeds all.

    A source that already has a queued or running run returns that run instead.
    """

    class QuerySerializer(serializers.Serializer):
        source = serializers.SlugField(required=False)
        full = serializers.BooleanField(required=False, default=False)

    @extend_schema(request=None, responses={202: IndexRunSerializer(many=True)}, operation_id="reindex_catalog",
                   parameters=[OpenApiParameter("source", str), OpenApiParameter("full", bool)])
    def post(self, request, slug: str):
        query = self.QuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        catalog = get_catalog_for_caller(request.user, slug)
        _require_curator(request.user)
        sources = catalog.sources.all()
        if "source" in query.validated_data:
            sources = sources.filter(slug=query.validated_data["source"])
            if not sources:
                raise Http404(f"Catalog {slug!r} has no source {query.validated_data['source']!r}.")
        trigger = IndexRun.Trigger.API if isinstance(request.user, Agent) else IndexRun.Trigger.UI
        runs = [index_run_request(source=s, trigger=trigger, full=query.validated_data["full"])[0] for s in sources]
        return Response({"runs": IndexRunSerializer(runs, many=True).data}, status=status.HTTP_202_ACCEPTED)


class IndexRunApi(APIView):
    """One index run: status, progress, counts, timings, error."""

    @extend_schema(responses=IndexRunSerializer, operation_id="get_index_run")
    def get(self, request, pk: int):
        run = IndexRun.objects.select_related("catalog", "source").filter(
            pk=pk, catalog__in=visible_catalogs(request.user)).first()
        if run is None:
            raise Http404(f"No index run {pk}.")
        return Response(IndexRunSerializer(run).data)


def _curated_source(request, slug: str, source_slug: str) -> ReferenceSource:
    catalog = get_catalog_for_caller(request.user, slug)
    _require_curator(request.user)
    source = catalog.sources.select_related("catalog").filter(slug=source_slug).first()
    if source is None:
        raise Http404(f"Catalog {slug!r} has no source {source_slug!r}.")
    return source


@contextmanager
def _source_errors_as_409() -> Iterator[None]:
    try:
        yield
    except SourceError as exc:
        raise DomainError(str(exc), code="wrong_source_kind", status_code=409) from None


def _queued(request, source: ReferenceSource) -> dict:
    trigger = IndexRun.Trigger.API if isinstance(request.user, Agent) else IndexRun.Trigger.UI
    run, _ = index_run_request(source=source, trigger=trigger)
    return IndexRunSerializer(run).data


class SourceContentApi(APIView):
    """Replace an inline source's text; a reindex run is queued (returned)."""

    @extend_schema_serializer(component_name="InlineContent")
    class InputSerializer(serializers.Serializer):
        content = StrictCharField(trim_whitespace=False)

    @extend_schema(request=InputSerializer, responses={202: dict}, operation_id="set_inline_content")
    def put(self, request, slug: str, source: str):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        target = _curated_source(request, slug, source)
        with _source_errors_as_409():
            inline_set(source=target, content=data.validated_data["content"])
        return Response({"source": target.slug, "run": _queued(request, target)}, status=status.HTTP_202_ACCEPTED)


class SourceFilesApi(APIView):
    """Add, replace (PUT) or remove (DELETE ?path=) one file of an upload source; a
    reindex run is queued (returned) and indexes only that file's change."""

    @extend_schema_serializer(component_name="UploadFile")
    class InputSerializer(serializers.Serializer):
        path = StrictCharField(max_length=1024, trim_whitespace=False,
                               help_text="Relative and normalised: see docs/api.md.")
        title = StrictCharField(max_length=500, required=False, default="", allow_blank=True)
        text = StrictCharField(trim_whitespace=False)

        def validate_path(self, value: str) -> str:
            if problem := upload_path_problem(value):
                raise serializers.ValidationError(problem)
            return value

    @extend_schema(request=InputSerializer, responses={202: dict}, operation_id="put_upload_file")
    def put(self, request, slug: str, source: str):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        target = _curated_source(request, slug, source)
        with _source_errors_as_409():
            upload_put(source=target, **data.validated_data)
        return Response({"source": target.slug, "path": data.validated_data["path"], "run": _queued(request, target)},
                        status=status.HTTP_202_ACCEPTED)

    @extend_schema(parameters=[OpenApiParameter("path", str, required=True)], responses={202: dict},
                   operation_id="delete_upload_file")
    def delete(self, request, slug: str, source: str):
        path = request.query_params.get("path", "")
        target = _curated_source(request, slug, source)
        if not upload_delete(source=target, path=path):
            raise Http404(f"Source {source!r} has no file {path!r}.")
        return Response({"source": target.slug, "path": path, "run": _queued(request, target)},
                        status=status.HTTP_202_ACCEPTED)
