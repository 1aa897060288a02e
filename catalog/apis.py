"""Curator API: sources (list, create, read, change), their content and files,
reindexing (request runs, watch them), and a catalog's ranking settings."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog.auth import RequestUser, get_catalog_for_caller, is_curator, request_user, visible_catalogs
from catalog.catalogs import catalog_ranking_update
from catalog.errors import ConflictError
from catalog.indexing.runs import EditConflict, index_run_request, source_create_queued, source_edit_queued
from catalog.models import MAX_CRAWL_DEPTH, MAX_CRAWL_PAGES, Agent, Catalog, IndexRun, ReferenceSource
from catalog.ranking import FUSIONS, LIMITS, MODES, NORMALISATIONS
from catalog.rest.fields import QueryBooleanField, StrictCharField, StrictFloatField, StrictIntegerField
from catalog.rest.schema import errors
from catalog.sources.editing import inline_set, upload_delete, upload_put
from catalog.sources.errors import SourceError
from catalog.sources.lifecycle import (
    GitSettings,
    SourceSettings,
    WebSettings,
    needs_reindex,
    source_create,
    source_update,
)
from catalog.sources.upload_paths import MAX_PATH_CHARS, UPLOAD_PATH_PATTERN, upload_path_problem
from catalog.sources.uploads import text_size_problem
from catalog.web import person_or_none


def _require_curator(caller: RequestUser) -> None:
    if not is_curator(caller):
        raise PermissionDenied("Reindexing needs a curator token or a curator's session.")


class IndexRunCountsSerializer(serializers.Serializer[dict[str, int]]):
    """Filled in when a run succeeds; empty before."""

    documents_added = serializers.IntegerField(required=False)
    documents_changed = serializers.IntegerField(required=False)
    documents_removed = serializers.IntegerField(required=False)
    documents_unchanged = serializers.IntegerField(required=False)
    chunks_embedded = serializers.IntegerField(required=False)
    chunks_reused = serializers.IntegerField(required=False)
    chunks_written = serializers.IntegerField(required=False)


class IndexRunSerializer(serializers.ModelSerializer[IndexRun]):
    catalog: serializers.SlugRelatedField[Catalog] = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    # A field named like Field.source, which the stubs declare on every serializer (DRF's
    # metaclass takes declared fields off the class, so there is no clash at run time).
    source: serializers.SlugRelatedField[ReferenceSource] = serializers.SlugRelatedField(  # type: ignore[assignment]
        slug_field="slug", read_only=True)
    counts = IndexRunCountsSerializer()
    skipped = serializers.ListField(
        child=serializers.ListField(child=serializers.CharField(), min_length=2, max_length=2),
        help_text="The files it could not read, each [path, why]; the rest of the source indexed.")
    timings = serializers.DictField(child=serializers.FloatField(),
                                    help_text="Seconds per stage (collect, chunk, embed, write); empty until done.")

    class Meta:
        model = IndexRun
        fields = ["id", "catalog", "source", "trigger", "full", "status", "stage", "progress", "counts", "timings",
                  "error", "skipped", "created_at", "started_at", "finished_at"]
        read_only_fields = fields  # a response only: the schema then lists every field as always present


CURATOR_ERRORS = {
    403: "`forbidden`: the caller is not a curator (a reader token, or a session outside the curator group).",
    404: "`not_found`: no such catalog or source for this caller.",
}


class ReindexApi(APIView):
    """Queue a reindex of a catalog's sources (or one with ?source=); ?full=true re-embeds all.

    A source that already has a queued run returns that run instead; a running run is never
    returned (it may have read the source before this request): a new run queues behind it.
    """

    class QuerySerializer(serializers.Serializer[None]):
        # Given empty, a query parameter is read as absent: the schema admits "".
        source = serializers.RegexField(  # type: ignore[assignment]  # named like Field.source, as above
            r"^[-a-zA-Z0-9_]+$", max_length=100, required=False, allow_blank=True,
            help_text="Only this source (default: every source of the catalog).")
        full = QueryBooleanField(required=False, default=False, help_text="Re-chunk and re-embed everything.")

    class OutputSerializer(serializers.Serializer[dict[str, Any]]):
        runs = IndexRunSerializer(many=True)

    @extend_schema(request=None, parameters=[QuerySerializer], operation_id="reindex_catalog",
                   responses={202: OutputSerializer, **errors({
                       400: "`invalid_input`: a query parameter is not valid.", **CURATOR_ERRORS})})
    def post(self, request: Request, slug: str) -> Response:
        query = self.QuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        catalog = get_catalog_for_caller(request_user(request), slug)
        _require_curator(request_user(request))
        sources = catalog.sources.all()
        if query.validated_data.get("source"):
            sources = sources.filter(slug=query.validated_data["source"])
            if not sources:
                raise Http404(f"Catalog {slug!r} has no source {query.validated_data['source']!r}.")
        trigger = _trigger(request)
        runs = [index_run_request(source=s, trigger=trigger, full=query.validated_data["full"])[0] for s in sources]
        return Response(self.OutputSerializer({"runs": runs}).data, status=status.HTTP_202_ACCEPTED)


class IndexRunApi(APIView):
    """One index run: status, progress, counts, timings, error."""

    @extend_schema(operation_id="get_index_run", responses={200: IndexRunSerializer, **errors({
        404: "`not_found`: no such run in a catalog this caller may see."})})
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
def _edit_errors_as_409() -> Iterator[None]:
    try:
        yield
    except SourceError as exc:
        raise ConflictError(str(exc), code="wrong_source_kind") from None
    except EditConflict as exc:
        raise ConflictError(str(exc), code="busy") from None




def _trigger(request: Request) -> str:
    """An agent's token asks through the API; a person's session through the UI."""
    return IndexRun.Trigger.API if isinstance(request_user(request), Agent) else IndexRun.Trigger.UI


def _text_within_limit(value: str) -> str:
    """The rule the dashboard applies to uploads and inline text (catalog.sources.uploads)."""
    if problem := text_size_problem(len(value.encode("utf-8"))):
        raise serializers.ValidationError(f"The text {problem}.")
    return value


BUSY = ("`busy`: concurrent writes to the source kept conflicting with this one (tried three times); nothing was "
        "changed, try again.")


def _editing_errors(kind: str) -> dict[int, OpenApiResponse]:
    return errors({400: "`invalid_input`: a field is missing or not valid; `details.fields` says which.",
                   **CURATOR_ERRORS, 409: f"`wrong_source_kind`: the source is not an {kind} source. {BUSY}"})


class SourceContentApi(APIView):
    """Replace an inline source's text; a reindex run is queued (returned)."""

    @extend_schema_serializer(component_name="InlineContent")
    class InputSerializer(serializers.Serializer[None]):
        content = StrictCharField(trim_whitespace=False, help_text="At most LECTERN_MAX_UPLOAD_BYTES (1 MiB) of UTF-8.")

        def validate_content(self, value: str) -> str:
            return _text_within_limit(value)

    class OutputSerializer(serializers.Serializer[dict[str, Any]]):
        source = serializers.SlugField()  # type: ignore[assignment]  # named like Field.source: see IndexRunSerializer
        run = IndexRunSerializer(help_text="The run that indexes the change (or the one already queued).")

    @extend_schema(request=InputSerializer, operation_id="set_inline_content",
                   responses={202: OutputSerializer, **_editing_errors("inline")})
    def put(self, request: Request, slug: str, source: str) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        target = _curated_source(request, slug, source)
        with _edit_errors_as_409():
            _, run = source_edit_queued(source=target, trigger=_trigger(request), edit=lambda: inline_set(
                source=target, content=data.validated_data["content"], by=person_or_none(request_user(request))))
        return Response(self.OutputSerializer({"source": target.slug, "run": run}).data,
                        status=status.HTTP_202_ACCEPTED)


