"""What retrieval adds to the curator's source page (catalog.panels; RetrievalConfig.ready
registers it): the reference ids the source's content mentions and the markdown links
it holds, each resolved to the catalog's source it names, i.e. the edges transitive
discovery follows from it (retrieval.enrichment.discovery). They are read as discovery
reads them: extracted once per content fingerprint and kept (SourceMentions), so the
first look at a changed source extracts them, as the first enrichment would."""

from __future__ import annotations

from django.db.models.functions import Lower
from django.http import HttpRequest

from catalog.models import Catalog, ReferenceSource
from catalog.panels import Panel
from retrieval.enrichment.detection import source_cards
from retrieval.enrichment.discovery import MAX_DEPTH, link_sources, own_id, source_mentions
from retrieval.models import EvaluationRun

SHOWN = 50  # edges of each kind listed; past them the panel says how many more


def source_discovery(request: HttpRequest, source: ReferenceSource) -> Panel:
    (card,) = source_cards([source])
    ids, links = source_mentions([card]).get(source.pk, (set(), set()))
    wanted = {own_id(source.catalog.slug, ident) for ident in ids} - {"", source.slug.lower()}
    mentioned = list(ReferenceSource.objects.filter(catalog_id=source.catalog_id).annotate(key=Lower("slug"))
                     .filter(key__in=wanted).exclude(pk=source.pk).order_by("slug").values("slug", "name"))
    globs = source_cards(ReferenceSource.objects.filter(catalog_id=source.catalog_id, kind=ReferenceSource.Kind.GLOB)
                         .select_related("catalog")) if links else []
    landing = link_sources(catalog_id=source.catalog_id, cards=globs, links=links)
    resolved = sorted((link, slug) for link, slug in landing.items() if slug != source.slug)
    elsewhere = sorted(link for link in links if link not in landing)
    return Panel("retrieval/partials/discovery_panel.html", {
        "source": source, "mentioned": mentioned[:SHOWN], "mentioned_more": max(len(mentioned) - SHOWN, 0),
        "links": resolved[:SHOWN], "links_more": max(len(resolved) - SHOWN, 0),
        "elsewhere": elsewhere[:SHOWN], "elsewhere_more": max(len(elsewhere) - SHOWN, 0), "depth": MAX_DEPTH,
        "indexed": source.fingerprint != "",
    }, order=20)


def evaluation_notes(catalog: Catalog | None, source: ReferenceSource | None) -> list[str]:
    """A catalog's evaluation runs go with it (their test sets stay)."""
    if catalog is None:
        return []
    runs = EvaluationRun.objects.filter(catalog=catalog).count()
    return [f"{runs} evaluation run{'s' if runs != 1 else ''} and their scores (the test sets stay)"] if runs else []


def register() -> None:
    from catalog.panels import deletion_notes_register, source_panel_register

    source_panel_register("discovery", source_discovery)
    deletion_notes_register("evaluations", evaluation_notes)
