"""Sections the layers above add to catalog's pages, without catalog importing them.

A source's page shows what catalog knows (settings, documents, chunks, runs) and what
only the layers above know: its approval state and history (approvals), the mentions
and links transitive discovery follows from it (retrieval). A delete confirmation says
what goes with a source or a catalog, their rows included. Catalog cannot import
those layers (it is the floor they stand on), so, as with catalog.signals, it asks and
they answer: each registers a function in its AppConfig.ready, and the page renders
what each returns in the order given. A panel's function reads only; it gets the
request (for who is asking) and the source.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.http import HttpRequest

from catalog.models import Catalog, ReferenceSource


@dataclass(frozen=True)
class Panel:
    """A section of a page: a template rendered with the page's context and these values."""

    template: str
    context: dict[str, Any] = field(default_factory=dict)
    order: int = 100


SourcePanel = Callable[[HttpRequest, ReferenceSource], Panel | None]
# What also goes when a source (catalog None) or a catalog (source None) is deleted:
# one sentence per kind of row, e.g. "3 approval requests and their decisions".
DeletionNotes = Callable[[Catalog | None, ReferenceSource | None], list[str]]

_source_panels: dict[str, SourcePanel] = {}
_deletion_notes: dict[str, DeletionNotes] = {}


def source_panel_register(name: str, panel: SourcePanel) -> None:
    """Add a section to every source page (registering a name again replaces it)."""
    _source_panels[name] = panel


def deletion_notes_register(name: str, notes: DeletionNotes) -> None:
    _deletion_notes[name] = notes


def source_panels(request: HttpRequest, source: ReferenceSource) -> list[Panel]:
    panels = [panel for make in _source_panels.values() if (panel := make(request, source)) is not None]
    return sorted(panels, key=lambda panel: panel.order)


def deletion_notes(*, catalog: Catalog | None = None, source: ReferenceSource | None = None) -> list[str]:
    return [note for notes in _deletion_notes.values() for note in notes(catalog, source)]
