"""The demo catalog: the engineering handbook shipped in catalog/demo/.

demo_load() is idempotent, so `make run` can call it on every start:
  1. create or update the "demo" catalog, its tags and one glob source per sources.json entry
  2. index each source whose files changed since it was last indexed (by fingerprint),
     each as an IndexRun under the source's lock
  3. create the superuser "admin" with a random password unless that user exists, or
     replace the fixed password earlier versions gave it (the password is returned to
     be shown once; only its hash is stored)
  4. issue a fresh token for the agent "demo-agent", scoped to the demo catalog

Catalog content only: `manage.py load_demo` (retrieval) then embeds the sources'
detection profiles, so the first enrich request does not pay for them.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.db import transaction

from catalog.agents import agent_token_rotate
from catalog.embedder import get_embedder
from catalog.indexing.runs import source_index_now
from catalog.models import Catalog, IndexRun, ReferenceSource
from catalog.progress import Progress
from catalog.sources.documents import source_collect
from catalog.sources.errors import SourceError
from catalog.sources.globs import source_roots
from catalog.tags import tags_ensure

DEMO_DIR = Path(__file__).resolve().parent / "demo"
DEMO_CATALOG = {"slug": "demo", "name": "Engineering handbook",
                "description": "A software-engineering handbook: resilience patterns, APIs, data, operations "
                               "and team practices. Shipped with Lectern as a demo."}
ADMIN_USERNAME = "admin"
FORMER_ADMIN_PASSWORD = "lectern"  # what earlier versions gave every install: known to all
AGENT_NAME = "demo-agent"


@dataclass
class DemoReport:
    catalog: Catalog
    indexed: dict[str, IndexRun] = field(default_factory=dict)
    unchanged: list[str] = field(default_factory=list)
    admin_password: str | None = None  # set only when this load created the admin or replaced its password
    token: str = ""


def demo_load(*, sources_file: Path = DEMO_DIR / "sources.json", progress: Progress | None = None) -> DemoReport:
    """Load the demo; see the module docstring for the steps."""
    specs = json.loads(sources_file.read_text(encoding="utf-8"))
    catalog = demo_catalog_upsert()
    report = DemoReport(catalog=catalog)
    for spec in specs:
        source = demo_source_upsert(catalog=catalog, spec=spec)
        if source_is_current(source=source):
            report.unchanged.append(source.slug)
        else:
            run = source_index_now(source=source, trigger=IndexRun.Trigger.COMMAND, progress=progress)
            if run.status != IndexRun.Status.SUCCEEDED:
                raise SourceError(f"demo source {source.slug}: run {run.pk} {run.status}: {run.error}")
            report.indexed[source.slug] = run
    catalog.refresh_from_db()
    report.admin_password = demo_admin_ensure()
    _, report.token = agent_token_rotate(name=AGENT_NAME, catalogs=[catalog], is_active=True)
    return report


def demo_catalog_upsert() -> Catalog:
    catalog = Catalog.objects.filter(slug=DEMO_CATALOG["slug"]).first() or Catalog(slug=DEMO_CATALOG["slug"])
    catalog.name, catalog.description = DEMO_CATALOG["name"], DEMO_CATALOG["description"]
    catalog.full_clean()
    catalog.save()
    return catalog


def _demo_location(location: str) -> str:
    """Relative globs resolve against the first source root; when another root comes
    first (LECTERN_SOURCE_ROOTS), point at the shipped files by absolute path instead."""
    roots = source_roots()
    if roots and roots[0] == DEMO_DIR:
        return location
    return str(DEMO_DIR / location)


@transaction.atomic
def demo_source_upsert(*, catalog: Catalog, spec: dict[str, Any]) -> ReferenceSource:
    source = ReferenceSource.objects.filter(catalog=catalog, slug=spec["slug"]).first() \
        or ReferenceSource(catalog=catalog, slug=spec["slug"])
    source.name, source.description = spec["name"], spec.get("description", "")
    source.kind, source.location = ReferenceSource.Kind.GLOB, _demo_location(spec["location"])
    source.mode = spec.get("mode", ReferenceSource.Mode.SELECTABLE)
    source.requires_approval = bool(spec.get("requires_approval", False))
    source.full_clean()
    source.save()
    source.tags.set(tags_ensure(names=spec.get("tags", [])))
    return source


def source_is_current(*, source: ReferenceSource) -> bool:
    """Indexed from the files as they are now, and with embeddings if a model is loaded
    (a source indexed lexical-only before the model was available is stale)."""
    done = {ReferenceSource.Status.READY}
    if get_embedder() is None:
        done.add(ReferenceSource.Status.LEXICAL_ONLY)
    if source.status not in done or not source.fingerprint:
        return False
    return source.fingerprint == source_collect(source=source).fingerprint


def demo_admin_ensure() -> str | None:
    """Create the demo superuser with a random password unless a user of that name
    exists; an existing one keeps its password unless it is still the fixed one earlier
    versions set (a known login on every install). Returns the new password, which
    nothing stores in clear, or None when nothing changed. The password meets
    AUTH_PASSWORD_VALIDATORS like any other (ValidationError when they refuse it)."""
    users = get_user_model()
    password = secrets.token_urlsafe(16)
    admin = users.objects.filter(username=ADMIN_USERNAME).first()
    if admin is None:
        validate_password(password, users(username=ADMIN_USERNAME))
        users.objects.create_superuser(username=ADMIN_USERNAME, email="", password=password)
        return password
    if admin.check_password(FORMER_ADMIN_PASSWORD):
        validate_password(password, admin)
        admin.set_password(password)
        admin.save(update_fields=["password"])
        return password
    return None
