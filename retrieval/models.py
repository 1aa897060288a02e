"""The detection index kept per reference source, enrichment traces, reference
selections, and evaluation: stored test sets, runs and their per-query scores (agents
themselves live in catalog.models)."""

from __future__ import annotations

import uuid

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from pgvector.django import HnswIndex, VectorField

from catalog.embedder import DIMENSIONS


class SourceProfile(models.Model):
    """A source's description and tags embedded for semantic detection,
    recomputed when that text or the model changes."""

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
        CONVERSATION = "conversation"
        SEARCH = "search"
        FILE = "file"  # a reference file an agent read (its cite's text kept)

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
                   models.Index(fields=["created_at"], name="trace_created"),  # retention purges by age
                   # the traces list's filters by reference and by withheld: hints @> [...]
                   GinIndex(fields=["hints"], opclasses=["jsonb_path_ops"], name="trace_hints")]

    def __str__(self) -> str:
        return f"trace {self.id}"


class ServedText(models.Model):
    """The exact text of a passage Lectern served, once per fingerprint (sha256 of the
    text): what a cite resolves to after its source changed. Written with the trace that
    served it; purged with the traces, once no passage names it and it was not served
    since (retrieval.citations.services)."""

    fingerprint = models.CharField(max_length=64, primary_key=True)
    text = models.TextField()
    served_at = models.DateTimeField(help_text="When it was last served, to the hour: what the purge keeps it by.")

    def __str__(self) -> str:
        return self.fingerprint[:12]


class ServedPassage(models.Model):
    """One passage a trace served: where it was cut from, as its cite names it, and the
    approval that let it through (the request's id; null for an ungoverned source)."""

    trace = models.ForeignKey(Trace, on_delete=models.CASCADE, related_name="passages")
    catalog = models.ForeignKey("catalog.Catalog", on_delete=models.CASCADE, related_name="+")
    source = models.CharField(max_length=100, help_text="The source's slug when it was served.")
    path = models.CharField(max_length=1024)
    byte_start = models.BigIntegerField()
    byte_end = models.BigIntegerField()
    # No database constraint: a text is written once and may be purged apart from its rows.
    text = models.ForeignKey(ServedText, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+",
                             db_column="fingerprint")
    approval_id = models.BigIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["trace", "id"]
        indexes = [models.Index(fields=["catalog", "source", "path", "byte_start"], name="served_passage_cite"),
                   models.Index(fields=["text"], name="served_passage_text")]

    def __str__(self) -> str:
        return f"{self.source}/{self.path}#b{self.byte_start}-{self.byte_end}"


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


class EvaluationSet(models.Model):
    """A BEIR test set a curator uploaded (queries.jsonl and a qrels TSV) for one
    catalog, kept so the same questions can be asked of it again after a change: only
    the judged queries are kept, as BEIR evaluates only those. Its judgements name that
    catalog's documents, and who may not read the catalog may not read the set, so it
    runs on that catalog only; its name is unique there."""

    catalog = models.ForeignKey(
        "catalog.Catalog", null=True, on_delete=models.CASCADE, related_name="evaluation_sets",
        help_text="The catalog it was uploaded for and runs on; empty only for a set whose catalog was deleted "
                  "before sets had one (it runs nowhere).")
    name = models.CharField(max_length=100)
    description = models.CharField(max_length=500, blank=True)
    queries = models.JSONField(help_text="query id -> text, for the judged queries.")
    qrels = models.JSONField(help_text="query id -> {document id -> graded relevance}.")
    query_count = models.PositiveIntegerField()
    judgement_count = models.PositiveIntegerField()
    unjudged_count = models.PositiveIntegerField(default=0, help_text="Queries in the upload without a judgement "
                                                                      "(not kept).")
    created_by = models.CharField(max_length=150, help_text="The person's username, or the agent's name.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["catalog", "name"], name="evaluation_set_name_per_catalog",
                                               violation_error_message="A test set with this name exists already.")]

    def __str__(self) -> str:
        return self.name