@extend_schema_field({"type": "string", "minLength": 1, "maxLength": MAX_PATH_CHARS, "pattern": UPLOAD_PATH_PATTERN,
                      "description": "Relative and normalised: see docs/api.md."})
class UploadPathField(StrictCharField):
    """An upload file's path as the schema publishes it: validate_path() checks the
    same rule (catalog.sources.upload_paths), with a message saying which part failed."""


class SourceFilesApi(APIView):
    """Add, replace (PUT) or remove (DELETE ?path=) one file of an upload source; a
    reindex run is queued (returned) and indexes only that file's change."""

    @extend_schema_serializer(component_name="UploadFile")
    class InputSerializer(serializers.Serializer[None]):
        path = UploadPathField(max_length=MAX_PATH_CHARS, trim_whitespace=False)
        title = StrictCharField(max_length=500, required=False, default="", allow_blank=True)
        text = StrictCharField(trim_whitespace=False, help_text="At most LECTERN_MAX_UPLOAD_BYTES (1 MiB) of UTF-8.")

        def validate_path(self, value: str) -> str:
            if problem := upload_path_problem(value):
                raise serializers.ValidationError(problem)
            return value

        def validate_text(self, value: str) -> str:
            return _text_within_limit(value)

    class PathSerializer(serializers.Serializer[None]):
        path = serializers.CharField(max_length=1024, help_text="The file to remove.")

    class OutputSerializer(serializers.Serializer[dict[str, Any]]):
        source = serializers.SlugField()  # type: ignore[assignment]  # named like Field.source: see IndexRunSerializer
        path = serializers.CharField()
        run = IndexRunSerializer(help_text="The run that indexes the change (or the one already queued).")

    @extend_schema(request=InputSerializer, operation_id="put_upload_file",
                   responses={202: OutputSerializer, **_editing_errors("upload")})
    def put(self, request: Request, slug: str, source: str) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        target = _curated_source(request, slug, source)
        with _edit_errors_as_409():
            _, run = source_edit_queued(source=target, trigger=_trigger(request), edit=lambda: upload_put(
                source=target, by=person_or_none(request_user(request)), **data.validated_data))
        return self._queued_response(target, data.validated_data["path"], run)

    @extend_schema(parameters=[PathSerializer], operation_id="delete_upload_file",
                   responses={202: OutputSerializer, **errors({
                       400: "`invalid_input`: `path` is missing or too long.", **CURATOR_ERRORS,
                       404: "`not_found`: no such catalog, source or file for this caller.",
                       409: f"`wrong_source_kind`: the source is not an upload source. {BUSY}"})})
    def delete(self, request: Request, slug: str, source: str) -> Response:
        query = self.PathSerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        path = query.validated_data["path"]
        target = _curated_source(request, slug, source)
        with _edit_errors_as_409():
            deleted, run = source_edit_queued(source=target, trigger=_trigger(request), edit=lambda: upload_delete(
                source=target, path=path, by=person_or_none(request_user(request))))
        if not deleted:
            raise Http404(f"Source {source!r} has no file {path!r}.")
        return self._queued_response(target, path, run)

    def _queued_response(self, target: ReferenceSource, path: str, run: IndexRun | None) -> Response:
        body = {"source": target.slug, "path": path, "run": run}
        return Response(self.OutputSerializer(body).data, status=status.HTTP_202_ACCEPTED)


