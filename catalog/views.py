"""The curator's dashboard: catalogs and their sources (list, page, create, edit, delete),
uploads, the tag editor, reindexing and its live progress, the runs history.

Who may do what: curators and reviewers see every page (reviewers read a source to
decide on it); only curators create, edit, delete, upload and reindex, and every write
goes through the services the API and the admin use (catalog.catalogs,
catalog.sources.lifecycle and editing, catalog.indexing.runs and removal), with the
person as `by`, so ReferenceSource.changed_by and the audit log say who did it.

One view, two renders: a form posted by htmx that fails comes back as the form with
its errors in place (400, swapped by htmx: templates/base.html) and one that succeeds
as HX-Redirect to where the work shows; a plain POST gets the page or a redirect. The
live panel (`activity`) polls itself every second while a run is queued or running and
stops once none is, telling the page (HX-Trigger: index-finished) to refresh the parts
a run changes. Lists are paginated and read by catalog.selectors in a bounded number of
queries; the sections the layers above add come through catalog.panels.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.core.paginator import Page, Paginator
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect, reswap, retarget, trigger_client_event

from catalog import selectors
from catalog.auth import CURATOR_GROUP, REVIEWER_GROUP, get_catalog_for_caller, is_curator, role_required
from catalog.catalogs import CHUNKING, catalog_create, catalog_ranking_update, catalog_update
from catalog.filters import RunFilter, SourceFilter
from catalog.forms import (
    CatalogDeleteForm,
    CatalogForm,
    RankingForm,
    ReindexForm,
    SourceForm,
    TagsField,
    UploadDeleteForm,
    UploadForm,
    apply_errors,
    source_form_data,
)
from catalog.indexing.removal import SourceBusy, catalog_delete, source_delete
from catalog.indexing.runs import EditConflict, index_run_request, source_create_queued, source_edit_queued
from catalog.models import Catalog, IndexRun, ReferenceSource
from catalog.panels import deletion_notes, source_panels
from catalog.sources.editing import upload_delete, uploads_add
from catalog.sources.errors import SourceError
from catalog.sources.globs import glob_entries, source_roots
from catalog.sources.lifecycle import needs_reindex, source_create, source_update
from catalog.sources.uploads import UPLOAD_SUFFIXES, max_upload_bytes
from catalog.tags import tag_name_problem, tags_suggested
from catalog.web import from_htmx, person

viewers = role_required(CURATOR_GROUP, REVIEWER_GROUP)
curators = role_required(CURATOR_GROUP)

CATALOGS_PAGE = 50
SOURCES_PAGE = 50
DOCUMENTS_PAGE = 25
CHUNKS_PAGE = 10
FILES_PAGE = 25
RUNS_PAGE = 25
GLOB_PREVIEW = 12  # files named in the glob preview
# The kinds of source a curator chooses between, as the form's tabs say them.
KINDS = [(ReferenceSource.Kind.UPLOAD, "Upload files",
          "Markdown, text, HTML, PDF, Word or PowerPoint files from your computer"),
         (ReferenceSource.Kind.GLOB, "Files on the server", "A glob under a source root, rescanned for changes"),
         (ReferenceSource.Kind.GIT, "Git repository", "A branch, tag or commit of a repository, kept in sync"),
         (ReferenceSource.Kind.WEB, "Web site", "The pages of a site, crawled from a start URL or a sitemap"),
         (ReferenceSource.Kind.INLINE, "Inline text", "A text written here")]
# Sent when the live panel finds nothing left to do: the page refreshes what runs changed.
INDEX_FINISHED = "index-finished"






def _catalog_or_404(request: HttpRequest, slug: str) -> Catalog:
    return get_catalog_for_caller(request.user, slug)


def _source_or_404(request: HttpRequest, catalog: str, source: str) -> ReferenceSource:
    found = _catalog_or_404(request, catalog).sources.select_related("catalog", "changed_by") \
        .filter(slug=source).first()
    if found is None:
        raise Http404(f"Catalog {catalog!r} has no source {source!r}.")
    return found


def _page(request: HttpRequest, items: QuerySet[Any], size: int, param: str = "page") -> Page[Any]:
    return Paginator(items, size).get_page(request.GET.get(param))


def _query_without(request: HttpRequest, *params: str) -> str:
    query = request.GET.copy()
    for param in params:
        query.pop(param, None)
    return query.urlencode()


def _done(request: HttpRequest, url: str, note: str = "") -> HttpResponse:
    """After a write: to `url` with `note` shown there (htmx follows HX-Redirect)."""
    if note:
        messages.success(request, note)
    if from_htmx(request):
        return HttpResponseClientRedirect(url)
    return redirect(url)


def _form_response(request: HttpRequest, page: str, partial: str, context: dict[str, Any],
                   status: int = 400) -> HttpResponse:
    """A form refused: the form with its errors (htmx swaps it in place) or the page."""
    return render(request, partial if from_htmx(request) else page, context, status=status)


def _base(request: HttpRequest, **context: Any) -> dict[str, Any]:
    return {"can_edit": is_curator(request.user), **context}


# --- catalogs -------------------------------------------------------------------------------


@viewers
@require_GET
def catalog_list(request: HttpRequest) -> HttpResponse:
    catalogs = selectors.catalogs_overview(Catalog.objects.live())
    return render(request, "catalog/catalogs.html", _base(
        request, page=_page(request, catalogs, CATALOGS_PAGE), query="", scan=selectors.scan_status()))


@curators
@require_http_methods(["GET", "POST"])
def catalog_new(request: HttpRequest) -> HttpResponse:
    form = CatalogForm(request.POST if request.method == "POST" else None)
    if form.is_valid():
        try:
            catalog = catalog_create(slug=form.cleaned_data["slug"], settings=form.settings())
        except ValidationError as error:
            apply_errors(form, error)
        else:
            return _done(request, reverse("catalogs-detail", args=[catalog.slug]),
                         f"Catalog {catalog.slug} created. Add its first source.")
    context = _base(request, form=form, editing=None)
    if request.method == "GET":
        return render(request, "catalog/catalog_form.html", context)
    return _form_response(request, "catalog/catalog_form.html", "catalog/partials/catalog_form.html", context)


@viewers
@require_GET
def catalog_page(request: HttpRequest, catalog: str) -> HttpResponse:
    found = _catalog_or_404(request, catalog)
    filters = SourceFilter(request.GET, queryset=selectors.sources_overview(found))
    valid = filters.is_valid()
    data = filters.form.cleaned_data if valid else {}
    sources = filters.qs if valid else selectors.sources_overview(found)
    totals = selectors.catalogs_overview(Catalog.objects.filter(pk=found.pk)).get()
    page = _page(request, sources, SOURCES_PAGE)
    page.object_list = selectors.with_chunk_totals(list(page.object_list))
    return render(request, "catalog/catalog.html", _base(
        request, catalog=totals, filters=filters.form, page=page,
        query=_query_without(request, "page"), activity=selectors.activity(catalog=found), scan=selectors.scan_status(),
        filtered=bool(data and any(data.values()))), status=200 if valid else 400)


@curators
@require_http_methods(["GET", "POST"])
def catalog_edit(request: HttpRequest, catalog: str) -> HttpResponse:
    found = _catalog_or_404(request, catalog)
    form = CatalogForm(request.POST if request.method == "POST" else None, editing=found)
    if form.is_valid():
        try:
            changed = catalog_update(catalog=found, settings=form.settings())
        except ValidationError as error:
            apply_errors(form, error)
        else:
            note = f"Catalog {found.slug} saved." if changed else "Nothing changed."
            if set(changed) & set(CHUNKING):
                runs = [index_run_request(source=s, trigger=IndexRun.Trigger.UI, full=True)[0]
                        for s in found.sources.all()]
                note = f"Catalog {found.slug} saved; its chunking changed, so {len(runs)} sources are reindexed " \
                       "in full."
            return _done(request, reverse("catalogs-detail", args=[found.slug]), note)
    context = _base(request, form=form, editing=found)
    if request.method == "GET":
        return render(request, "catalog/catalog_form.html", context)
    return _form_response(request, "catalog/catalog_form.html", "catalog/partials/catalog_form.html", context)


@curators
@require_http_methods(["GET", "POST"])
def catalog_ranking(request: HttpRequest, catalog: str) -> HttpResponse:
    """A catalog's ranking settings, edited; every change audited. The next search
    ranks with them (no reindex)."""
    found = _catalog_or_404(request, catalog)
    form = RankingForm(request.POST if request.method == "POST" else None, editing=found)
    if form.is_valid():
        try:
            changed = catalog_ranking_update(catalog=found, values=form.values(), by=request.user,
                                             seen=form.cleaned_data["seen"] or None)
        except ValidationError as error:
            apply_errors(form, error)
        else:
            note = f"Ranking of {found.slug} saved: {', '.join(changed)} changed; the next search ranks with it." \
                if changed else "Nothing changed."
            return _done(request, reverse("catalogs-detail", args=[found.slug]) + "#ranking", note)
    context = _base(request, form=form, editing=found)
    if request.method == "GET":
        return render(request, "catalog/ranking_form.html", context)
    return _form_response(request, "catalog/ranking_form.html", "catalog/partials/ranking_form.html", context)


@curators
@require_http_methods(["GET", "POST"])
def catalog_remove(request: HttpRequest, catalog: str) -> HttpResponse:
    found = _catalog_or_404(request, catalog)
    form = CatalogDeleteForm(request.POST if request.method == "POST" else None, catalog=found)
    status = 200
    if form.is_valid():
        try:
            catalog_delete(catalog=found, by=person(request))
        except SourceBusy as busy:
            form.add_error(None, f"Not deleted: {busy}.")
            status = 409
        else:
            return _done(request, reverse("catalogs-list"), f"Catalog {catalog} deleted, with everything in it.")
    elif form.is_bound:
        status = 400
    totals = selectors.catalogs_overview(Catalog.objects.filter(pk=found.pk)).get()
    return render(request, "catalog/catalog_delete.html", _base(
        request, catalog=totals, form=form, notes=deletion_notes(catalog=found),
        runs=found.index_runs.count()), status=status)


def _reindex_response(request: HttpRequest, catalog: Catalog, source: ReferenceSource | None,
                      runs: list[IndexRun], back: str) -> HttpResponse:
    queued = sum(1 for run in runs if run.status == IndexRun.Status.QUEUED)
    note = f"{len(runs)} source{'s' if len(runs) != 1 else ''} queued for reindexing." if runs else \
        "There is no source to reindex."
    if not from_htmx(request):
        messages.success(request, note)
        return redirect(back)
    # The runs just asked for, whether still queued or (a synchronous queue) done already.
    context = _base(request, catalog=catalog, source=source, notice=note, queued=queued,
                    activity=selectors.activity(catalog=catalog, source=source,
                                            finished=min(max(len(runs), 3), selectors.ACTIVE_SHOWN)))
    return render(request, "catalog/partials/activity.html", context)


@curators
@require_POST
def catalog_reindex(request: HttpRequest, catalog: str) -> HttpResponse:
    found = _catalog_or_404(request, catalog)
    form = ReindexForm(request.POST)
    full = form.is_valid() and form.cleaned_data["full"]
    runs = [index_run_request(source=s, trigger=IndexRun.Trigger.UI, full=full)[0] for s in found.sources.all()]
    return _reindex_response(request, found, None, runs, reverse("catalogs-detail", args=[found.slug]))


@viewers
@require_GET
def catalog_runs(request: HttpRequest, catalog: str) -> HttpResponse:
    """Every run of the catalog, newest first, errors in full; by source and status."""
    found = _catalog_or_404(request, catalog)
    filters = RunFilter(request.GET, queryset=selectors.runs_of(catalog=found))
    valid = filters.is_valid()
    slug = filters.form.cleaned_data["source"] if valid else ""
    source = found.sources.filter(slug=slug).first() if slug else None
    runs = filters.qs if valid else IndexRun.objects.none()
    return render(request, "catalog/runs.html", _base(
        request, catalog=found, form=filters.form, source=source, page=_page(request, runs, RUNS_PAGE),
        query=_query_without(request, "page")), status=200 if valid else 400)


@viewers
@require_GET
def run_page(request: HttpRequest, catalog: str, run_id: int) -> HttpResponse:
    """One run; htmx polls its progress partial while it is queued or running."""
    found = _catalog_or_404(request, catalog)
    run = selectors.runs_of(catalog=found).filter(pk=run_id).first()
    if run is None:
        raise Http404(f"Catalog {catalog!r} has no run {run_id}.")
    context = _base(request, catalog=found, run=run)
    if from_htmx(request):
        response = render(request, "catalog/partials/run_progress.html", context)
        if run.status not in (IndexRun.Status.QUEUED, IndexRun.Status.RUNNING):
            trigger_client_event(response, INDEX_FINISHED)
        return response
    return render(request, "catalog/run.html", context)


@viewers
@require_GET
def catalog_activity(request: HttpRequest, catalog: str) -> HttpResponse:
    """The live panel of a catalog (or of one source, ?source=): it polls this while
    anything is queued or running; the answer that finds nothing tells the page."""
    found = _catalog_or_404(request, catalog)
    source = None
    if request.GET.get("source"):
        source = found.sources.filter(slug=request.GET["source"]).first()
        if source is None:
            raise Http404(f"Catalog {catalog!r} has no source {request.GET['source']!r}.")
    activity = selectors.activity(catalog=found, source=source)
    response = render(request, "catalog/partials/activity.html",
                      _base(request, catalog=found, source=source, activity=activity))
    if not activity.busy:
        trigger_client_event(response, INDEX_FINISHED)
    return response


# --- sources --------------------------------------------------------------------------------


def _kind(request: HttpRequest) -> str:
    kind = request.GET.get("kind") or request.POST.get("kind") or ReferenceSource.Kind.UPLOAD
    if kind not in ReferenceSource.Kind.values:
        raise Http404(f"No kind of source {kind!r}.")
    return kind


def _source_form_context(request: HttpRequest, catalog: Catalog, form: SourceForm, **extra: Any) -> dict[str, Any]:
    return _base(request, catalog=catalog, form=form, kind=form.kind, kinds=KINDS,
                 tag_names=form.tag_names(), roots=source_roots(), upload_suffixes=",".join(UPLOAD_SUFFIXES),
                 max_upload_bytes=max_upload_bytes(), **extra)


@curators
@require_http_methods(["GET", "POST"])
def source_new(request: HttpRequest, catalog: str) -> HttpResponse:
    found = _catalog_or_404(request, catalog)
    kind = _kind(request)
    posted = request.method == "POST"
    form = SourceForm(source_form_data(request.POST) if posted else None, request.FILES if posted else None,
                      kind=kind)
    status = 400  # the form's errors; 409: other writers kept conflicting
    if form.is_valid():
        data = form.cleaned_data

        def create() -> ReferenceSource:
            return source_create(catalog=found, slug=data["slug"], kind=kind, settings=form.settings(),
                                 location=data.get("location", ""), content=data.get("content", ""),
                                 files=data.get("uploads"), git=form.git(), web=form.web(), by=person(request))
        try:
            # The source and the run that indexes it are stored together (or neither).
            source, _ = source_create_queued(slug=data["slug"], trigger=IndexRun.Trigger.UI, create=create)
        except ValidationError as error:
            apply_errors(form, error)
        except EditConflict as conflict:
            form.add_error(None, f"Not created: {conflict}.")
            status = 409
        else:
            return _done(request, reverse("catalogs-source", args=[found.slug, source.slug]),
                         f"Source {source.slug} created; it is being indexed.")
    context = _source_form_context(request, found, form, editing=None)
    if not posted:
        return render(request, "catalog/source_form.html", context)
    return _form_response(request, "catalog/source_form.html", "catalog/partials/source_form.html", context, status)


@viewers
@require_GET
def source_page(request: HttpRequest, catalog: str, source: str) -> HttpResponse:
    found = _source_or_404(request, catalog, source)
    documents = selectors.source_documents(found)
    chosen = None
    if request.GET.get("document", "").isdigit():
        chosen = documents.filter(pk=int(request.GET["document"])).first()
    chunks = _page(request, selectors.source_chunks(found, document=chosen), CHUNKS_PAGE, "chunks")
    context = _base(
        request, catalog=found.catalog, source=found, facts=selectors.source_facts(found),
        tags=list(found.tags.all()), documents=_page(request, documents, DOCUMENTS_PAGE, "docs"),
        chunks=chunks, chunk_rows=[(chunk, selectors.chunk_end(chunk)) for chunk in chunks.object_list],
        document=chosen, activity=selectors.activity(catalog=found.catalog, source=found),
        panels=source_panels(request, found),
        queries={param: _query_without(request, param) for param in ("docs", "chunks", "files")})
    if found.kind == ReferenceSource.Kind.UPLOAD:
        context.update(files=_page(request, selectors.source_uploads(found), FILES_PAGE, "files"),
                       upload_form=UploadForm(), upload_suffixes=",".join(UPLOAD_SUFFIXES),
                       max_upload_bytes=max_upload_bytes())
    return render(request, "catalog/source.html", context)


@curators
@require_http_methods(["GET", "POST"])
def source_edit(request: HttpRequest, catalog: str, source: str) -> HttpResponse:
    found = _source_or_404(request, catalog, source)
    posted = request.method == "POST"
    form = SourceForm(source_form_data(request.POST) if posted else None, kind=found.kind, editing=found)
    status = 400  # the form's errors; 409: other writers kept conflicting
    if form.is_valid():
        data = form.cleaned_data

        def update() -> list[str]:
            return source_update(source=found, settings=form.settings(), location=data.get("location"),
                                 content=data.get("content"), git=form.git(), web=form.web(),
                                 by=person(request))
        try:
            # A content change and the run that indexes it are stored together (or neither).
            changed, run = source_edit_queued(source=found, trigger=IndexRun.Trigger.UI, edit=update,
                                              reindex=lambda fields: needs_reindex(found.kind, fields))
        except ValidationError as error:
            apply_errors(form, error)
        except EditConflict as conflict:
            found.refresh_from_db()  # an attempt rolled back may have left its values on it
            form.add_error(None, f"Not saved: {conflict}.")
            status = 409
        else:
            return _done(request, reverse("catalogs-source", args=[found.catalog.slug, found.slug]),
                         _saved_note(found, changed, reindexed=run is not None))
    context = _source_form_context(request, found.catalog, form, editing=found)
    if not posted:
        return render(request, "catalog/source_form.html", context)
    return _form_response(request, "catalog/source_form.html", "catalog/partials/source_form.html", context, status)


def _saved_note(source: ReferenceSource, changed: list[str], *, reindexed: bool) -> str:
    if reindexed:
        return f"Source {source.slug} saved; its content changed, so it is being reindexed."
    return f"Source {source.slug} saved ({', '.join(changed)} changed)." if changed else "Nothing changed."


@curators
@require_http_methods(["GET", "POST"])
def source_remove(request: HttpRequest, catalog: str, source: str) -> HttpResponse:
    found = _source_or_404(request, catalog, source)
    error, status = "", 200
    if request.method == "POST":
        try:
            source_delete(source=found, by=person(request))
        except SourceBusy as busy:
            error, status = f"Not deleted: {busy}.", 409
        else:
            return _done(request, reverse("catalogs-detail", args=[catalog]), f"Source {source} deleted.")
    facts = selectors.source_facts(found)
    return render(request, "catalog/source_delete.html", _base(
        request, catalog=found.catalog, source=found, facts=facts, error=error,
        files=found.uploads.count(), runs=found.index_runs.count(), notes=deletion_notes(source=found)),
        status=status)


@curators
@require_POST
def source_reindex(request: HttpRequest, catalog: str, source: str) -> HttpResponse:
    found = _source_or_404(request, catalog, source)
    form = ReindexForm(request.POST)
    full = form.is_valid() and form.cleaned_data["full"]
    run, _ = index_run_request(source=found, trigger=IndexRun.Trigger.UI, full=full)
    return _reindex_response(request, found.catalog, found, [run],
                             reverse("catalogs-source", args=[found.catalog.slug, found.slug]))


@curators
@require_POST
def source_upload(request: HttpRequest, catalog: str, source: str) -> HttpResponse:
    """More files for an upload source; the source is reindexed (only what changed)."""
    found = _source_or_404(request, catalog, source)
    form = UploadForm(request.POST, request.FILES)
    here = reverse("catalogs-source", args=[found.catalog.slug, found.slug])
    status = 409  # the source refuses files, or other writers kept conflicting; 400: the files
    if found.kind != ReferenceSource.Kind.UPLOAD:
        form.add_error(None, f"Source {found.slug} is a {found.kind} source: only upload sources take files.")
    elif not form.is_valid():
        status = 400
    else:
        documents = form.cleaned_data["uploads"]
        try:
            source_edit_queued(source=found, trigger=IndexRun.Trigger.UI,
                               edit=lambda: uploads_add(source=found, documents=documents, by=person(request)))
        except EditConflict as conflict:
            form.add_error(None, f"Not uploaded: {conflict}.")
        else:
            names = ", ".join(d.path for d in documents[:5]) + (" …" if len(documents) > 5 else "")
            return _done(request, here, f"Uploaded {len(documents)} file{'s' if len(documents) != 1 else ''} "
                                        f"({names}); the source is being reindexed.")
    context = _base(request, catalog=found.catalog, source=found, upload_form=form,
                    upload_suffixes=",".join(UPLOAD_SUFFIXES), max_upload_bytes=max_upload_bytes())
    return _form_response(request, "catalog/upload.html", "catalog/partials/upload_form.html", context, status)


@curators
@require_POST
def source_file_delete(request: HttpRequest, catalog: str, source: str) -> HttpResponse:
    found = _source_or_404(request, catalog, source)
    form = UploadDeleteForm(request.POST)
    here = reverse("catalogs-source", args=[found.catalog.slug, found.slug])
    if not form.is_valid():
        messages.error(request, "Say which file to remove.")
        return redirect(here)
    path = form.cleaned_data["path"]
    try:
        removed, _ = source_edit_queued(source=found, trigger=IndexRun.Trigger.UI,
                                        edit=lambda: upload_delete(source=found, path=path, by=person(request)))
    except (SourceError, EditConflict) as error:
        messages.error(request, f"Not removed: {error}.")
        return redirect(here)
    if not removed:
        raise Http404(f"Source {source!r} has no file {path!r}.")
    return _done(request, here, f"Removed {path}; the source is being reindexed.")


# --- what the source form asks while a curator types ---------------------------------------


@curators
@require_GET
def tag_suggest(request: HttpRequest) -> HttpResponse:
    """Existing tags like the one being typed, except those already chosen."""
    typed = request.GET.get("tags_new", "").split(",")[-1][:100]
    chosen = TagsField().to_python(request.GET.getlist("tags"))
    return render(request, "catalog/partials/tag_suggestions.html",
                  {"suggestions": tags_suggested(typed=typed, chosen=chosen), "typed": typed.strip()})


@curators
@require_GET
def tag_chips(request: HttpRequest) -> HttpResponse:
    """Chips for the names typed (comma-separated), skipping those already chosen; a name
    that cannot be a tag comes back as the editor's error instead."""
    chosen = {name.lower() for name in TagsField().to_python(request.GET.getlist("tags"))}
    names = [n for n in TagsField().to_python(request.GET.getlist("tags_new")) if n.lower() not in chosen]
    problems = [f"{name}: {problem}" for name in names if (problem := tag_name_problem(name))]
    if problems:
        response = render(request, "catalog/partials/tag_error.html", {"problems": problems}, status=400)
        return reswap(retarget(response, "#tag-error"), "outerHTML")
    return render(request, "catalog/partials/tag_chips.html", {"names": names, "clear_error": True})


@curators
@require_GET
def glob_preview(request: HttpRequest) -> HttpResponse:
    """The files a glob pattern finds now, under which source root, or why it is refused."""
    pattern = request.GET.get("location", "").strip()[:1024]
    context: dict[str, Any] = {"pattern": pattern}
    if pattern:
        try:
            files, skipped = glob_entries(pattern)
        except SourceError as error:
            context["error"] = str(error)
        else:
            indexed = [path for path, real, _ in files if real.suffix.lower() in UPLOAD_SUFFIXES]
            context.update(count=len(indexed), shown=indexed[:GLOB_PREVIEW], others=len(files) - len(indexed),
                           skipped=skipped[:GLOB_PREVIEW])
    return render(request, "catalog/partials/glob_preview.html", context)
