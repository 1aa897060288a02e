"""Forms of the curator's dashboard. They read and check input as a browser sends it;
the rules of what a catalog or a source may be are the services' (catalog.catalogs,
catalog.sources.lifecycle, catalog.sources.uploads), whose ValidationErrors the views
put back on these forms beside the fields they name."""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import UploadedFile as UploadedFormFile
from django.http import QueryDict

from catalog.catalogs import CatalogSettings, ranking_stamp
from catalog.models import MAX_CRAWL_DEPTH, MAX_CRAWL_PAGES, Catalog, ReferenceSource
from catalog.ranking import FUSIONS, LIMITS, MODES, NORMALISATIONS, RankingSettings
from catalog.sources.documents import DocumentInput
from catalog.sources.lifecycle import GitSettings, SourceSettings, WebSettings
from catalog.sources.uploads import UploadRefused, text_size_problem, upload_text
from catalog.tag_keys import tag_key
from catalog.tags import tag_name_problem

MAX_UPLOAD_FILES = 50  # files in one upload (each up to LECTERN_MAX_UPLOAD_BYTES)
SEARCH_MAX_CHARS = 200


def apply_errors(form: forms.Form, error: ValidationError) -> None:
    """A service's ValidationError shown on `form`: beside the field it names when the
    form has one, else above the form."""
    aliases: dict[str, str] = getattr(form, "aliases", {})
    for name, messages in error.message_dict.items():
        name = aliases.get(name, name)
        field = name if name in form.fields else None
        for message in messages:
            form.add_error(field, message)


# --- catalogs -------------------------------------------------------------------------------


class CatalogForm(forms.Form):
    slug = forms.SlugField(max_length=64, label="Id", help_text="Its id in agents' requests and in every chunk key; "
                                                    "it cannot be changed later.")
    name = forms.CharField(max_length=200)
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}))
    chunk_size = forms.IntegerField(min_value=100, max_value=20_000, initial=1000,
                                    help_text="Characters per chunk; 1000 keeps all-MiniLM-L6-v2 (256 tokens) "
                                              "reading chunks whole.")
    chunk_overlap = forms.IntegerField(min_value=0, max_value=10_000, initial=100,
                                       help_text="Characters each chunk repeats of the one before.")

    def __init__(self, data: Any = None, *, editing: Catalog | None = None, **kwargs: Any) -> None:
        if editing is not None and data is None:
            kwargs["initial"] = {"name": editing.name, "description": editing.description,
                                 "chunk_size": editing.chunk_size, "chunk_overlap": editing.chunk_overlap}
        super().__init__(data, **kwargs)
        if editing is not None:
            del self.fields["slug"]
            self.fields["chunk_size"].help_text += " A change re-chunks every document (a full reindex)."

    def settings(self) -> CatalogSettings:
        data = self.cleaned_data
        return CatalogSettings(name=data["name"], description=data["description"], chunk_size=data["chunk_size"],
                               chunk_overlap=data["chunk_overlap"])


def _number(name: str, label: str, help_text: str, *, whole: bool = False, required: bool = True) -> forms.Field:
    low, high = LIMITS[name]
    if whole:
        return forms.IntegerField(min_value=int(low), max_value=int(high), label=label, help_text=help_text)
    return forms.FloatField(min_value=low, max_value=high, label=label, help_text=help_text, required=required,
                            widget=forms.NumberInput(attrs={"step": "any"}))