# --- sources ------------------------------------------------------------------------------

WRITABLE_KINDS = [ReferenceSource.Kind.GLOB, ReferenceSource.Kind.INLINE, ReferenceSource.Kind.UPLOAD,
                  ReferenceSource.Kind.GIT, ReferenceSource.Kind.WEB]


class SourceSyncSerializer(serializers.Serializer[dict[str, Any]]):
    """What a git source's last sync or a web source's last crawl found; empty for other
    kinds and before the first."""

    commit = serializers.CharField(required=False, help_text="The commit the source was synced to.")
    ref = serializers.CharField(required=False, help_text="The branch, tag or commit it reads (HEAD: the default).")
    files = serializers.IntegerField(required=False, help_text="Files in the commit's tree.")
    indexed = serializers.IntegerField(required=False, help_text="Files indexed as documents.")
    read = serializers.IntegerField(required=False, help_text="Files read by this sync (the others were unchanged).")
    skipped = serializers.IntegerField(required=False, help_text="Files listed in `skipped`, with why.")
    other_types = serializers.IntegerField(required=False, help_text="Files of types Lectern does not read.")
    synced_at = serializers.DateTimeField(required=False)
    start = serializers.CharField(required=False, help_text="A web source's start URL as the crawl spelled it.")
    requested = serializers.IntegerField(required=False, help_text="Pages the crawl asked for (the page limit "
                                                                   "counts these).")
    fetched = serializers.IntegerField(required=False, help_text="Pages that answered.")
    not_modified = serializers.IntegerField(required=False, help_text="Pages that answered 304: unchanged, "
                                                                      "not read again.")
    disallowed = serializers.IntegerField(required=False, help_text="Pages robots.txt kept the crawl from.")
    gone = serializers.IntegerField(required=False, help_text="Pages that answered 404 or 410.")
    limit_reached = serializers.BooleanField(required=False, help_text="Whether pages were left for the page "
                                                                       "limit.")
    elapsed_seconds = serializers.FloatField(required=False, help_text="How long the crawl took.")
    crawled_at = serializers.DateTimeField(required=False)


