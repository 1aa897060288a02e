"""Creating and changing reference sources (the dashboard): each kind's rule checked
before anything is written (a glob under a source root, an inline text within the size
limit, an upload's files read by catalog.sources.uploads), tags made as needed, and who
changed it recorded and announced once per edit (editing.source_changed_by: four eyes
reads it, approvals audits it).

Indexing is the caller's: a content change (or a new source) and the run that indexes
it are one transaction, as for the API's edits (catalog.indexing.runs.source_edit_queued,
source_create_queued). Deleting lives with the
write path (catalog.indexing.removal): it removes index rows under the source's lock."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from catalog.models import Catalog, ReferenceSource
from catalog.sealing import seal
from catalog.sources.documents import DocumentInput
from catalog.sources.editing import source_changed_by, uploads_write
from catalog.sources.errors import SourceError
from catalog.sources.git import remote_problem, secret_problem
from catalog.sources.globs import root_and_pattern
from catalog.sources.repository import SECRET_PURPOSE
from catalog.sources.uploads import text_size_problem
from catalog.sources.webfetch import url_problem
from catalog.tag_keys import tag_key
from catalog.tags import MAX_TAGS_PER_SOURCE, tag_name_problem, tags_ensure

SETTINGS = ("name", "description", "mode", "requires_approval")
# What each kind reads its content from: a change of it needs a reindex.
CONTENT_FIELD: dict[str, str] = {ReferenceSource.Kind.GLOB: "location", ReferenceSource.Kind.INLINE: "content",
                                 ReferenceSource.Kind.GIT: "location", ReferenceSource.Kind.WEB: "location"}
GIT_FIELDS = ("location", "ref", "include", "exclude")
WEB_FIELDS = ("location", "include", "exclude", "max_depth", "max_pages")


def needs_reindex(kind: str, fields: list[str]) -> bool:
    """Whether an edit of these fields changed what a source of `kind` reads."""
    if kind == ReferenceSource.Kind.GIT:
        return not {*GIT_FIELDS, "secret"}.isdisjoint(fields)
    if kind == ReferenceSource.Kind.WEB:
        return not set(WEB_FIELDS).isdisjoint(fields)
    return CONTENT_FIELD.get(kind) in fields


@dataclass
class GitSettings:
    """A git source's remote: its URL or path, the branch, tag or commit, the globs that
    select its files, and its secret (an https token or an ssh deploy key): None keeps
    the one stored, "" removes it."""

    location: str
    ref: str = ""
    include: str = ""
    exclude: str = ""
    secret: str | None = None

    def apply(self, source: ReferenceSource) -> list[str]:
        """Set these on `source`; the fields that changed ("secret" for the secret).
        ValidationError when the secret may not go where the source now reads from: a
        stored one is never sent to another repository (it must be given again), a
        deploy key goes over ssh only and a token over https (catalog.sources.git)."""
        moved = self.location.strip() != source.location
        if moved and self.secret is None and source.secret_sealed:
            raise ValidationError({"secret": "The repository changed: give its token or key again, or remove the "
                                             "stored one (a stored secret is never sent to another repository)."})
        if self.secret and (problem := _secret_problem(self.location.strip(), self.secret.strip())):
            raise ValidationError({"secret": f"{problem[0].upper()}{problem[1:]}."})
        changed = []
        for name in GIT_FIELDS:
            value = getattr(self, name).strip() if name != "location" else self.location.strip()
            if getattr(source, name) != value:
                setattr(source, name, value)
                changed.append(name)
        if self.secret is not None:
            secret = self.secret.strip()
            source.secret_sealed = seal(secret, purpose=SECRET_PURPOSE) if secret else ""
            source.secret_hint = f"…{secret[-HINT_CHARS:]}" if len(secret) > 3 * HINT_CHARS else ""
            changed.append("secret")
        return changed


HINT_CHARS = 4  # what a source's page shows of its secret: no more than this, of a long one


def _secret_problem(location: str, secret: str) -> str | None:
    try:
        return secret_problem(location, secret)
    except SourceError:  # the location itself is refused: its own field says why
        return None


@dataclass
class WebSettings:
    """A web source's crawl: its start URL (a page, or a sitemap .xml), the globs of the URL
    paths it takes, and how deep and how many pages it goes (catalog.sources.website)."""

    location: str
    include: str = ""
    exclude: str = ""
    max_depth: int = 3
    max_pages: int = 200

    def apply(self, source: ReferenceSource) -> list[str]:
        """Set these on `source`; the fields that changed."""
        changed = []
        for name in WEB_FIELDS:
            value = getattr(self, name)
            value = value.strip() if isinstance(value, str) else value
            if getattr(source, name) != value:
                setattr(source, name, value)
                changed.append(name)
        return changed


@dataclass
class SourceSettings:
    """What every kind of source has, and what a curator edits on any of them."""

    name: str
    description: str = ""
    mode: str = ReferenceSource.Mode.SELECTABLE
    requires_approval: bool = False
    tags: list[str] = field(default_factory=list)


def _check_tags(names: list[str]) -> None:
    problems = [f"{name!r}: {problem}" for name in names if (problem := tag_name_problem(name))]
    if len({tag_key(name) for name in names}) > MAX_TAGS_PER_SOURCE:
        problems.append(f"a source has at most {MAX_TAGS_PER_SOURCE} tags")
    if problems:
        raise ValidationError({"tags": problems})


def _check_content(source: ReferenceSource) -> None:
    """The kind's own rule, beyond the model's: a glob stays under a source root, an
    inline text is within the size a source takes at once, and a repository or a site
    is one Lectern may reach."""
    if source.kind == ReferenceSource.Kind.GLOB and source.location:
        try:
            root_and_pattern(source.location)
        except SourceError as exc:
            raise ValidationError({"location": str(exc)}) from None
    if source.kind == ReferenceSource.Kind.INLINE:
        if problem := text_size_problem(len(source.content.encode("utf-8"))):
            raise ValidationError({"content": f"The text {problem}."})
    if source.kind == ReferenceSource.Kind.GIT and source.location:
        if problem := remote_problem(source.location):
            raise ValidationError({"location": problem})
    if source.kind == ReferenceSource.Kind.WEB and source.location:
        if problem := url_problem(source.location):
            raise ValidationError({"location": problem})


def _check_slug_free(source: ReferenceSource) -> None:
    if source._state.adding and ReferenceSource.objects.filter(catalog_id=source.catalog_id, slug=source.slug).exists():
        raise ValidationError({"slug": f"The catalog already has a source {source.slug!r}."})


def _validated(source: ReferenceSource, tags: list[str]) -> None:
    """Every rule, all problems at once (a form shows each beside its field)."""
    errors: dict[str, list[str]] = {}
    def model_rules() -> None:
        source.full_clean(validate_constraints=False)  # the slug's uniqueness: _check_slug_free says it better

    checks: list[Callable[[], None]] = [lambda: _check_tags(tags), lambda: _check_content(source),
                                        lambda: _check_slug_free(source), model_rules]
    for check in checks:
        try:
            check()
        except ValidationError as exc:
            for name, messages in exc.message_dict.items():
                errors.setdefault(name, []).extend(m for m in messages if m not in errors.get(name, []))
    if errors:
        raise ValidationError(errors)


def source_create(*, catalog: Catalog, slug: str, kind: str, settings: SourceSettings, location: str = "",
                  content: str = "", files: list[DocumentInput] | None = None, git: GitSettings | None = None,
                  web: WebSettings | None = None, by: User | None) -> ReferenceSource:
    """A new source of `kind` (its content: the glob `location`, the inline `content`,
    the upload `files`, the `git` remote or the `web` site), announced as created by `by`.
    ValidationError names each field at fault; nothing is written then."""
    if kind == ReferenceSource.Kind.UPLOAD:
        location = slug  # what upload sources created elsewhere hold (upload_source_ensure)
    source = ReferenceSource(catalog=catalog, slug=slug, kind=kind, location=location, content=content,
                             name=settings.name, description=settings.description, mode=settings.mode,
                             requires_approval=settings.requires_approval)
    if kind == ReferenceSource.Kind.GIT and git is not None:
        git.apply(source)
    if kind == ReferenceSource.Kind.WEB and web is not None:
        web.apply(source)
    _validated(source, settings.tags)
    with transaction.atomic():
        try:
            with transaction.atomic():
                source.save()
        except IntegrityError:  # created by someone else since the check
            raise ValidationError({"slug": f"The catalog already has a source {slug!r}."}) from None
        source.tags.set(tags_ensure(names=settings.tags))
        if files:
            uploads_write(source=source, documents=files)
        written = [*SETTINGS, "tags", CONTENT_FIELD.get(source.kind, "files")]
        source_changed_by(source=source, by=by, fields=["created", *written])
    return source


def source_update(*, source: ReferenceSource, settings: SourceSettings, location: str | None = None,
                  content: str | None = None, git: GitSettings | None = None, web: WebSettings | None = None,
                  by: User | None) -> list[str]:
    """Change a source's settings (and a glob's pattern or an inline text); the fields
    that changed, announced once when any did. The kind and the slug never change: the
    slug is the reference id agents, chunk keys and approvals know it by."""
    with transaction.atomic():
        # The source row alone: the catalog row is locked first by whoever locks both
        # (catalog.indexing.runs, lock order), so a join's lock of it could deadlock.
        current = ReferenceSource.objects.select_for_update(of=("self",)).select_related("catalog").get(pk=source.pk)
        wanted = {name: getattr(settings, name) for name in SETTINGS}
        if location is not None and current.kind == ReferenceSource.Kind.GLOB:
            wanted["location"] = location
        if content is not None and current.kind == ReferenceSource.Kind.INLINE:
            wanted["content"] = content
        changed = [name for name, value in wanted.items() if getattr(current, name) != value]
        for name in changed:
            setattr(current, name, wanted[name])
        if git is not None and current.kind == ReferenceSource.Kind.GIT:
            changed += git.apply(current)
        if web is not None and current.kind == ReferenceSource.Kind.WEB:
            changed += web.apply(current)
        _validated(current, settings.tags)
        old_keys = set(current.tags.values_list("key", flat=True))
        if old_keys != {tag_key(name) for name in settings.tags}:
            current.tags.set(tags_ensure(names=settings.tags))
            changed.append("tags")
        if changed:
            current.save()
            source_changed_by(source=current, by=by, fields=changed)
    source.refresh_from_db()
    return changed