class RankingForm(forms.Form):
    """A catalog's ranking settings (catalog.ranking); catalog_ranking_update checks and
    audits them."""

    mode = forms.ChoiceField(choices=[(m, m) for m in MODES], label="Default mode",
                             help_text="What a search that names no mode runs.")
    fusion = forms.ChoiceField(choices=[(f, f) for f in FUSIONS], label="Hybrid fusion",
                               help_text="rrf: reciprocal rank fusion; convex: a weighted sum of normalised scores.")
    rrf_k = _number("rrf_k", "RRF k", "A hit ranked r adds weight / (k + r): the larger k, the less the top ranks "
                                      "outweigh the rest.", whole=True)
    bm25_weight = _number("bm25_weight", "BM25 weight", "Its weight in either fusion (convex: over the sum).")
    vector_weight = _number("vector_weight", "Vector weight", "Its weight in either fusion (convex: over the sum).")
    normalization = forms.ChoiceField(choices=[(n, n) for n in NORMALISATIONS], label="Convex normalisation")
    k1 = _number("k1", "BM25 k1", "How fast a term's repeats in a chunk saturate (0: presence only).")
    b = _number("b", "BM25 b", "How much a chunk longer than the average is discounted (0 to 1).")
    fusion_depth = _number("fusion_depth", "Fusion depth", "How many hits each list contributes before fusing.",
                           whole=True)
    vector_feedback = _number("vector_feedback", "Vector feedback",
                              "Chunks of a first vector search the query is moved toward before searching again "
                              "(0: off).", whole=True)
    feedback_weight = _number("feedback_weight", "Feedback weight", "How far the query moves toward them.")
    bm25_feedback = _number("bm25_feedback", "BM25 feedback",
                            "Chunks of a first BM25 search whose most typical terms are added to the query before "
                            "searching again (RM3; 0: off).", whole=True)
    bm25_feedback_terms = _number("bm25_feedback_terms", "Terms added", "How many terms BM25 feedback adds.",
                                  whole=True)
    bm25_feedback_weight = _number("bm25_feedback_weight", "Added terms' weight",
                                   "The added terms' share of the query's weight (0 to 1).")
    semantic_threshold = _number("semantic_threshold", "Semantic threshold",
                                 "Enrichment: the least similarity for a hint by meaning; empty: each agent's own.",
                                 required=False)
    semantic_margin = _number("semantic_margin", "Semantic margin",
                              "Enrichment: how close to the best match a hint must score; empty: each agent's own.",
                              required=False)

    seen = forms.CharField(required=False, widget=forms.HiddenInput)  # catalog.catalogs.ranking_stamp

    def __init__(self, data: Any = None, *, editing: Catalog, **kwargs: Any) -> None:
        if data is None:
            kwargs["initial"] = {**editing.ranking_settings.__dict__, "seen": ranking_stamp(editing)}
        kwargs.setdefault("label_suffix", "")
        super().__init__(data, **kwargs)
        for name, field in self.fields.items():
            default = getattr(RankingSettings(), name, None)  # (the hidden stamp has none)
            if default is not None:
                field.help_text += f" Default: {default}."

    def values(self) -> dict[str, Any]:
        return {name: value for name, value in self.cleaned_data.items() if name != "seen"}