class SourceSerializer(serializers.Serializer[ReferenceSource]):
    """A source as a curator reads it: its settings, what its kind reads, its state. A
    git source's token or key is never shown: only whether one is stored."""

    slug = serializers.SlugField(help_text="The reference id agents use (`@id`).")
    name = serializers.CharField()
    description = serializers.CharField()
    kind = serializers.ChoiceField(choices=ReferenceSource.Kind.values)
    mode = serializers.ChoiceField(choices=ReferenceSource.Mode.values)
    requires_approval = serializers.BooleanField()
    tags = serializers.SerializerMethodField()
    location = serializers.CharField(help_text="A glob's pattern, a git source's repository URL or path, or a web "
                                               "source's start URL.")
    ref = serializers.CharField(help_text="A git source's branch, tag or commit (blank: its default branch).")
    include = serializers.CharField(help_text="A git source's include globs (a web source's, of URL paths), one "
                                              "per line.")
    exclude = serializers.CharField(help_text="A git source's exclude globs (a web source's, of URL paths), one "
                                              "per line.")
    max_depth = serializers.IntegerField(help_text="How many links from its start page a web source's crawl "
                                                   "follows.")
    max_pages = serializers.IntegerField(help_text="The most pages a web source's crawl requests.")
    secret_stored = serializers.SerializerMethodField(help_text="Whether a token or deploy key is stored (sealed).")
    status = serializers.ChoiceField(choices=ReferenceSource.Status.values)
    fingerprint = serializers.CharField()
    indexed_at = serializers.DateTimeField(allow_null=True)
    sync = SourceSyncSerializer()
    skipped = serializers.SerializerMethodField(help_text="Files (a web source's pages) the last run could not "
                                                          "read, with why.")
    error = serializers.SerializerMethodField(help_text="Why the last run failed; null when it did not.")

    def get_tags(self, source: ReferenceSource) -> list[str]:
        return sorted(tag.name for tag in source.tags.all())

    def get_secret_stored(self, source: ReferenceSource) -> bool:
        return bool(source.secret_sealed)

    @extend_schema_field(serializers.ListField(child=serializers.DictField(child=serializers.CharField())))
    def get_skipped(self, source: ReferenceSource) -> list[dict[str, str]]:
        if source.status == ReferenceSource.Status.ERROR:
            return []
        return [{"path": path, "reason": reason} for line in source.last_error.splitlines()
                if line.startswith("skipped ") for path, _, reason in [line.removeprefix("skipped ").partition(": ")]]

    def get_error(self, source: ReferenceSource) -> str | None:
        return source.last_error if source.status == ReferenceSource.Status.ERROR else None


