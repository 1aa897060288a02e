"""Curator API for reindexing: request runs, watch them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog.models import Catalog, IndexRun, ReferenceSource
from catalog.paths import upload_path_problem
from catalog.reindex import index_run_request
from catalog.services import SourceError, inline_set, upload_delete, upload_put
from config.api_errors import DomainError
from config.fields import StrictCharField
from retrieval.auth import RequestUser, get_catalog_for_caller, request_user, visible_catalogs
from retrieval.models import Agent


def _require_curator(caller: RequestUser) -> None:
    if isinstance(caller, Agent):
        allowed = caller.is_curator
    else:
        allowed = caller.is_staff or caller.groups.filter(name="curator").exists()
    if not allowed:
        raise PermissionDenied("Reindexing needs a curator token or a curator's session.")


class IndexRunSerializer(serializers.ModelSerializer[IndexRun]):
    catalog: serializers.SlugRelatedField[Catalog] = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    # A field named like Field.source, which the stubs declare on every serializer (DRF's
    # metaclass takes declared fields off the class, so there is no clash at run time).
    source: serializers.SlugRelatedField[ReferenceSource] = serializers.SlugRelatedField(  # type: ignore[assignment]
        slug_field="slug", read_only=True)

    class Meta:
        model = IndexRun
        fields = ["id", "catalog", "source", "trigger", "full", "status", "stage", "progress", "counts", "timings",
                  "error", "created_at", "started_at", "finished_at"]


class ReindexApi(APIView):
    """Queue a reindex of a catalog's sources (or one with ?source=); ?full=1 re-embeds all.

    A source that already has a queued or running run returns that run instead.
    """

    class QuerySerializer(serializers.Serializer[None]):
        source = serializers.SlugField(required=False)  # type: ignore[assignment]  # named like Field.source, as above
        full = serializers.BooleanField(required=False, default=False)

    @extend_schema(request=None, responses={202: IndexRunSerializer(many=True)}, operation_id="reindex_catalog",
                   parameters=[OpenApiParameter("source", str), OpenApiParameter("full", bool)])
    def post(self, request: Request, slug: str) -> Response:
        query = self.QuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        catalog = get_catalog_for_caller(request_user(request), slug)
        _require_curator(request_user(request))
        sources = catalog.sources.all()
        if "source" in query.validated_data:
            sources = sources.filter(slug=query.validated_data["source"])
            if not sources:
                raise Http404(f"Catalog {slug!r} has no source {query.validated_data['source']!r}.")
        trigger = _trigger(request)
        runs = [index_run_request(source=s, trigger=trigger, full=query.validated_data["full"])[0] for s in sources]
        return Response({"runs": IndexRunSerializer(runs, many=True).data}, status=status.HTTP_202_ACCEPTED)


class IndexRunApi(APIView):
    """One index run: status, progress, counts, timings, error."""

    @extend_schema(responses=IndexRunSerializer, operation_id="get_index_run")
    def get(self, request: Request, pk: int) -> Response:
        run = IndexRun.objects.select_related("catalog", "source").filter(
            pk=pk, catalog__in=visible_catalogs(request_user(request))).first()
        if run is None:
            raise Http404(f"No index run {pk}.")
        return Response(IndexRunSerializer(run).data)


def _curated_source(request: Request, slug: str, source_slug: str) -> ReferenceSource:
    catalog = get_catalog_for_caller(request_user(request), slug)
    _require_curator(request_user(request))
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


def _trigger(request: Request) -> str:
    """An agent's token asks through the API; a person's session through the UI."""
    return IndexRun.Trigger.API if isinstance(request_user(request), Agent) else IndexRun.Trigger.UI


def _queued(request: Request, source: ReferenceSource) -> dict[str, Any]:
    run, _ = index_run_request(source=source, trigger=_trigger(request))
    return IndexRunSerializer(run).data


class SourceContentApi(APIView):
    """Replace an inline source's text; a reindex run is queued (returned)."""

    @extend_schema_serializer(component_name="InlineContent")
    class InputSerializer(serializers.Serializer[None]):
        content = StrictCharField(trim_whitespace=False)

    @extend_schema(request=InputSerializer, responses={202: dict}, operation_id="set_inline_content")
    def put(self, request: Request, slug: str, source: str) -> Response:
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
    class InputSerializer(serializers.Serializer[None]):
        path = StrictCharField(max_length=1024, trim_whitespace=False,
                               help_text="Relative and normalised: see docs/api.md.")
        title = StrictCharField(max_length=500, required=False, default="", allow_blank=True)
        text = StrictCharField(trim_whitespace=False)

        def validate_path(self, value: str) -> str:
            if problem := upload_path_problem(value):
                raise serializers.ValidationError(problem)
            return value

    @extend_schema(request=InputSerializer, responses={202: dict}, operation_id="put_upload_file")
    def put(self, request: Request, slug: str, source: str) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        target = _curated_source(request, slug, source)
        with _source_errors_as_409():
            upload_put(source=target, **data.validated_data)
        return Response({"source": target.slug, "path": data.validated_data["path"], "run": _queued(request, target)},
                        status=status.HTTP_202_ACCEPTED)

    @extend_schema(parameters=[OpenApiParameter("path", str, required=True)], responses={202: dict},
                   operation_id="delete_upload_file")
    def delete(self, request: Request, slug: str, source: str) -> Response:
        path = request.query_params.get("path", "")
        target = _curated_source(request, slug, source)
        if not upload_delete(source=target, path=path):
            raise Http404(f"Source {source!r} has no file {path!r}.")
        return Response({"source": target.slug, "path": path, "run": _queued(request, target)},
                        status=status.HTTP_202_ACCEPTED)