class CatalogDeleteForm(forms.Form):
    """Deleting a catalog takes its slug typed again: it goes with everything in it."""

    confirm = forms.CharField(max_length=64, label="Type the catalog's id to confirm")

    def __init__(self, *args: Any, catalog: Catalog, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.catalog = catalog

    def clean_confirm(self) -> str:
        value: str = self.cleaned_data["confirm"].strip()
        if value != self.catalog.slug:
            raise ValidationError(f"Type {self.catalog.slug} exactly to delete this catalog.")
        return value


# --- sources --------------------------------------------------------------------------------


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class UploadsField(forms.FileField):
    """Several files from one `<input type=file multiple>`, each read as a document
    (catalog.sources.uploads.upload_text: type, size, UTF-8); every refusal is listed."""

    widget = MultipleFileInput

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.widget.attrs.update({"multiple": True})

    def clean(self, data: Any, initial: Any = None) -> list[DocumentInput]:
        files = [f for f in (data if isinstance(data, list | tuple) else [data]) if f]
        if not files:
            if self.required:
                raise ValidationError("Choose at least one file.")
            return []
        if len(files) > MAX_UPLOAD_FILES:
            raise ValidationError(f"Upload at most {MAX_UPLOAD_FILES} files at once.")
        documents, problems = [], []
        for upload in files:
            try:
                documents.append(_read(upload))
            except UploadRefused as refused:
                problems.append(str(refused))
        if problems:
            raise ValidationError(problems)
        return documents


def _read(upload: UploadedFormFile[Any]) -> DocumentInput:
    name = upload.name or ""
    if problem := text_size_problem(upload.size or 0):  # before reading it into memory
        raise UploadRefused(f"{name}: {problem}")
    return upload_text(name=name, data=upload.read())


class TagsField(forms.Field):
    """Tag names: the chips kept (one `tags` value each) and any typed into the editor's
    input, comma-separated (`tags_new`; what a browser without scripts sends)."""

    widget = forms.MultipleHiddenInput

    def to_python(self, value: Any) -> list[str]:
        values = value if isinstance(value, list | tuple) else [value] if value else []
        names: dict[str, str] = {}
        for value in values:
            for name in str(value).split(","):
                if name.strip():
                    names.setdefault(tag_key(name) or name.strip(), name.strip())
        return list(names.values())

    def validate(self, value: list[str]) -> None:
        problems = [f"{name}: {problem}" for name in value if (problem := tag_name_problem(name))]
        if problems:
            raise ValidationError(problems)


GIT_FORM_FIELDS = ("remote", "ref", "include", "exclude", "secret", "secret_remove")
WEB_FORM_FIELDS = ("url", "include", "exclude", "max_depth", "max_pages")
# The kinds each content field belongs to; a form of another kind has no such field.
FIELD_KINDS = {"location": {"glob"}, "content": {"inline"}, "uploads": {"upload"},
               **{name: {"git"} for name in GIT_FORM_FIELDS}, **{name: {"web"} for name in WEB_FORM_FIELDS},
               "include": {"git", "web"}, "exclude": {"git", "web"}}


class SourceForm(forms.Form):
    """A source of any kind: the settings every kind has, and the content of its own kind
    (a glob, an inline text, files). A new upload source needs its first files."""

    slug = forms.SlugField(max_length=100, label="Id", help_text="The reference id agents use (@id): letters, "
                                                                 "digits, - and _; it cannot be changed later.")
    name = forms.CharField(max_length=200)
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}),
                                  help_text="What it is for: semantic detection matches texts against it.")
    mode = forms.ChoiceField(choices=ReferenceSource.Mode.choices, initial=ReferenceSource.Mode.SELECTABLE,
                             widget=forms.RadioSelect)
    requires_approval = forms.BooleanField(required=False, label="Requires approval",
                                           help_text="Agents read it only once a reviewer approves its content.")
    tags = TagsField(required=False)
    location = forms.CharField(max_length=1024, required=False, label="Glob",
                               help_text="Relative to the first source root, or absolute inside one; ** matches "
                                         "folders. Markdown, text, HTML, PDF, DOCX and PPTX files are indexed.")
    content = forms.CharField(required=False, strip=False, widget=forms.Textarea(attrs={"rows": 12}),
                              label="Text", help_text="Markdown or plain text.")
    uploads = UploadsField(required=False, label="Files")
    remote = forms.CharField(
        max_length=1024, required=False, label="Repository",
        help_text="https://host/org/repo.git, ssh://git@host/org/repo.git, git@host:org/repo.git, or the path "
                  "of a repository under a source root.")
    ref = forms.CharField(max_length=255, required=False, label="Branch, tag or commit",
                          help_text="Blank: the repository's default branch.")
    include = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3, "class": "mono"}),
                              label="Include", help_text="Globs of the files to index, one per line (docs/**, "
                                                         "*.md); blank: every file Lectern reads.")
    exclude = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3, "class": "mono"}),
                              label="Exclude", help_text="Globs of the files to leave out, one per line.")
    secret = forms.CharField(
        required=False, strip=False, label="Token or deploy key",
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
        help_text="An https access token, or an ssh private key; stored sealed and never shown again.")
    secret_remove = forms.BooleanField(required=False, label="Remove the stored token or key")
    url = forms.CharField(max_length=1024, required=False, label="Start URL",
                          help_text="The page the crawl starts from (https://docs.example.com/), or a sitemap "
                                    "(https://docs.example.com/sitemap.xml) whose pages it takes. Only pages of "
                                    "that site are crawled, as its robots.txt allows.")
    max_depth = forms.IntegerField(min_value=0, max_value=MAX_CRAWL_DEPTH, initial=3, label="Depth",
                                   help_text="Links followed from the start page (0: the start page alone).")
    max_pages = forms.IntegerField(min_value=1, max_value=MAX_CRAWL_PAGES, initial=200, label="Page limit",
                                   help_text="The most pages one crawl requests.")

    def __init__(self, data: Any = None, files: Any = None, *, kind: str, editing: ReferenceSource | None = None,
                 **kwargs: Any) -> None:
        self.kind, self.editing = kind, editing
        if editing is not None and data is None:
            kwargs["initial"] = {"name": editing.name, "description": editing.description, "mode": editing.mode,
                                 "requires_approval": editing.requires_approval, "location": editing.location,
                                 "content": editing.content, "tags": [t.name for t in editing.tags.all()],
                                 "remote": editing.location, "ref": editing.ref, "include": editing.include,
                                 "exclude": editing.exclude, "url": editing.location,
                                 "max_depth": editing.max_depth, "max_pages": editing.max_pages}
        super().__init__(data, files, **kwargs)
        if editing is not None:
            del self.fields["slug"]
        # The service names a source's URL or path `location`; these forms call it otherwise.
        self.aliases = {"location": {"git": "remote", "web": "url"}.get(kind, "location")}
        for name, kinds in FIELD_KINDS.items():
            if kind not in kinds or (name == "uploads" and editing is not None) or (
                    name == "secret_remove" and (editing is None or not editing.secret_sealed)):
                del self.fields[name]
        if kind == ReferenceSource.Kind.WEB:
            self.fields["url"].required = self.fields["max_depth"].required = self.fields["max_pages"].required = True
            self.fields["include"].help_text = ("Globs of the URL paths to crawl, one per line (docs/**, *.html); "
                                                "blank: every page of the site.")
            self.fields["exclude"].help_text = "Globs of the URL paths to leave out, one per line."
        if kind == ReferenceSource.Kind.GIT:
            self.fields["remote"].required = True
            if editing is not None and editing.secret_sealed:
                self.fields["secret"].help_text = (f"A token or key is stored ({editing.secret_hint or 'sealed'}); "
                                                   "leave blank to keep it, or enter a new one.")
        if kind == ReferenceSource.Kind.GLOB:
            self.fields["location"].required = True
        if kind == ReferenceSource.Kind.INLINE:
            self.fields["content"].required = True
        if "uploads" in self.fields:
            self.fields["uploads"].required = True

    def clean_content(self) -> str:
        content: str = self.cleaned_data["content"]
        if problem := text_size_problem(len(content.encode("utf-8"))):
            raise ValidationError(f"The text {problem}.")
        return content

    def git(self) -> GitSettings | None:
        """A git source's remote as the form says it; None for other kinds."""
        if self.kind != ReferenceSource.Kind.GIT:
            return None
        data = self.cleaned_data
        secret = "" if data.get("secret_remove") else (data["secret"] or None)
        return GitSettings(data["remote"], ref=data["ref"], include=data["include"], exclude=data["exclude"],
                           secret=secret)

    def web(self) -> WebSettings | None:
        """A web source's crawl as the form says it; None for other kinds."""
        if self.kind != ReferenceSource.Kind.WEB:
            return None
        data = self.cleaned_data
        return WebSettings(data["url"], include=data["include"], exclude=data["exclude"],
                           max_depth=data["max_depth"], max_pages=data["max_pages"])

    def tag_names(self) -> list[str]:
        """The tags the form shows now: what was sent, else what the source has."""
        if self.is_bound:
            return TagsField().to_python(cast(QueryDict, self.data).getlist("tags"))
        return list(self.initial.get("tags", []))

    def settings(self) -> SourceSettings:
        data = self.cleaned_data
        return SourceSettings(name=data["name"], description=data["description"], mode=data["mode"],
                              requires_approval=data["requires_approval"], tags=data["tags"])


def source_form_data(post: Any) -> Any:
    """A copy of the POST whose `tags` holds the kept chips and the typed names."""
    data = post.copy()
    data.setlist("tags", post.getlist("tags") + post.getlist("tags_new"))
    return data


class UploadForm(forms.Form):
    """More files for an upload source (a file with a path it has already is replaced)."""

    uploads = UploadsField(label="Add or replace files")


class ReindexForm(forms.Form):
    full = forms.BooleanField(required=False, help_text="Re-chunk and re-embed every document, changed or not.")


class UploadDeleteForm(forms.Form):
    path = forms.CharField(max_length=1024)