class SourceWriteSerializer(serializers.Serializer[None]):
    """A source's settings as a curator sends them: on create, slug, name and kind are
    needed; on update, only what changes (the kind and the slug never change)."""

    slug = serializers.SlugField(max_length=100)
    name = StrictCharField(max_length=200)
    description = StrictCharField(required=False, allow_blank=True, default="")
    kind = serializers.ChoiceField(choices=WRITABLE_KINDS, help_text="An upload source's files are PUT to "
                                                                     "`.../files` once it is created.")
    mode = serializers.ChoiceField(choices=ReferenceSource.Mode.values, default=ReferenceSource.Mode.SELECTABLE)
    requires_approval = serializers.BooleanField(default=False)
    tags = serializers.ListField(child=StrictCharField(max_length=100), default=list)
    location = StrictCharField(required=False, allow_blank=True, max_length=1024,
                               help_text="A glob under a source root; a git repository: https://host/org/repo"
                                         ".git, ssh://..., git@host:org/repo.git, or a path under a source root; "
                                         "or a web source's start URL (a page, or a sitemap .xml).")
    content = StrictCharField(required=False, allow_blank=True, trim_whitespace=False,
                              help_text="An inline source's text (at most LECTERN_MAX_UPLOAD_BYTES).")
    ref = StrictCharField(required=False, allow_blank=True, max_length=255)
    include = StrictCharField(required=False, allow_blank=True)
    exclude = StrictCharField(required=False, allow_blank=True)
    max_depth = serializers.IntegerField(required=False, min_value=0, max_value=MAX_CRAWL_DEPTH,
                                         help_text="A web source's crawl depth (0: the start page alone; "
                                                   "default 3).")
    max_pages = serializers.IntegerField(required=False, min_value=1, max_value=MAX_CRAWL_PAGES,
                                         help_text="A web source's page limit (default 200).")
    secret = StrictCharField(required=False, allow_blank=True, write_only=True, trim_whitespace=False,
                             help_text="A git source's https token or ssh private key, stored sealed and never "
                                       "shown again; \"\" removes the stored one; absent keeps it.")

    def validate_content(self, value: str) -> str:
        return _text_within_limit(value)


def _django_errors_as_400(error: DjangoValidationError) -> serializers.ValidationError:
    return serializers.ValidationError(error.message_dict if hasattr(error, "error_dict") else error.messages)


def _git_settings(data: dict[str, Any], current: ReferenceSource | None = None) -> GitSettings:
    def value(name: str) -> str:
        return str(data[name]) if name in data else (getattr(current, name) if current is not None else "")

    return GitSettings(value("location"), ref=value("ref"), include=value("include"), exclude=value("exclude"),
                       secret=data.get("secret"))


def _web_settings(data: dict[str, Any], current: ReferenceSource | None = None) -> WebSettings:
    def value(name: str, default: Any) -> Any:
        return data[name] if name in data else (getattr(current, name) if current is not None else default)

    return WebSettings(value("location", ""), include=value("include", ""), exclude=value("exclude", ""),
                       max_depth=value("max_depth", 3), max_pages=value("max_pages", 200))


def _settings(data: dict[str, Any], current: ReferenceSource | None = None) -> SourceSettings:
    def value(name: str, default: Any) -> Any:
        return data[name] if name in data else (getattr(current, name) if current is not None else default)

    tags = data["tags"] if "tags" in data else (
        [tag.name for tag in current.tags.all()] if current is not None else [])
    return SourceSettings(name=value("name", ""), description=value("description", ""),
                          mode=value("mode", ReferenceSource.Mode.SELECTABLE),
                          requires_approval=value("requires_approval", False), tags=tags)