class EvaluationRun(models.Model):
    """One evaluation of a catalog's search on a test set, mode by mode, done by the
    worker: how far it got, then every mode's metrics and latency at once (never a part
    of them), or the error that stopped it."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    catalog = models.ForeignKey("catalog.Catalog", on_delete=models.CASCADE, related_name="evaluation_runs")
    # RESTRICT, not PROTECT: a set with runs is kept, unless its catalog goes, with the runs
    query_set = models.ForeignKey(EvaluationSet, on_delete=models.RESTRICT, related_name="runs")
    modes = ArrayField(models.CharField(max_length=16))
    top_k = models.PositiveIntegerField(default=100, help_text="Documents ranked per query (Recall@100 reads 100).")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    stage = models.CharField(max_length=16, blank=True, help_text="The mode being run now.")
    progress = models.PositiveSmallIntegerField(default=0, validators=[MaxValueValidator(100)])
    queries_done = models.PositiveIntegerField(default=0, help_text="Searches done, over every mode.")
    queries_total = models.PositiveIntegerField(default=0)
    metrics = models.JSONField(default=list, blank=True,
                               help_text="Per mode, in the order of modes; written when the run succeeds.")
    withheld = ArrayField(models.CharField(max_length=100), default=list, blank=True,
                          help_text="Sources the gate keeps from a person, so left out of every ranking.")
    judged_documents = models.PositiveIntegerField(default=0)
    missing_documents = models.PositiveIntegerField(
        default=0, help_text="Judged documents the catalog has no document for (by its id or path).")
    ranking = models.JSONField(null=True, blank=True, help_text=(
        "The catalog's ranking settings it ran with, as Catalog.ranking stores them (their difference from "
        "the defaults); null: a run from before runs recorded them."))
    error = models.TextField(blank=True)
    created_by = models.CharField(max_length=150, help_text="The person's username, or the agent's name.")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["status"], name="evaluationrun_status")]

    def __str__(self) -> str:
        return f"evaluation {self.pk} of {self.catalog_id} ({self.status})"


class EvaluationQuery(models.Model):
    """One query of a run with its scores in every mode: what the wins, ties and
    losses between two modes are counted from."""

    run = models.ForeignKey(EvaluationRun, on_delete=models.CASCADE, related_name="queries")
    query_id = models.CharField(max_length=200)
    text = models.TextField()
    scores = models.JSONField(help_text='mode -> {"ndcg_at_10", "recall_at_100", "mrr_at_10", "ms"}.')

    class Meta:
        ordering = ["run", "query_id"]
        constraints = [models.UniqueConstraint(fields=["run", "query_id"], name="evaluationquery_unique_per_run")]

    def __str__(self) -> str:
        return f"{self.query_id} in evaluation {self.run_id}"


# --- facts and memory, per agent and end user -------------------------------------

END_USER_MAX = 200  # characters of an end user's id, as the agent names them


class TuningRun(models.Model):
    """A search over a catalog's ranking settings on a test set, judged held out
    (retrieval.evaluation.tuning); applying its choice is refused unless the held-out
    nDCG@10 gain is positive (retrieval.evaluation.tuning_runs)."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    catalog = models.ForeignKey("catalog.Catalog", on_delete=models.CASCADE, related_name="tuning_runs")
    query_set = models.ForeignKey(EvaluationSet, on_delete=models.RESTRICT, related_name="tuning_runs")
    class Kind(models.TextChoices):
        SETTINGS = "settings"  # ranking settings, searched with k-fold cross-validation
        CHUNKING = "chunking"  # a chunk size and overlap, built as a shadow catalog and evaluated

    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.SETTINGS)
    proposal = models.JSONField(default=dict, blank=True, help_text="A chunking run's {chunk_size, chunk_overlap}.")
    shadow = models.ForeignKey("catalog.Catalog", on_delete=models.SET_NULL, null=True, blank=True, related_name="+",
                               help_text="A chunking run's shadow while it waits to be applied; dropped after.")
    folds = models.PositiveSmallIntegerField(default=5, validators=[MinValueValidator(2), MaxValueValidator(10)])
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    stage = models.CharField(max_length=16, blank=True, help_text="grid, then held out.")
    progress = models.PositiveSmallIntegerField(default=0, validators=[MaxValueValidator(100)])
    current = models.JSONField(default=dict, blank=True, help_text="The catalog's settings when the run started.")
    chosen = models.JSONField(default=dict, blank=True, help_text="The best settings on every query.")
    report = models.JSONField(default=dict, blank=True, help_text="retrieval.evaluation.tuning.TuningReport.")
    error = models.TextField(blank=True)
    created_by = models.CharField(max_length=150)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    applied_at = models.DateTimeField(null=True, blank=True)
    applied_by = models.CharField(max_length=150, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"tuning {self.pk} of {self.catalog_id}"

    @property
    def gain(self) -> float | None:
        metrics = self.report.get("metrics", {})
        return metrics["ndcg_at_10"]["gain"] if "ndcg_at_10" in metrics else None


class Fact(models.Model):
    """A key=value an agent keeps about one of its end users ("name=Steve"): set and
    deleted over the API, shown to curators, injected into that user's conversations."""

    agent = models.ForeignKey("catalog.Agent", on_delete=models.CASCADE, related_name="facts")
    user_id = models.CharField(max_length=END_USER_MAX)
    key = models.CharField(max_length=100)
    value = models.CharField(max_length=1000)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["agent", "user_id", "key"]
        constraints = [models.UniqueConstraint(fields=["agent", "user_id", "key"], name="fact_key")]

    def __str__(self) -> str:
        return f"{self.key}={self.value}"


class MemoryEntry(models.Model):
    """What an agent asked Lectern to remember about one of its end users
    (`store_memory`), searched by keyword and by meaning for that user's conversations.
    The same text stored again is one entry, remembered again (`stored_at`, `times`);
    only the end user's erasure deletes entries."""

    agent = models.ForeignKey("catalog.Agent", on_delete=models.CASCADE, related_name="memories")
    user_id = models.CharField(max_length=END_USER_MAX)
    content = models.TextField()
    content_sha256 = models.CharField(max_length=64, help_text="Of the text with its spacing and case folded.")
    keywords = ArrayField(models.CharField(max_length=100), default=list,
                          help_text="The keywords of the text, which lexical search matches.")
    embedding = VectorField(dimensions=DIMENSIONS, null=True, blank=True)
    times = models.PositiveIntegerField(default=1, help_text="How often the agent stored this text.")
    created_at = models.DateTimeField(auto_now_add=True)
    stored_at = models.DateTimeField(help_text="When the agent last stored it: what recency counts from.")

    class Meta:
        ordering = ["-stored_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["agent", "user_id", "content_sha256"], name="memory_once")]
        indexes = [
            models.Index(fields=["agent", "user_id", "-stored_at"], name="memory_recent"),
            GinIndex(fields=["keywords"], name="memory_keywords"),
            HnswIndex(name="memory_embedding_hnsw", fields=["embedding"], m=16, ef_construction=64,
                      opclasses=["vector_cosine_ops"]),
        ]

    def __str__(self) -> str:
        return f"memory {self.pk} of {self.user_id}"
