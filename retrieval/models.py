"""Agents (API callers with a bearer token and a profile), the detection index kept
per reference source, enrichment traces and reference selections."""

from __future__ import annotations

import hashlib
import secrets
import uuid

from django.contrib.postgres.fields import ArrayField
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from pgvector.django import VectorField

from catalog.embedder import DIMENSIONS

TOKEN_PREFIX = "lct_"


def hash_token(token: str) -> str:
    """Tokens are 256-bit random strings, so a plain sha256 is a safe at-rest form."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


class Agent(models.Model):
    """An API caller and its profile (seed 003): which references it starts with, how
    they reach it (preloaded into its instructions or searched with rag_search), and
    the thresholds detection uses for it."""

    class Strategy(models.TextChoices):
        PRELOAD = "preload", "preload (content in the startup instructions, within the budget)"
        RAG = "rag", "rag (startup instructions list references; content via rag_search)"

    name = models.CharField(max_length=100, unique=True)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    token_hint = models.CharField(max_length=12, editable=False, help_text="First characters, to tell tokens apart.")
    catalogs = models.ManyToManyField("catalog.Catalog", related_name="agents", blank=True)
    is_active = models.BooleanField(default=True)
    is_curator = models.BooleanField(default=False, help_text="May trigger reindexing of its catalogs.")
    strategy = models.CharField(max_length=8, choices=Strategy.choices, default=Strategy.PRELOAD)
    preselected = models.ManyToManyField(
        "catalog.ReferenceSource", related_name="preselected_by", blank=True,
        help_text="References pinned for this agent, beside those whose mode is preselected.",
    )
    token_budget = models.PositiveIntegerField(
        default=12_000, validators=[MinValueValidator(100), MaxValueValidator(1_000_000)],
        help_text="Tokens the startup instructions may use.",
    )
    default_top_k = models.PositiveSmallIntegerField(
        default=5, validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text="Results per rag_search call when the caller gives no top_k.",
    )
    semantic_threshold = models.FloatField(
        default=0.30, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Lowest cosine similarity between a text and a source's profile for a semantic hint.",
    )
    semantic_margin = models.FloatField(
        default=0.10, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="A semantic hint must also score within this much of the best semantic match.",
    )
    max_hints = models.PositiveSmallIntegerField(
        default=5, validators=[MinValueValidator(1), MaxValueValidator(50)],
        help_text="Most references hinted per enriched text.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    # DRF's IsAuthenticated asks the request's user this.
    is_authenticated = True


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
    agent = models.ForeignKey(Agent, on_delete=models.SET_NULL, null=True, blank=True, related_name="traces")
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

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="selections")
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