class SourcesApi(APIView):
    """A catalog's sources: list them; create one (a run that indexes it is queued)."""

    class OutputSerializer(serializers.Serializer[dict[str, Any]]):
        source = SourceSerializer()  # type: ignore[assignment]  # named like Field.source: see IndexRunSerializer
        run = IndexRunSerializer(allow_null=True, help_text="The run that indexes the change; null when none was "
                                                            "needed.")

    @extend_schema(operation_id="list_sources", responses={200: SourceSerializer(many=True), **errors(CURATOR_ERRORS)})
    def get(self, request: Request, slug: str) -> Response:
        catalog = get_catalog_for_caller(request_user(request), slug)
        _require_curator(request_user(request))
        sources = catalog.sources.prefetch_related("tags").order_by("slug")
        return Response(SourceSerializer(list(sources), many=True).data)  # type: ignore[arg-type]

    @extend_schema(request=SourceWriteSerializer, operation_id="create_source",
                   responses={202: OutputSerializer, **errors({
                       400: "`invalid_input`: a field is missing or not valid (a glob outside the source roots, a "
                            "repository or a site Lectern may not reach); `details.fields` says which.",
                       **CURATOR_ERRORS, 409: BUSY})})
    def post(self, request: Request, slug: str) -> Response:
        catalog = get_catalog_for_caller(request_user(request), slug)
        _require_curator(request_user(request))
        data = SourceWriteSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        fields = data.validated_data
        kind = fields["kind"]

        def create() -> ReferenceSource:
            return source_create(catalog=catalog, slug=fields["slug"], kind=kind, settings=_settings(fields),
                                 location=fields.get("location", ""), content=fields.get("content", ""),
                                 git=_git_settings(fields) if kind == ReferenceSource.Kind.GIT else None,
                                 web=_web_settings(fields) if kind == ReferenceSource.Kind.WEB else None,
                                 by=person_or_none(request_user(request)))
        try:
            with _edit_errors_as_409():
                source, run = source_create_queued(slug=fields["slug"], trigger=_trigger(request), create=create)
        except DjangoValidationError as error:
            raise _django_errors_as_400(error) from None
        return Response(self.OutputSerializer({"source": source, "run": run}).data, status=status.HTTP_202_ACCEPTED)


