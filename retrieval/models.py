"""The detection index kept per reference source, enrichment traces and reference
selections (agents themselves live in catalog.models)."""

from __future__ import annotations

import uuid

from django.contrib.postgres.fields import ArrayField
from django.db import models
from pgvector.django import VectorField

from catalog.embedder import DIMENSIONS


class SourceProfile(models.Model):
    """A source's description and tags embedded for semantic detection (seed 000's
    "embed descriptions + tags"), recomputed when that text or the model changes."""

    source = models.OneToOneField("catalog.ReferenceSource", on_delete=models.CASCADE, primary_key=True,
                                  related_name="profile")
    model = models.CharField(max_length=100)
    text_sha256 = models.CharField(max_length=64)
    embedding = VectorField(dimensions=DIMENSIONS)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"profile of {self.source_id}"


class SourceMentions(models.Model):
    """What a source's content points at, for transitive discovery: reference-id
    mentions and markdown link targets (paths relative to the source root), extracted
    once per content fingerprint."""

    source = models.OneToOneField("catalog.ReferenceSource", on_delete=models.CASCADE, primary_key=True,
                                  related_name="mentions")
    fingerprint = models.CharField(max_length=64)
    ids = ArrayField(models.CharField(max_length=100), default=list)
    links = ArrayField(models.CharField(max_length=1024), default=list)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"mentions of {self.source_id}"


class Trace(models.Model):
    """Why an enrichment injected, hinted or withheld each reference."""

    class Surface(models.TextChoices):
        PROMPT = "prompt"
        TOOL_RESULT = "tool_result"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    agent = models.ForeignKey("catalog.Agent", on_delete=models.SET_NULL, null=True, blank=True, related_name="traces")
    caller = models.CharField(max_length=150, help_text="Agent or user name at the time of the call.")
    surface = models.CharField(max_length=16, choices=Surface.choices)
    # Null, not "": a text that was not kept differs from an empty one that was.
    text = models.TextField(null=True, blank=True,  # noqa: DJ001
                            help_text="The text as received, before enrichment; null when not stored "
                                      "(LECTERN_TRACE_STORE_TEXT off).")
    steps = models.JSONField(default=list, help_text="Each pass's candidates and decisions, in order.")
    hints = models.JSONField(default=list)
    degraded = models.CharField(max_length=200, blank=True)
    took_ms = models.FloatField(default=0.0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["agent", "-created_at"], name="trace_agent_recent"),
                   models.Index(fields=["created_at"], name="trace_created")]  # retention purges by age

    def __str__(self) -> str:
        return f"trace {self.id}"


class Selection(models.Model):
    """An agent's standing authorisation to read a reference's files, granted by
    selectReferences or an @id expansion, bound to the content it was granted on."""

    class Via(models.TextChoices):
        SELECT = "select"
        MENTION = "mention"

    agent = models.ForeignKey("catalog.Agent", on_delete=models.CASCADE, related_name="selections")
    source = models.ForeignKey("catalog.ReferenceSource", on_delete=models.CASCADE, related_name="selections")
    via = models.CharField(max_length=16, choices=Via.choices)
    fingerprint = models.CharField(max_length=64, blank=True)
    trace = models.ForeignKey(Trace, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]
        constraints = [models.UniqueConstraint(fields=["agent", "source"], name="selection_unique_per_agent")]

    def __str__(self) -> str:
        return f"{self.agent_id} -> {self.source_id}"
