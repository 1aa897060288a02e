"""The playground's "why not this document?" form: the search just run (the playground's
own fields, carried as hidden inputs) and the document to explain, written `source/path`
as a hit names it. It reads and validates; pages.py explains."""

from __future__ import annotations

from typing import Any

from django import forms

from catalog.models import Document, ReferenceSource
from retrieval.search.forms import SEARCH, PlaygroundForm


class WhyNotForm(PlaygroundForm):
    document = forms.CharField(
        max_length=1200, label="Document",
        help_text="source/path, as a hit names it: type a few letters to pick one of the catalog's documents.")

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("kind") != SEARCH:
            self.add_error(None, "Only a search is explained: run a search query first.")
        catalog, written = data.get("catalog"), data.get("document", "").strip()
        if catalog is None or not written or "document" in self.errors:
            return data
        slug, _, path = written.partition("/")
        if not path:
            self.add_error("document", f"Write the source and the path, source/path (as a hit names it): "
                                       f"“{written}” names no source.")
        elif not ReferenceSource.objects.filter(catalog=catalog, slug=slug).exists():
            self.add_error("document", f"No source “{slug}” in catalog {catalog.slug}: pick a document from "
                                       "the list.")
        elif not Document.objects.filter(catalog=catalog, source__slug=slug, path=path).exists():
            self.add_error("document", f"No document “{path}” in source {slug} of catalog {catalog.slug}: pick "
                                       "one from the list.")
        else:
            data["source"], data["path"] = slug, path
        return data