class SourceApi(APIView):
    """One source: read it; change its settings (a run is queued when what it reads changed)."""

    @extend_schema(operation_id="get_source", responses={200: SourceSerializer, **errors(CURATOR_ERRORS)})
    def get(self, request: Request, slug: str, source: str) -> Response:
        return Response(SourceSerializer(_curated_source(request, slug, source)).data)

    @extend_schema(request=SourceWriteSerializer(partial=True), operation_id="update_source",
                   responses={200: SourcesApi.OutputSerializer, **errors({
                       400: "`invalid_input`: a field is not valid; `details.fields` says which.",
                       **CURATOR_ERRORS, 409: BUSY})})
    def patch(self, request: Request, slug: str, source: str) -> Response:
        target = _curated_source(request, slug, source)
        data = SourceWriteSerializer(data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        fields = data.validated_data
        if "kind" in fields and fields["kind"] != target.kind or "slug" in fields and fields["slug"] != target.slug:
            raise serializers.ValidationError({"kind": "A source's kind and slug never change; create another."})

        def update() -> list[str]:
            return source_update(source=target, settings=_settings(fields, target), location=fields.get("location"),
                                 content=fields.get("content"),
                                 git=_git_settings(fields, target) if target.kind == ReferenceSource.Kind.GIT
                                 else None,
                                 web=_web_settings(fields, target) if target.kind == ReferenceSource.Kind.WEB
                                 else None, by=person_or_none(request_user(request)))
        try:
            with _edit_errors_as_409():
                _, run = source_edit_queued(source=target, trigger=_trigger(request), edit=update,
                                            reindex=lambda changed: needs_reindex(target.kind, changed))
        except DjangoValidationError as error:
            raise _django_errors_as_400(error) from None
        target.refresh_from_db()
        return Response(SourcesApi.OutputSerializer({"source": target, "run": run}).data)


# --- ranking settings -----------------------------------------------------------------------


def _ranking_number(name: str, help_text: str, *, whole: bool = False,
                    nullable: bool = False) -> serializers.Field[Any, Any, Any, Any]:
    low, high = LIMITS[name]
    if whole:
        return StrictIntegerField(min_value=int(low), max_value=int(high), required=False, help_text=help_text)
    return StrictFloatField(min_value=low, max_value=high, required=False, allow_null=nullable, help_text=help_text)


class RankingSerializer(serializers.Serializer[dict[str, Any]]):
    """A catalog's ranking settings (defaults: today's constants)."""

    mode = serializers.ChoiceField(choices=MODES, required=False, help_text="What a search naming no mode runs.")
    fusion = serializers.ChoiceField(choices=FUSIONS, required=False, help_text="Hybrid's fusion.")
    rrf_k = _ranking_number("rrf_k", "RRF's k: a hit ranked r adds weight / (k + r).", whole=True)
    bm25_weight = _ranking_number("bm25_weight", "BM25's weight in either fusion (convex: over the sum).")
    vector_weight = _ranking_number("vector_weight", "The vector list's weight in either fusion.")
    normalization = serializers.ChoiceField(choices=NORMALISATIONS, required=False,
                                            help_text="Convex fusion's score normalisation.")
    k1 = _ranking_number("k1", "BM25 k1: how fast a term's repeats saturate.")
    b = _ranking_number("b", "BM25 b: how much a longer chunk is discounted.")
    fusion_depth = _ranking_number("fusion_depth", "How deep each list is read before fusing.", whole=True)
    vector_feedback = _ranking_number("vector_feedback", "Chunks of a first vector search the query moves toward "
                                                         "before searching again (0: off).", whole=True)
    feedback_weight = _ranking_number("feedback_weight", "How far the query moves toward them.")
    bm25_feedback = _ranking_number("bm25_feedback", "Chunks of a first BM25 search whose most typical terms are "
                                                     "added to the query before searching again (RM3; 0: off).",
                                    whole=True)
    bm25_feedback_terms = _ranking_number("bm25_feedback_terms", "How many terms BM25 feedback adds.", whole=True)
    bm25_feedback_weight = _ranking_number("bm25_feedback_weight", "The added terms' share of the query's weight "
                                                                   "(0 to 1).")
    semantic_threshold = _ranking_number("semantic_threshold", "Enrichment's least similarity for a hint by "
                                                               "meaning; null: each agent's own.", nullable=True)
    semantic_margin = _ranking_number("semantic_margin", "How close to the best match a hint must score; null: "
                                                         "each agent's own.", nullable=True)


class RankingOutputSerializer(serializers.Serializer[dict[str, Any]]):
    settings = RankingSerializer(help_text="Every setting, as search uses it now.")
    changed = serializers.ListField(child=serializers.CharField(),
                                    help_text="The settings that differ from the defaults.")


def _ranking_body(catalog: Catalog) -> dict[str, Any]:
    return RankingOutputSerializer({"settings": asdict(catalog.ranking_settings),
                                    "changed": sorted(catalog.ranking)}).data


class RankingApi(APIView):
    """A catalog's ranking settings: read them (whoever may read the catalog), change
    some (curators; audited; the next search ranks with them, no reindex)."""

    @extend_schema(operation_id="get_ranking", responses={200: RankingOutputSerializer, **errors({
        404: "`not_found`: no such catalog for this caller."})})
    def get(self, request: Request, slug: str) -> Response:
        return Response(_ranking_body(get_catalog_for_caller(request_user(request), slug)))

    @extend_schema(request=RankingSerializer, operation_id="update_ranking",
                   responses={200: RankingOutputSerializer, **errors({
                       400: "`invalid_input`: a setting is not valid; `details.fields` says which.",
                       **CURATOR_ERRORS})})
    def patch(self, request: Request, slug: str) -> Response:
        caller = request_user(request)
        catalog = get_catalog_for_caller(caller, slug)
        if not is_curator(caller):
            raise PermissionDenied("Changing ranking settings needs a curator token or a curator's session.")
        data = RankingSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        unknown = sorted(set(request.data) - set(RankingSerializer().fields)) if isinstance(request.data, dict) else []
        if unknown:
            raise serializers.ValidationError({name: ["Unknown setting."] for name in unknown})
        try:
            catalog_ranking_update(catalog=catalog, values=dict(data.validated_data), by=caller)
        except DjangoValidationError as error:
            raise _django_errors_as_400(error) from None
        return Response(_ranking_body(catalog))
